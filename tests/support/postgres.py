"""A throwaway PostgreSQL for the test session (pytest plugin).

One server per test session: ``initdb`` into a temporary folder (in RAM
under /dev/shm when there is room; as the ``postgres`` user when the tests
run as root, since initdb refuses root), a free loopback port, its unix socket in that folder, settings that trade
durability for speed (``fsync=off`` …), SERIALIZABLE as the default isolation
(CockroachDB's), up to 200 connections. It is stopped and its folder deleted
at the end of the session.

Fixtures:

- ``postgres_url`` (per test): a fresh database created from the session's
  template and dropped afterwards, as a ``postgresql+psycopg://…`` URL for
  ``create_store_engine``.
- ``migrated_postgres_url`` (per test): the same, but the database already
  holds the schema: a copy of a second template that ``migrate()`` (the
  code under test) ran on once per session. What a test sees is what
  ``migrate()`` on an empty database leaves, without running the migrations
  again for each test; ``migrate()`` on it applies nothing. Tests of the
  migrations themselves take ``postgres_url``.
- ``postgres_server`` (per test): the running server, with ``stop()``,
  ``start()`` and ``restart()`` for fault tests; it is started again after
  the test if the test left it stopped.
- ``postgres_instance`` (session): the same server, for session-scoped
  fixtures (``create_database()``/``drop_database()``/``url()``).

Environment:

- ``TICKWHEEL_TEST_PG=postgresql://user:password@host:port/postgres``: use
  that running server instead (the user needs CREATEDB). Tests that need
  ``postgres_server`` (stop/start) are then skipped, saying why: that server
  is not ours to stop (the etcd plugin does the same).
- ``TICKWHEEL_PG_BINDIR``: where ``initdb`` and ``postgres`` are, when not in
  ``/usr/lib/postgresql/<version>/bin`` or on PATH.
- ``TICKWHEEL_TEST_TMPDIR``: the folder to put the server's folder in.

When PostgreSQL is not installed, every test that needs it fails (never
skips) with a message saying how to install it. SIGTERM interrupts the
session like Ctrl-C so the server is still stopped; a session killed outright
leaves its folder, which the next session removes (stopping its server). Tests that use these
fixtures get the ``postgres`` marker, so ``-m "not postgres"`` deselects them.
"""

from __future__ import annotations

import atexit
import os
import pwd
import re
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from sqlalchemy.engine import make_url

ENV_EXTERNAL = "TICKWHEEL_TEST_PG"
ENV_BINDIR = "TICKWHEEL_PG_BINDIR"
ENV_TMPDIR = "TICKWHEEL_TEST_TMPDIR"
SUPERUSER = "postgres"
HOST = "127.0.0.1"
START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0
SHM_MIN_FREE = 1 << 30
DIR_PREFIX = "tickwheel-pg-"
OWNER_FILE = "owner"

# Durability is worthless for a database that is deleted in a minute;
# the rest keeps a test run quiet, deterministic and fast.
SERVER_SETTINGS = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "wal_level": "minimal",
    "max_wal_senders": "0",
    "max_connections": "200",
    "shared_buffers": "64MB",
    "autovacuum": "off",
    "default_transaction_isolation": "serializable",
    "deadlock_timeout": "100ms",
    "dynamic_shared_memory_type": "mmap",  # segments live in the data folder, deleted with it
    "timezone": "UTC",
    "log_timezone": "UTC",
    "log_min_messages": "warning",
    "log_checkpoints": "off",
}

INSTALL_HINT = (
    "Install it with `bash scripts/install.sh` (Debian's postgresql package), set "
    f"{ENV_BINDIR} to the folder holding initdb and postgres, or set "
    f"{ENV_EXTERNAL}=postgresql://user:password@host:port/postgres to use a running server."
)


class PostgresConnectionLeakWarning(UserWarning):
    """A test left connections open to its database (they were terminated)."""


class PostgresUnavailable(RuntimeError):
    """The throwaway PostgreSQL could not be found or started."""


# ---------------------------------------------------------------- discovery


def find_bindir() -> Path | None:
    """The folder with ``initdb`` and ``postgres``: env, then Debian's layout (newest), then PATH."""
    explicit = os.environ.get(ENV_BINDIR)
    if explicit:
        return Path(explicit)
    candidates = []
    for bindir in Path("/usr/lib/postgresql").glob("*/bin"):
        if (bindir / "initdb").is_file() and (bindir / "postgres").is_file():
            version = re.match(r"\d+", bindir.parent.name)
            candidates.append((int(version.group()) if version else 0, bindir))
    if candidates:
        return max(candidates)[1]
    initdb = shutil.which("initdb")
    if initdb and (Path(initdb).parent / "postgres").is_file():
        return Path(initdb).parent
    return None


