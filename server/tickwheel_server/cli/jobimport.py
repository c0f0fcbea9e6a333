"""``tickwheel job import FILE``: create the jobs of a JSON-lines or CSV
file through BatchCreateJobs, idempotently, and say what became of each line.

Lines are read as a stream (never the whole file at once, each line bounded
by :data:`MAX_LINE_BYTES`, a UTF-8 byte order mark at the file's start
dropped), turned into jobs by ``importrows`` and sent in
calls of ``--batch-size`` through the SDK's ``create_jobs``. Every line ends
as created, already existing (its request id had been seen: an import run
again creates nothing twice) or failed, with its line number, field and
reason. ``--parallel N`` calls are in flight at once (the server takes
concurrent batches of one tenant without conflicts); outcomes are still
recorded in the file's order. A line that cannot be read or parsed fails
alone; a call that fails as a whole (after the SDK's retries) fails its
lines, the calls already in flight beside it (at most N - 1) are recorded
as they were answered, and the lines after those are not sent.
``--failures FILE`` receives every failed line, as given, with its request
id added when it was sent, so that importing that file after fixing the
lines is idempotent with the first run.

Exit status: 0 when every line was created or already existed, 1 when any
failed, 2 for a usage error (nothing sent).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import sys
import textwrap
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, BinaryIO, TextIO

from tickwheel_server.cli import jsontext
from tickwheel_server.cli.context import Context
from tickwheel_server.cli.importrows import (
    IGNORED_KEYS,
    KNOWN_KEYS,
    RowError,
    canonical,
    derived_request_id,
    job_from_row,
    request_id_of,
)
from tickwheel_server.cli.output import printable
from tickwheel_server.cli.parse import UsageError
from tickwheel_server.cli.progress import ProgressLine, live_stream
from tickwheel_server.cli.tree import leaf

if TYPE_CHECKING:
    from concurrent.futures import Future

__all__ = ["MAX_LINE_BYTES", "register"]

MAX_LINE_BYTES = 4 * 1024 * 1024
"""A longer line fails unread: no call may carry more than 4 MiB anyway."""
MAX_SKIPPED_LINE_BYTES = 64 * 1024 * 1024
"""A line this long without a line break ends the import (``UsageError``):
no JSON lines or CSV file holds one, and one without end (``/dev/zero``, a
FIFO written to forever) would otherwise be skipped forever."""
MAX_BATCH = 1000
UTF8_BOM = b"\xef\xbb\xbf"
MAX_HELD_BYTES = 32 * 1024 * 1024
"""Lines held before a call is sent: a batch of long lines goes early."""
MAX_PARALLEL = 16
DEFAULT_PARALLEL = 4
"""Calls in flight by default: a single caller leaves the server idle while
it reads the file and while the answer travels (bench_create's load phase
takes 4 callers)."""
SHOWN_FAILURES = 50
"""Failures listed in the text summary (``--json`` lists them all)."""
FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".csv": "csv"}


def register(jobs: Any, parents: list[argparse.ArgumentParser]) -> None:
    keys = ", ".join(sorted(KNOWN_KEYS))
    p = leaf(jobs, "import", parents, run, auth="tenant",
             help="create the jobs of a JSON-lines or CSV file, idempotently",
             description=textwrap.fill(
                 "Create the jobs described by FILE, one per line (JSON lines: one object per line; CSV: a header "
                 "row, then one job per row), through BatchCreateJobs. Keys and columns are `job create`'s flags "
                 f"with _ for -: {keys}. In JSON lines values keep their JSON type (labels, headers and "
                 "concurrency_keys objects, payload any JSON value); in CSV those cells hold JSON text. id, tenant "
                 "and the other fields of a stored job are ignored. Each line's request id is its request_id, or "
                 "derived from its line number and content, so importing the same file again creates nothing "
                 "twice. Prints what was created, what already existed and what failed (line, field, reason); "
                 "exit status 1 when any line failed."))  # fmt: skip
    p.add_argument("file", metavar="FILE", help="the file ('-' reads stdin; then give --format)")
    p.add_argument("--format", choices=("jsonl", "csv"), help="default: from the extension (.jsonl .ndjson .json .csv)")
    p.add_argument("--batch-size", type=int, default=MAX_BATCH, metavar="N",
                   help=f"jobs per BatchCreateJobs call, 1 to {MAX_BATCH} (default {MAX_BATCH})")
    p.add_argument("--parallel", type=int, default=DEFAULT_PARALLEL, metavar="N",
                   help=f"BatchCreateJobs calls in flight at once, 1 to {MAX_PARALLEL} (default {DEFAULT_PARALLEL}); "
                        "outcomes are reported in the file's order either way")
    p.add_argument("--failures", metavar="FILE",
                   help="write the failed lines here, as given (with their request id), to fix and import again")


# --- reading -------------------------------------------------------------------------


@dataclass
class Line:
    """One line (a CSV record) of the file: its number, the row it holds or
    why it could not be read, and what to write to ``--failures`` for it."""

    number: int
    row: dict[str, Any] | None = None
    error: RowError | None = None
    raw: bytes | None = None  # JSON lines: the line as given (None when too long to keep)
    cells: list[str] | None = None  # CSV: the record's cells as given


class LineReader:
    """Binary lines of ``stream``, each at most :data:`MAX_LINE_BYTES`
    (a longer one comes back as None, skipped without being held), with the
    count of bytes read for the progress bar. ``UsageError`` for a line
    that runs past :data:`MAX_SKIPPED_LINE_BYTES` (a stream without line
    breaks, perhaps without end), once that much of it is read."""

    def __init__(self, stream: BinaryIO, name: str = "") -> None:
        self.stream = stream
        self.name = name
        self.bytes_read = 0
        self.lines = 0

    def __iter__(self) -> Iterator[bytes | None]:
        while True:
            line = self.stream.readline(MAX_LINE_BYTES + 1)
            if not line:
                return
            self.lines += 1
            at_start = self.bytes_read == 0
            self.bytes_read += len(line)
            if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
                skipped = len(line)
                while True:  # the rest of the line, in bounded pieces
                    rest = self.stream.readline(1024 * 1024)
                    self.bytes_read += len(rest)
                    skipped += len(rest)
                    if not rest or rest.endswith(b"\n"):
                        break
                    if skipped > MAX_SKIPPED_LINE_BYTES:
                        raise UsageError(
                            f"{self.name or 'the file'} line {self.lines}: no line break in its first "
                            f"{MAX_SKIPPED_LINE_BYTES // 2**20} MiB: not JSON lines or CSV (a stream without end?)"
                        )
                yield None
                continue
            if at_start and line.startswith(UTF8_BOM):  # the encoding's mark (Excel's "CSV UTF-8"), not text
                line = line[len(UTF8_BOM):]
            yield line


def _too_long(number: int) -> Line:
    return Line(number, error=RowError("", f"line longer than {MAX_LINE_BYTES} bytes (not copied to --failures)"))


def read_jsonl(lines: LineReader) -> Iterator[Line]:
    """One :class:`Line` per non-blank line; a line that is not a UTF-8 JSON
    object is an error of that line."""
    for number, raw in enumerate(lines, start=1):
        if raw is None:
            yield _too_long(number)
            continue
        if not raw.strip():
            continue
        line = Line(number, raw=raw.rstrip(b"\r\n"))
        try:
            value = jsontext.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:
            line.error = RowError("", "not UTF-8")
        except jsontext.JsonError as error:
            line.error = RowError(error.key, error.reason)
        else:
            if isinstance(value, dict):
                line.row = value
            else:
                line.error = RowError("", "expected a JSON object per line")
        yield line


def read_csv(lines: LineReader) -> tuple[list[str], Iterator[Line]]:
    """The header (checked: known, distinct column names; a ``UsageError``
    otherwise, before anything is sent) and one :class:`Line` per record."""
    import csv  # here and below: only an import loads csv, tempfile and a thread pool

    too_long: set[int] = set()
    not_utf8: set[int] = set()
    physical = 0
    record_bytes = 0  # of the record being read; records() sets it to 0 between records

    def text() -> Iterator[str]:
        nonlocal physical, record_bytes
        for raw in lines:
            physical += 1
            if raw is None:
                too_long.add(physical)
                yield "\n"  # an empty record in its place, reported below
                continue
            if record_bytes and record_bytes + len(raw) > MAX_LINE_BYTES:
                # A line of a record already begun starts inside a quoted
                # cell; past the bound only its quotes are read, so that the
                # record ends where it does and nothing more of it is held.
                too_long.add(physical)
                record_bytes = MAX_LINE_BYTES + 1
                yield "" if _ends_quoted(raw) else '"\n'
                continue
            record_bytes += len(raw)
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError:
                not_utf8.add(physical)
                yield raw.decode("utf-8", "replace")

    reader = csv.reader(text())
    csv.field_size_limit(MAX_LINE_BYTES)
    try:
        header = next(reader)
    except StopIteration:
        return [], iter(())
    except csv.Error as error:
        raise UsageError(f"the CSV header cannot be read: {error}") from None
    record_bytes = 0
    header = [name.strip() for name in header]
    unknown = [n for n in header if n not in KNOWN_KEYS and n not in IGNORED_KEYS]
    if unknown:
        raise UsageError(f"unknown CSV column {unknown[0][:60]!r} (known: {', '.join(sorted(KNOWN_KEYS))})")
    if len(set(header)) != len(header):
        raise UsageError("a CSV column is named twice")

    def records() -> Iterator[Line]:
        nonlocal record_bytes
        previous = reader.line_num
        while True:
            record_bytes = 0
            try:
                cells = next(reader)
            except StopIteration:
                return
            except csv.Error as error:
                yield Line(previous + 1, error=RowError("", f"not valid CSV: {error}"))
                previous = reader.line_num
                continue
            number, previous = previous + 1, reader.line_num
            spanned = range(number, previous + 1)  # a quoted cell may hold line breaks
            if any(n in too_long for n in spanned):
                yield _too_long(number)
                continue
            if not cells or all(not c.strip() for c in cells):
                continue
            line = Line(number, cells=cells)
            if len(cells) > len(header):
                line.error = RowError("", f"{len(cells)} cells for {len(header)} columns")
            elif any(n in not_utf8 for n in spanned):
                line.error = RowError("", "not UTF-8")
            else:
                line.row = dict(zip(header, cells))
            yield line

    return header, records()


_CSV_TOKENS = re.compile(rb'"|,|[\r\n]|[^",\r\n]+')


def _ends_quoted(raw: bytes) -> bool:
    """Whether a line that starts inside a quoted cell ends inside one, by
    the csv module's rules for its default dialect: ``""`` in a quoted cell
    is a quote; a quote opens a cell only at its start; a line break ends
    the record outside quotes. A run of other bytes counts as one."""
    state = "quoted"  # or "start" (of a cell), "plain" (in an unquoted cell), "closed" (a quote in a quoted cell)
    for token in _CSV_TOKENS.findall(raw):
        if state == "quoted":
            state = "closed" if token == b'"' else "quoted"
        elif token in (b"\r", b"\n"):
            return False
        elif token == b",":
            state = "start"
        elif token == b'"' and state in ("start", "closed"):
            state = "quoted"
        else:
            state = "plain"
    return state == "quoted"


# --- the outcome -------------------------------------------------------------------------


class FailureLog:
    """The failures of an import, in the file's order: the first
    :data:`SHOWN_FAILURES` held for the text summary, the rest written to a
    temporary file (one JSON object a line) and read back only by
    ``--json``, so that a file of a million failing lines holds no million
    records (each a few hundred bytes: a 1 GB file of ``{}`` lines once
    took over 100 GB)."""

    def __init__(self) -> None:
        self.first: list[dict[str, Any]] = []
        self.count = 0
        self._rest: IO[bytes] | None = None

    def __len__(self) -> int:
        return self.count

    def __bool__(self) -> bool:
        return self.count > 0

    def add(self, failure: dict[str, Any]) -> None:
        self.count += 1
        if len(self.first) < SHOWN_FAILURES:
            self.first.append(failure)
            return
        if self._rest is None:
            import tempfile

            self._rest = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
        self._rest.write(jsontext.dumps(failure).encode() + b"\n")

    def __iter__(self) -> Iterator[dict[str, Any]]:
        yield from self.first
        if self._rest is not None:
            self._rest.seek(0)
            for line in self._rest:
                yield json.loads(line)

    def close(self) -> None:
        if self._rest is not None:
            self._rest.close()


@dataclass
class Summary:
    """What became of the file's lines; ``write_json`` writes the stable ``--json`` form."""

    file: str
    format: str
    lines: int = 0
    created: int = 0
    existing: int = 0
    failures: FailureLog = field(default_factory=FailureLog)
    call_error: str | None = None

    def fail(self, number: int, code: str, field_: str, reason: str, request_id: str | None) -> None:
        self.failures.add({"line": number, "code": code, "field": field_, "reason": " ".join(reason.split())[:500],
                           "request_id": request_id})  # fmt: skip

    def write_json(self, out: TextIO, failures_file: str | None) -> None:
        """The summary as one JSON object, its failures a line each, streamed from the log."""
        fields = {
            "file": self.file,
            "format": self.format,
            "lines": self.lines,
            "created": self.created,
            "existing": self.existing,
            "failed": len(self.failures),
            "failures": None,
            "failures_file": failures_file,
            "call_error": self.call_error,
        }
        out.write("{")
        for n, (name, value) in enumerate(fields.items()):
            out.write(f"{',' if n else ''}\n  {json.dumps(name)}: ")
            if name != "failures":
                out.write(json.dumps(value, ensure_ascii=False))
                continue
            out.write("[")
            for i, failure in enumerate(self.failures):
                out.write(f"{',' if i else ''}\n    {json.dumps(failure, ensure_ascii=False)}")
            out.write("\n  ]" if self.failures else "]")
        out.write("\n}\n")


