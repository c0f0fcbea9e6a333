"""Fixtures for the CLI tests: a scripted Tickwheel server per test, a clean
environment, and ``cli(*argv)`` running ``main()`` in-process."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from tests.unit.sdk.fake_tickwheel import FakeTickwheel
from tickwheel_server.cli.main import main


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str

    @property
    def last_line(self) -> str:
        return self.out.rstrip("\n").splitlines()[-1]


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TICKWHEEL_ADDRESS", "TICKWHEEL_API_KEY", "TICKWHEEL_ADMIN_TOKEN"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def fake() -> Iterator[FakeTickwheel]:
    with FakeTickwheel() as server:
        yield server


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., Result]:
    def run(*argv: str) -> Result:
        code = main(list(argv))
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


@pytest.fixture
def tenant(fake: FakeTickwheel, tmp_path) -> list[str]:
    """Global options reaching the fake as its tenant (the key in a file, as it should be)."""
    path = tmp_path / "api-key"
    path.write_text(fake.api_key + "\n")
    return ["--address", fake.address, "--api-key-file", str(path)]


@pytest.fixture
def operator(fake: FakeTickwheel, tmp_path) -> list[str]:
    """Global options reaching the fake as an operator (the token in a file)."""
    path = tmp_path / "admin-token"
    path.write_text(fake.admin_token + "\n")
    return ["--address", fake.address, "--admin-token-file", str(path)]