def free_port() -> int:
    """A loopback TCP port nobody is listening on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def _world_traversable(path: Path) -> bool:
    for folder in [path, *path.parents]:
        if not folder.stat().st_mode & stat.S_IXOTH:
            return False
    return True


def _scratch_parent(demoted: bool) -> Path:
    """Where the data folder goes: ``TICKWHEEL_TEST_TMPDIR`` (scripts/test.sh sets
    it and deletes it afterwards), else RAM (/dev/shm) when there is room, else
    the temp folder.

    On a disk, CREATE DATABASE costs ~0.4 s per test on a busy VM even with
    fsync off (dirty-page writeback); on tmpfs it costs ~20 ms.
    """
    chosen = os.environ.get(ENV_TMPDIR)
    if chosen and (not demoted or _world_traversable(Path(chosen))):
        return Path(chosen)
    shm = Path("/dev/shm")
    try:
        free = os.statvfs(shm)
        if free.f_bavail * free.f_frsize >= SHM_MIN_FREE and os.access(shm, os.W_OK | os.X_OK):
            return shm
    except OSError:
        pass
    parent = Path(tempfile.gettempdir())
    if demoted and not _world_traversable(parent):
        parent = Path("/tmp")
    return parent


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_abandoned_servers(parent: Path) -> None:
    """Delete the folders (and stop the servers) of test sessions that died without cleaning up.

    A session killed outright (SIGKILL, a crash) cannot run its finalizers.
    Its folder names the session's pid in ``owner``; when that process is
    gone, its postmaster (if still running, and only if its command line
    names that folder) gets an immediate shutdown and the folder is deleted.
    """
    for folder in parent.glob(f"{DIR_PREFIX}*"):
        try:
            owner = int((folder / OWNER_FILE).read_text().strip())
        except (OSError, ValueError):
            continue  # not ours, or still being set up
        if _pid_alive(owner):
            continue
        try:
            postmaster = int((folder / "data" / "postmaster.pid").read_text().split("\n", 1)[0])
            cmdline = Path(f"/proc/{postmaster}/cmdline").read_bytes()
            if str(folder).encode() in cmdline:
                os.kill(postmaster, signal.SIGQUIT)
        except (OSError, ValueError):
            pass
        shutil.rmtree(folder, ignore_errors=True)


def _child_env() -> dict[str, str]:
    # libpq/PG* variables from the caller's shell must not steer our server.
    return {key: value for key, value in os.environ.items() if not key.startswith("PG")}


def _demoted(user: pwd.struct_passwd) -> list[str]:
    """The command prefix running a program as ``user`` (its group, no others)."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        raise PostgresUnavailable(f"tests run as root, and running PostgreSQL as '{user.pw_name}' needs setpriv "
                                  "(util-linux). " + INSTALL_HINT)
    return [setpriv, f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups", "--"]


# ------------------------------------------------------------------- servers


class PostgresServer:
    """A PostgreSQL server this test session owns: ``initdb``'d, started, stopped, deleted.

    When running as root, initdb and postgres run as the ``postgres`` user,
    which owns the temporary folder. ``port`` stays the same across
    :meth:`stop`/:meth:`start`, so URLs handed out stay valid.
    """

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        for program in ("initdb", "postgres"):
            if not (bindir / program).is_file():
                raise PostgresUnavailable(f"{bindir / program} does not exist. {INSTALL_HINT}")
        self._run_as: pwd.struct_passwd | None = None
        if os.geteuid() == 0:
            try:
                self._run_as = pwd.getpwnam(SUPERUSER)
            except KeyError:
                raise PostgresUnavailable(
                    "tests run as root and initdb refuses root, but there is no 'postgres' user to run it as. "
                    + INSTALL_HINT
                ) from None
        parent = _scratch_parent(self._run_as is not None)
        _remove_abandoned_servers(parent)
        self.base_dir = Path(tempfile.mkdtemp(prefix=DIR_PREFIX, dir=parent))
        (self.base_dir / OWNER_FILE).write_text(f"{os.getpid()}\n")
        if self._run_as is not None:
            os.chown(self.base_dir, self._run_as.pw_uid, self._run_as.pw_gid)
        self.data_dir = self.base_dir / "data"
        self.log_path = self.base_dir / "postgres.log"
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._template = f"tw_template_{uuid.uuid4().hex[:12]}"
        self._migrated = _MigratedTemplate(self)

    # -- lifecycle --------------------------------------------------------

    def _popen(self, args: list[str], **kwargs: object) -> subprocess.Popen[bytes]:
        """Start ``args`` (as the ``postgres`` user when we are root).

        The demotion is setpriv's, in the new program, not Popen's
        ``user``/``group``: those make Python fork() where it otherwise
        vfork()s, and fork() runs the pthread_atfork handlers of every
        library loaded, gRPC's among them (it keeps threads of its own in
        this process while a test makes calls). A postmaster forked so while
        other threads were in gRPC calls died before logging anything."""
        if self._run_as is not None:
            args = [*_demoted(self._run_as), *args]
        return subprocess.Popen(args, cwd=self.base_dir, env=_child_env(), **kwargs)  # type: ignore[call-overload]

    def initdb(self) -> None:
        process = self._popen(
            [
                str(self.bindir / "initdb"),
                "--pgdata", str(self.data_dir),
                "--username", SUPERUSER,
                "--auth", "trust",
                "--encoding", "UTF8",
                "--locale", "C",
                "--no-sync",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        output, _ = process.communicate(timeout=START_TIMEOUT)
        if process.returncode != 0:
            raise PostgresUnavailable(f"initdb failed (exit {process.returncode}):\n{output.decode(errors='replace')}")

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self, timeout: float = START_TIMEOUT) -> None:
        """Start the server (first time: on a free port) and wait until it accepts connections."""
        if self.running:
            return
        if not self.data_dir.exists():
            self.initdb()
        fixed_port = self.port != 0
        for _ in range(1 if fixed_port else 5):
            if not fixed_port:
                self.port = free_port()
            self._spawn()
            try:
                self._wait_ready(timeout)
                return
            except PostgresUnavailable:
                if fixed_port or "could not bind" not in self.log_tail() and "already in use" not in self.log_tail():
                    raise
                # Someone took the port between free_port() and bind(): try another.
        raise PostgresUnavailable(f"no free port for PostgreSQL after 5 tries:\n{self.log_tail()}")

    def _spawn(self) -> None:
        args = [
            str(self.bindir / "postgres"),
            "-D", str(self.data_dir),
            "-p", str(self.port),
            "-h", HOST,
            "-k", str(self.base_dir),
        ]
        for name, value in SERVER_SETTINGS.items():
            args += ["-c", f"{name}={value}"]
        with open(self.log_path, "ab") as log:
            self._process = self._popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                self._process = None
                raise PostgresUnavailable(f"postgres exited during start-up:\n{self.log_tail()}")
            try:
                with psycopg.connect(self.conninfo(), connect_timeout=2):
                    return
            except psycopg.OperationalError as exc:  # not listening yet, or starting up
                last_error = exc
            time.sleep(0.02)  # polling an external process; there is no event to await
        self.stop(mode="immediate")
        raise PostgresUnavailable(f"postgres not ready after {timeout:.0f}s ({last_error}):\n{self.log_tail()}")

    def stop(self, mode: str = "fast", timeout: float = STOP_TIMEOUT) -> None:
        """Stop the server: ``fast`` (SIGINT: abort sessions, checkpoint) or
        ``immediate`` (SIGQUIT: like a crash; the next start runs recovery)."""
        signals = {"fast": signal.SIGINT, "immediate": signal.SIGQUIT}
        if mode not in signals:
            raise ValueError(f"mode must be one of {sorted(signals)}")
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signals[mode])
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=timeout)

    def restart(self, mode: str = "fast") -> None:
        """Stop then start again on the same port; open connections are broken."""
        self.stop(mode=mode)
        self.start()

    def ensure_running(self) -> None:
        if not self.running:
            self.start()

    def close(self) -> None:
        """Stop the server and delete its folder."""
        try:
            self.stop()
        finally:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    # -- databases --------------------------------------------------------

    def conninfo(self, database: str = "postgres") -> str:
        return psycopg.conninfo.make_conninfo(host=HOST, port=self.port, user=SUPERUSER, dbname=database)

    def url(self, database: str = "postgres") -> str:
        """A SQLAlchemy URL (``postgresql+psycopg://``) for ``database``."""
        return f"postgresql+psycopg://{SUPERUSER}@{HOST}:{self.port}/{database}"

    def setup_template(self) -> None:
        _create_template(self.conninfo(), self._template)

    def create_database(self) -> str:
        """Create a fresh database from the session template; return its name."""
        return _create_database(self.conninfo(), self._template)

    def create_migrated_database(self) -> str:
        """Create a fresh database holding the migrated schema; return its name."""
        return _create_database(self.conninfo(), self._migrated.name())

    def drop_database(self, name: str) -> None:
        _drop_database(self.conninfo(), name)