class FailureWriter:
    """Writes failed lines to ``--failures`` as given: JSON lines byte for
    byte (or the object with its ``request_id`` added when it was sent
    without one), CSV records under the header plus a ``request_id`` column
    when the file had none."""

    def __init__(self, out: BinaryIO | None, fmt: str, header: list[str]) -> None:
        self.out = out
        self.fmt = fmt
        self.header = header
        self.add_id = fmt == "csv" and "request_id" not in header
        self._csv: Any = None
        if out is not None and fmt == "csv" and header:
            import csv

            self._text = io.TextIOWrapper(out, encoding="utf-8", newline="", write_through=True)
            self._csv = csv.writer(self._text)
            self._csv.writerow(header + (["request_id"] if self.add_id else []))

    def write(self, line: Line, request_id: str | None) -> None:
        if self.out is None:
            return
        if self.fmt == "csv":
            if line.cells is not None:
                cells = list(line.cells)
                if self.add_id:
                    cells = cells + [""] * (len(self.header) - len(cells)) + [request_id or ""]
                self._csv.writerow(cells)
            return
        if request_id is not None and line.row is not None and "request_id" not in line.row:
            self.out.write(jsontext.dumps({**line.row, "request_id": request_id}).encode() + b"\n")
        elif line.raw is not None:
            self.out.write(line.raw + b"\n")


