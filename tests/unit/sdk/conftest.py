"""Fixtures for the SDK tests: a scripted Tickwheel server per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.unit.sdk.fake_tickwheel import FakeTickwheel


@pytest.fixture
def fake() -> Iterator[FakeTickwheel]:
    with FakeTickwheel() as server:
        yield server