class ExternalPostgres:
    """A running server named by ``TICKWHEEL_TEST_PG``; we only create and drop databases on it."""

    def __init__(self, url: str) -> None:
        parsed = make_url(url)
        backend = parsed.drivername.partition("+")[0]
        if backend not in ("postgresql", "postgres"):
            raise PostgresUnavailable(f"{ENV_EXTERNAL} must be a postgresql:// URL, got {backend}://")
        self._url = parsed.set(drivername="postgresql+psycopg")
        self._template = f"tw_template_{uuid.uuid4().hex[:12]}"
        self._migrated = _MigratedTemplate(self)
        self.running = True

    def conninfo(self, database: str | None = None) -> str:
        url = self._url.set(database=database or self._url.database or "postgres")
        return url.set(drivername="postgresql").render_as_string(hide_password=False)

    def url(self, database: str = "postgres") -> str:
        return self._url.set(database=database).render_as_string(hide_password=False)

    def setup_template(self) -> None:
        _create_template(self.conninfo(), self._template)

    def create_database(self) -> str:
        return _create_database(self.conninfo(), self._template)

    def create_migrated_database(self) -> str:
        return _create_database(self.conninfo(), self._migrated.name())

    def drop_database(self, name: str) -> None:
        _drop_database(self.conninfo(), name)

    def ensure_running(self) -> None:
        pass

    def close(self) -> None:
        self._migrated.drop()
        _drop_database(self.conninfo(), self._template)