class Progress:
    """The import's :class:`~tickwheel_server.cli.progress.ProgressLine`:
    lines and their outcomes, with the share of the file read."""

    def __init__(self, stream: TextIO | None, total_bytes: int | None) -> None:
        self.line = ProgressLine(stream)
        self.total = total_bytes

    def show(self, summary: Summary, done_bytes: int) -> None:
        text = (f"{summary.lines} lines: {summary.created} created, {summary.existing} existing, "
                f"{len(summary.failures)} failed")  # fmt: skip
        self.line.show("import", text, done_bytes / self.total if self.total else None)

    def end(self) -> None:
        self.line.end()


# --- the command ------------------------------------------------------------------------


def _format_of(a: argparse.Namespace) -> str:
    if a.format:
        return a.format
    if a.file == "-":
        raise UsageError("reading stdin: give --format jsonl or --format csv")
    fmt = FORMATS.get(Path(a.file).suffix.lower())
    if fmt is None:
        raise UsageError(f"cannot tell the format of {a.file!r} from its extension: give --format jsonl or csv")
    return fmt


def _open(a: argparse.Namespace) -> tuple[BinaryIO, int | None]:
    if a.file == "-":
        return sys.stdin.buffer, None
    try:
        stream = open(a.file, "rb")  # noqa: SIM115 - closed by run()
        size = os.fstat(stream.fileno()).st_size
    except OSError as error:
        raise UsageError(f"{error.strerror or error}: {a.file}") from None
    return stream, size or None


