"""Every file a command reads ends, whatever the operator names: ``/dev/zero``,
a FIFO written to forever, or merely a file far larger than its kind. The
command stops once it read its bound, with a one-line error naming the file
(exit 2 for the CLIs, ConfigError for the server's configuration), instead
of reading (and holding) it forever.

Covered: ``tickwheel job import`` (its lines), the CLI's ``--ca-cert`` and
``--dev`` folder, the server's ``--config`` and ``--admin-token-file``, the
worker's ``--tls-ca`` and ``--dev`` folder, ``tickwheel dev``'s own
``admin-token`` and ``dev-credentials.json``, and the SDK's
``TlsOptions.from_files``. Bounded before, and tested where they were
bounded: ``--payload-file`` and ``--file`` of ids (test_cli_jobs,
test_cli_jobbulk), ``apply -f`` (test_cli_apply), ``--holidays-ics``,
secret files (``read_secret_file``).
"""

from __future__ import annotations

import asyncio
import errno
import os
import threading
from pathlib import Path

import pytest

from tickwheel.options import TlsOptions
from tickwheel.shared.smallfiles import MAX_SMALL_FILE_BYTES
from tickwheel_server.cli.jobimport import MAX_SKIPPED_LINE_BYTES
from tickwheel.shared.secretargs import MAX_SECRET_BYTES
from tickwheel_server.config import ConfigError, load_server_config
from tickwheel_server.dev import run_dev
from tickwheel_worker.cli import worker_main

from tests.unit.test_webhook_config import ENV, server_args


def sparse(path: Path, size: int, first: bytes = b"") -> Path:
    """A file of ``size`` bytes: ``first``, then NUL bytes (no line break), none of them written."""
    with path.open("wb") as out:
        out.write(first)
        out.truncate(size)
    return path


def endless_fifo(path: Path) -> threading.Thread:
    """A FIFO whose writer writes NUL bytes until its reader goes away."""
    os.mkfifo(path)

    def write() -> None:
        chunk = bytes(1 << 16)
        try:
            with path.open("wb") as out:
                while True:
                    out.write(chunk)
        except (BrokenPipeError, OSError):
            return

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    return writer


def test_an_import_of_a_line_without_end_stops_with_the_line_named(cli, fake, tenant, tmp_path) -> None:
    good = b'{"name": "a", "cron": "0 0 * * *", "handler": "echo"}\n'
    path = sparse(tmp_path / "jobs.jsonl", len(good) + MAX_SKIPPED_LINE_BYTES + 2 * 2**20, good)
    result = cli(*tenant, "job", "import", str(path))
    assert result.code == 2, (result.code, result.err[-500:])
    assert f"{path} line 2: no line break in its first 64 MiB" in result.err, result.err


@pytest.mark.parametrize("source", ["/dev/zero", "fifo"])
def test_an_import_of_a_stream_without_end_ends(cli, fake, tenant, tmp_path, source) -> None:
    writer = None
    if source == "fifo":
        source = str(tmp_path / "jobs.fifo")
        writer = endless_fifo(Path(source))
    result = cli(*tenant, "job", "import", "--format", "jsonl", source)
    assert result.code == 2 and f"{source} line 1: no line break" in result.err, result.err
    if writer is not None:
        writer.join()  # its reader went away: the write failed


@pytest.mark.parametrize("make", ["/dev/zero", "large"])
def test_the_clis_small_files_refuse_what_never_ends(cli, fake, tenant, tmp_path, make) -> None:
    path = "/dev/zero" if make == "/dev/zero" else str(sparse(tmp_path / "ca.pem", MAX_SMALL_FILE_BYTES + 1))
    result = cli(*tenant, "--ca-cert", path, "job", "list")
    assert result.code == 2 and path in result.err and "more than" in result.err, result.err
    folder = tmp_path / "dev"
    folder.mkdir()
    (folder / "dev-credentials.json").symlink_to(path)
    result = cli("--dev", str(folder), "job", "list")
    assert result.code == 2 and "more than" in result.err, result.err


@pytest.mark.parametrize("make", ["/dev/zero", "large"])
def test_the_servers_files_refuse_what_never_ends(tmp_path, make) -> None:
    path = "/dev/zero" if make == "/dev/zero" else str(sparse(tmp_path / "file", MAX_SMALL_FILE_BYTES + 1))
    with pytest.raises(ConfigError, match="more than"):
        load_server_config(server_args("--config", path), ENV)
    with pytest.raises(ConfigError, match="more than"):
        load_server_config(server_args("--admin-token-file", path), {})


@pytest.mark.parametrize("make", ["/dev/zero", "large"])
@pytest.mark.parametrize("name", ["admin-token", "dev-credentials.json"])
async def test_tickwheel_devs_own_files_refuse_what_never_ends(tmp_path, make, name) -> None:
    """``tickwheel dev`` reads its data folder's admin token before the
    server starts and its saved credentials after: either one without end
    stops it with the file named (``dev_main`` prints the ConfigError as
    one line, exit 1), the server stopped again."""
    size = MAX_SECRET_BYTES if name == "admin-token" else MAX_SMALL_FILE_BYTES
    path = "/dev/zero" if make == "/dev/zero" else str(sparse(tmp_path / "big", size + 1))
    folder = tmp_path / "dev"
    folder.mkdir()
    (folder / name).symlink_to(path)
    with pytest.raises(ConfigError, match="more than") as raised:
        # A guard, not a timing: a dev server that read the file would serve until stopped.
        await asyncio.wait_for(run_dev("127.0.0.1:0", folder, http_listen="", stop=asyncio.Event()), 120)
    assert str(folder / name) in str(raised.value)


@pytest.mark.parametrize("make", ["/dev/zero", "large"])
def test_the_workers_files_refuse_what_never_ends(tmp_path, make, capsys, monkeypatch) -> None:
    monkeypatch.delenv("TICKWHEEL_ADDRESS", raising=False)
    monkeypatch.delenv("TICKWHEEL_WORKER_CREDENTIAL", raising=False)
    path = "/dev/zero" if make == "/dev/zero" else str(sparse(tmp_path / "ca.pem", MAX_SMALL_FILE_BYTES + 1))
    assert worker_main(["--address", "a:1", "--credential", "c", "--tls-ca", path]) == 2
    err = capsys.readouterr().err
    assert "--tls-ca" in err and "more than" in err and err.count("\n") == 1, err
    folder = tmp_path / "dev"
    folder.mkdir()
    (folder / "dev-credentials.json").symlink_to(path)
    assert worker_main(["--dev", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "more than" in err and err.count("\n") == 1, err


def test_the_sdks_pem_files_refuse_what_never_ends(tmp_path) -> None:
    for path in ("/dev/zero", sparse(tmp_path / "ca.pem", MAX_SMALL_FILE_BYTES + 1)):
        with pytest.raises(OSError) as raised:
            TlsOptions.from_files(ca_cert=path)
        assert (raised.value.errno, raised.value.filename) == (errno.EFBIG, str(path))