class _MigratedTemplate:
    """A template database holding the schema ``migrate()`` makes, built on first use.

    Built from the session's empty template by the code under test, so it
    follows every migration a branch adds. ``migrate()`` leaves no connection
    open to it (the engine is disposed, and dropping a connection waits for
    its server process to go), since CREATE DATABASE … TEMPLATE refuses a
    template that has one.
    """

    def __init__(self, server: PostgresServer | ExternalPostgres) -> None:
        self._server = server
        self._name: str | None = None

    def name(self) -> str:
        if self._name is None:
            from tickwheel_server.store import create_store_engine, migrate  # the code under test

            name = self._server.create_database()
            try:
                engine = create_store_engine(self._server.url(name))
                try:
                    migrate(engine)
                finally:
                    engine.dispose()
                _wait_unused(self._server.conninfo(), name)
            except BaseException:
                _drop_database(self._server.conninfo(), name)
                raise
            self._name = name
        return self._name

    def drop(self) -> None:
        if self._name is not None:
            _drop_database(self._server.conninfo(), self._name)
            self._name = None


def _create_template(conninfo: str, template: str) -> None:
    with psycopg.connect(conninfo, autocommit=True) as admin:
        admin.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'").format(
                sql.Identifier(template)
            )
        )


def _create_database(conninfo: str, template: str) -> str:
    name = f"tw_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(conninfo, autocommit=True) as admin:
        statement = sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(name), sql.Identifier(template))
        if admin.info.server_version >= 150000:
            # Copying the files beats WAL-logging every block for a tiny database.
            statement = sql.SQL("{} STRATEGY FILE_COPY").format(statement)
        admin.execute(statement)
    return name


def _connections_left(admin: psycopg.Connection, name: str, grace: float) -> int:
    """How many connections to ``name`` are still open after waiting up to ``grace`` seconds for them to go.

    A connection closed just before (engine.dispose() in a fixture teardown)
    has a server process that takes a moment to exit.
    """
    query = "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()"
    deadline = time.monotonic() + grace
    while True:
        row = admin.execute(query, (name,)).fetchone()
        left = int(row[0]) if row else 0
        if left == 0 or time.monotonic() >= deadline:
            return left
        time.sleep(0.02)  # waiting for other processes to exit; nothing to await


def _wait_unused(conninfo: str, name: str, grace: float = 10.0) -> None:
    """Return once nothing is connected to ``name`` (a template must have no connection)."""
    with psycopg.connect(conninfo, autocommit=True) as admin:
        left = _connections_left(admin, name, grace)
    if left:
        raise PostgresUnavailable(f"{left} connection(s) still open to {name} after {grace:.0f}s")