def _open_failures(a: argparse.Namespace) -> BinaryIO | None:
    if not a.failures:
        return None
    if a.file != "-" and Path(a.failures).exists() and os.path.samefile(a.failures, a.file):
        raise UsageError("--failures must not be the file being imported")
    try:
        return open(a.failures, "wb")  # noqa: SIM115 - closed by run()
    except OSError as error:
        raise UsageError(f"--failures: {error.strerror or error}: {a.failures}") from None


def run(ctx: Context, a: argparse.Namespace) -> int:
    if not 1 <= a.batch_size <= MAX_BATCH:
        raise UsageError(f"--batch-size must be 1 to {MAX_BATCH}")
    if not 1 <= a.parallel <= MAX_PARALLEL:
        raise UsageError(f"--parallel must be 1 to {MAX_PARALLEL}")
    fmt = _format_of(a)
    stream, size = _open(a)
    failures_out = None
    summary = Summary(a.file, fmt)
    try:
        lines = LineReader(stream, a.file if a.file != "-" else "stdin")
        if fmt == "csv":
            header, records = read_csv(lines)
        else:
            header, records = [], read_jsonl(lines)
        failures_out = _open_failures(a)
        importer = _Importer(ctx, a.batch_size, summary, FailureWriter(failures_out, fmt, header), a.parallel)
        progress = Progress(live_stream(ctx), size)
        try:
            for line in records:
                summary.lines += 1
                importer.add(line, fmt)
                if importer.full():
                    importer.flush()
                    progress.show(summary, lines.bytes_read)
            importer.flush()
            importer.drain()
        finally:
            importer.close()
        progress.show(summary, lines.bytes_read)
        progress.end()
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()
        if failures_out is not None:
            failures_out.close()
    try:
        _report(ctx, summary, a.failures)
    finally:
        summary.failures.close()
    return 1 if summary.failures else 0