def _drop_database(conninfo: str, name: str, grace: float = 1.0) -> int:
    """Drop ``name``, terminating connections left to it; return how many there were
    (counted as left open only if still there after ``grace`` seconds)."""
    with psycopg.connect(conninfo, autocommit=True) as admin:
        left = _connections_left(admin, name, grace)
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
    return left


# ------------------------------------------------------------------ fixtures

_started: list[PostgresServer] = []


@atexit.register
def _stop_leftovers() -> None:
    # Finalizers normally do this; this covers an interpreter exiting early.
    for server in _started:
        server.close()


def _start_session_server() -> PostgresServer | ExternalPostgres:
    external = os.environ.get(ENV_EXTERNAL)
    if external:
        server: PostgresServer | ExternalPostgres = ExternalPostgres(external)
        server.setup_template()
        return server
    bindir = find_bindir()
    if bindir is None:
        raise PostgresUnavailable(
            "PostgreSQL is not installed: no initdb in /usr/lib/postgresql/*/bin or on PATH. " + INSTALL_HINT
        )
    server = PostgresServer(bindir)
    _started.append(server)
    try:
        server.start()
        server.setup_template()
    except BaseException:
        server.close()
        _started.remove(server)
        raise
    return server


def _finalize_on_sigterm() -> Callable[[], None]:
    """Make SIGTERM (``timeout``, a CI runner) interrupt pytest like Ctrl-C, so
    session finalizers stop the servers; returns the undo. Only when nobody
    else handles SIGTERM. A second SIGTERM kills at once."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return lambda: None

    def interrupt(_signum: int, _frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        raise KeyboardInterrupt("SIGTERM")

    signal.signal(signal.SIGTERM, interrupt)

    def undo() -> None:
        if signal.getsignal(signal.SIGTERM) is interrupt:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)

    return undo


@pytest.fixture(scope="session")
def postgres_instance() -> Iterator[PostgresServer | ExternalPostgres]:
    """The session's PostgreSQL server (started on first use, stopped at the end)."""
    problem = None
    try:
        server = _start_session_server()
    except (PostgresUnavailable, psycopg.Error, OSError) as exc:
        problem = f"PostgreSQL for the tests is unavailable: {exc}"
    if problem is not None:
        pytest.fail(problem, pytrace=False)
    undo_sigterm = _finalize_on_sigterm()
    try:
        yield server
    finally:
        server.close()
        if server in _started:
            _started.remove(server)  # type: ignore[arg-type]
        undo_sigterm()


@pytest.fixture
def postgres_server(postgres_instance: PostgresServer | ExternalPostgres) -> Iterator[PostgresServer]:
    """The throwaway server, for tests that stop/start/restart it; running again afterwards."""
    if not isinstance(postgres_instance, PostgresServer):
        # The one skip here: the caller chose a server that is not ours to stop.
        pytest.skip(f"stops and starts PostgreSQL; unset {ENV_EXTERNAL} to run it on a throwaway server")
    yield postgres_instance
    postgres_instance.ensure_running()


@pytest.fixture
def postgres_url(postgres_instance: PostgresServer | ExternalPostgres, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh, empty database for this test as a ``postgresql+psycopg://`` URL; dropped afterwards."""
    name = postgres_instance.create_database()
    yield postgres_instance.url(name)
    _drop_test_database(postgres_instance, name, request)


@pytest.fixture
def migrated_postgres_url(
    postgres_instance: PostgresServer | ExternalPostgres, request: pytest.FixtureRequest
) -> Iterator[str]:
    """A fresh database already holding the schema ``migrate()`` makes (a copy of
    the session's migrated template), as a ``postgresql+psycopg://`` URL; dropped afterwards."""
    name = postgres_instance.create_migrated_database()
    yield postgres_instance.url(name)
    _drop_test_database(postgres_instance, name, request)


def _drop_test_database(
    postgres_instance: PostgresServer | ExternalPostgres, name: str, request: pytest.FixtureRequest
) -> None:
    postgres_instance.ensure_running()  # a fault test may have left it stopped
    leaked = _drop_database(postgres_instance.conninfo(), name)
    if leaked:
        warnings.warn(
            PostgresConnectionLeakWarning(
                f"{request.node.nodeid} left {leaked} connection(s) open to its database; "
                "dispose engines (engine.dispose()) in the fixture that creates them"
            ),
            stacklevel=1,
        )


_FIXTURES = frozenset({"postgres_instance", "postgres_server", "postgres_url", "migrated_postgres_url"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.postgres)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "postgres: needs a real PostgreSQL server")