class _Importer:
    """Collects the lines of one call, sends them (up to ``parallel`` calls
    in flight, each on a thread of its own: the SDK's client takes
    concurrent calls), records their outcomes (and writes the failed ones)
    in the file's order."""

    def __init__(
        self, ctx: Context, batch_size: int, summary: Summary, failures: FailureWriter, parallel: int = 1
    ) -> None:
        self.ctx = ctx
        self.batch_size = batch_size
        self.summary = summary
        self.failures = failures
        self.pending: list[tuple[Line, Any, str | None]] = []  # (line, job or None when it failed, request id)
        self.held_bytes = 0
        self.parallel = parallel
        from concurrent.futures import ThreadPoolExecutor

        self._pool = ThreadPoolExecutor(parallel, thread_name_prefix="tickwheel-import")
        # Calls sent and not yet recorded, oldest first: (their lines, the call, or None when not sent).
        self._in_flight: deque[tuple[list[tuple[Line, Any, str | None]], Future | None]] = deque()

    def add(self, line: Line, fmt: str) -> None:
        job, request_id = None, None
        if line.error is None:
            try:
                request_id = request_id_of(line.row, csv=fmt == "csv")
                job = job_from_row(line.row, csv=fmt == "csv")
            except RowError as error:
                # Without its traceback: its frames hold the line (a cycle only the collector frees).
                line.error = error.with_traceback(None)
                request_id = None
            else:
                request_id = request_id or derived_request_id(line.number, canonical(line.row))
        self.pending.append((line, job, request_id))
        self.held_bytes += len(line.raw or b"") + sum(len(c) for c in line.cells or ())

    def full(self) -> bool:
        """A call's worth of lines, or of bytes held for them."""
        return len(self.pending) >= self.batch_size or self.held_bytes >= MAX_HELD_BYTES

    def flush(self) -> None:
        """Send the lines collected (unless a call failed already), then
        record the oldest calls until fewer than ``parallel`` are in flight."""
        batch, self.pending, self.held_bytes = self.pending, [], 0
        if not batch:
            return
        sent = [(job, request_id) for _, job, request_id in batch if job is not None]
        call = None
        if sent and self.summary.call_error is None:
            call = self._pool.submit(self.ctx.client.create_jobs, [job for job, _ in sent],
                                     [rid for _, rid in sent], batch_size=self.batch_size)  # fmt: skip
        self._in_flight.append((batch, call))
        while len(self._in_flight) >= self.parallel:
            self._settle()

    def drain(self) -> None:
        """Record every call still in flight."""
        while self._in_flight:
            self._settle()

    def close(self) -> None:
        """Wait for the calls still running (an interrupted import's), recording nothing more."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _settle(self) -> None:
        from tickwheel import TickwheelError

        batch, call = self._in_flight.popleft()
        outcomes: list[Any] = []
        call_error: TickwheelError | None = None
        if call is not None:
            try:
                outcomes = call.result()
            except TickwheelError as error:
                call_error = error
                if self.summary.call_error is None:
                    self.summary.call_error = str(error)
        results = iter(outcomes)
        for line, job, request_id in batch:
            if job is None:
                assert line.error is not None
                self.summary.fail(line.number, "INVALID_ARGUMENT", line.error.field, line.error.reason, None)
                self.failures.write(line, None)
            elif call_error is not None:
                self.summary.fail(line.number, call_error.code_name, "", f"the call failed: {call_error}", request_id)
                self.failures.write(line, request_id)
            elif not outcomes:  # an earlier call failed: not sent
                self.summary.fail(line.number, "ABORTED", "", f"not sent: an earlier call failed "
                                  f"({self.summary.call_error})", request_id)  # fmt: skip
                self.failures.write(line, request_id)
            else:
                self._record(line, request_id, next(results))

    def _record(self, line: Line, request_id: str | None, outcome: Any) -> None:
        if outcome.error is None:
            if outcome.created:
                self.summary.created += 1
            else:
                self.summary.existing += 1
            return
        error = outcome.error
        violations = error.field_violations
        reason = "; ".join(v.description for v in violations) if violations else error.message
        self.summary.fail(line.number, error.code_name, violations[0].field if violations else "",
                          reason or error.code_name, request_id)  # fmt: skip
        # A deleted job's request id would answer NOT_FOUND again: import it afresh.
        self.failures.write(line, None if error.code_name == "NOT_FOUND" else request_id)


def _report(ctx: Context, summary: Summary, failures_file: str | None) -> None:
    if ctx.json:
        summary.write_json(ctx.stdout, failures_file)
        return
    failed = len(summary.failures)
    ctx.out(f"imported {summary.file}: {summary.lines} lines, {summary.created} created, "
            f"{summary.existing} already existed, {failed} failed")  # fmt: skip
    if summary.call_error is not None:
        ctx.note(f"error: {summary.call_error} (the lines after it were not sent)")
    for failure in summary.failures.first:
        where = f"{printable(failure['field'])}: " if failure["field"] else ""
        ctx.out(f"  line {failure['line']}: {where}{printable(failure['reason'])} ({failure['code']})")
    if failed > SHOWN_FAILURES:
        ctx.out(f"  ... and {failed - SHOWN_FAILURES} more (--json lists them all)")
    if failed and failures_file:
        ctx.out(f"failed lines written to {failures_file}: fix them and import that file")
