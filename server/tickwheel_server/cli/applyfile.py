"""The file ``tickwheel apply -f`` reads: TOML or YAML bytes into the jobs
they declare, each with the line it starts on. Pure: no I/O, no calls.

A file is one document whose top level holds one key, ``jobs``: a list
(TOML ``[[jobs]]`` tables, YAML a sequence) of jobs. A job's keys are
``tickwheel job import``'s (``tickwheel job create``'s flags with ``_`` for
``-``, :data:`~tickwheel_server.cli.importrows.KNOWN_KEYS` but
``request_id``), values of their JSON types, plus an optional ``version``:
the version the file was written against (a job changed since is a
conflict). Any other key, at either level, is refused with its name.

Bounds: at most :data:`MAX_FILE_BYTES` bytes and :data:`MAX_JOBS` jobs; no
NUL byte; UTF-8; names distinct; YAML without anchors, aliases, tags or a
key given twice (TOML refuses those itself). Every problem of the file is
found before anything is sent (:class:`FileError` lists them all), each with
its line when the format tells it, the job (``jobs[3]``) and the key.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any

from tickwheel_server.cli.importrows import INSTANT_KEYS, KNOWN_KEYS, RowError, job_from_row
from tickwheel_server.cli import jsontext
from tickwheel_server.cli.jsontext import MAX_DEPTH, nesting

__all__ = ["FORMATS", "JOB_KEYS", "MAX_FILE_BYTES", "MAX_JOBS", "Declared", "FileError", "Problem", "read"]

MAX_FILE_BYTES = 8 * 1024 * 1024
"""A longer file is refused unread (a payload counts towards it)."""
MAX_JOBS = 10_000
"""Jobs one file may declare."""
MAX_PROBLEMS = 100
"""Problems listed; past this the reading stops (the count says so)."""
JOB_KEYS = frozenset(KNOWN_KEYS - {"request_id"} | {"version"})
FORMATS = {".toml": "toml", ".yaml": "yaml", ".yml": "yaml"}


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the file: ``line`` (1-based, None when the
    format does not tell), ``where`` (``jobs[3] "nightly"`` or "" for the
    file), ``field`` (the file's key, "" for the whole job or file) and
    ``reason``."""

    line: int | None
    where: str
    field: str
    reason: str

    def text(self, file: str) -> str:
        """``jobs.toml:12: jobs[3] "nightly": cron: reason``."""
        at = f"{file}:{self.line}" if self.line is not None else file
        parts = [p for p in (self.where, self.field) if p]
        return f"{at}: " + "".join(f"{p}: " for p in parts) + self.reason

    def as_json(self) -> dict[str, Any]:
        return {"line": self.line, "job": self.where, "field": self.field, "reason": self.reason}


class FileError(Exception):
    """The file cannot be applied: every :class:`Problem` found."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__(problems[0].reason if problems else "invalid file")
        self.problems = problems


@dataclass
class Declared:
    """One job of the file: its place (``index`` in ``jobs``, ``line``, the
    lines of its keys), its name, the ``version`` it was written against (None
    when not given) and the Job it describes (as ``job create`` builds it)."""

    index: int
    line: int | None
    name: str
    version: int | None
    job: Any
    key_lines: dict[str, int] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"jobs[{self.index}] {json.dumps(self.name, ensure_ascii=False)}"

    def problem(self, key: str, reason: str) -> Problem:
        """A problem of this job's ``key`` (a file key, "" for the job), at the key's line when known."""
        return Problem(self.key_lines.get(key, self.line), self.where, key, reason)


def format_of(path: str) -> str | None:
    """``toml`` or ``yaml`` from the file's extension, or None."""
    lowered = path.lower()
    for extension, fmt in FORMATS.items():
        if lowered.endswith(extension):
            return fmt
    return None


def read(data: bytes, fmt: str) -> list[Declared]:
    """The jobs ``data`` (a whole file in ``fmt``, ``toml`` or ``yaml``)
    declares, in file order. Raises :class:`FileError` listing every problem
    found (none of the jobs is returned then)."""
    if len(data) > MAX_FILE_BYTES:
        raise FileError([Problem(None, "", "", f"the file is {len(data)} bytes; at most {MAX_FILE_BYTES}")])
    nul = data.find(b"\x00")
    if nul >= 0:
        raise FileError([Problem(data.count(b"\n", 0, nul) + 1, "", "", "a NUL byte: not a text file")])
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise FileError([Problem(data.count(b"\n", 0, error.start) + 1, "", "", "not UTF-8")]) from None
    text = text.removeprefix("\ufeff")
    if fmt == "toml":
        document, job_lines, key_lines = _toml(text)
    elif fmt == "yaml":
        document, job_lines, key_lines = _yaml(text)
    else:
        raise ValueError(f"unknown format {fmt!r}")
    return _jobs(document, job_lines, key_lines)


# --- the two formats --------------------------------------------------------------------

_TOML_JOBS_HEADER = re.compile(r"^[ \t]*\[\[[ \t]*(?:jobs|\"jobs\"|'jobs')[ \t]*\]\][ \t]*(?:#.*)?\Z")
_TOML_HEADER = re.compile(r"^[ \t]*\[")
_TOML_KEY = re.compile(r"^[ \t]*([A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*')[ \t]*[.=]")


def _toml(text: str) -> tuple[Any, list[int] | None, list[dict[str, int]]]:
    import tomllib  # as yaml: loaded by the apply that reads the file, not by every command

    try:
        document = tomllib.loads(text, parse_float=Decimal)
    except RecursionError:
        raise FileError([Problem(None, "", "", f"not valid TOML: nested deeper than {MAX_DEPTH} levels")]) from None
    except tomllib.TOMLDecodeError as error:
        match = re.search(r"\(at line (\d+)", str(error))
        reason = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(error))
        raise FileError([Problem(int(match.group(1)) if match else None, "", "", f"not valid TOML: {reason}")]) from None
    if nesting(document) > MAX_DEPTH:
        raise FileError([Problem(None, "", "", f"nested deeper than {MAX_DEPTH} levels")])
    # tomllib keeps no positions: find the [[jobs]] headers and the keys under
    # each. Trusted only when the headers counted are the jobs parsed (a
    # multi-line string could hold a header-like line).
    lines = text.split("\n")
    headers = [n for n, line in enumerate(lines) if _TOML_JOBS_HEADER.match(line)]
    jobs = document.get("jobs") if isinstance(document, dict) else None
    if not isinstance(jobs, list) or len(headers) != len(jobs):
        return document, None, []
    key_lines: list[dict[str, int]] = []
    for i, start in enumerate(headers):
        end = headers[i + 1] if i + 1 < len(headers) else len(lines)
        keys: dict[str, int] = {}
        for n in range(start + 1, end):
            if _TOML_HEADER.match(lines[n]):
                break  # a sub-table ([jobs.labels]) or another table: its keys are not the job's
            match = _TOML_KEY.match(lines[n])
            if match:
                keys.setdefault(match.group(1).strip("\"'"), n + 1)
        key_lines.append(keys)
    return document, [n + 1 for n in headers], key_lines


def _yaml(text: str) -> tuple[Any, list[int] | None, list[dict[str, int]]]:
    import yaml

    loader = _YamlLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, None, []
        _check_yaml_node(node)
        document = loader.construct_document(node)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        reason = " ".join(str(p) for p in (error.context, error.problem) if p)
        raise FileError([Problem(mark.line + 1 if mark else None, "", "", f"not valid YAML: {reason}")]) from None
    except yaml.YAMLError as error:
        raise FileError([Problem(None, "", "", f"not valid YAML: {error}")]) from None
    except RecursionError:  # PyYAML composes recursively: far past MAX_DEPTH
        raise FileError([Problem(None, "", "", f"nested deeper than {MAX_DEPTH} levels")]) from None
    finally:
        loader.dispose()
    job_lines: list[int] | None = None
    key_lines: list[dict[str, int]] = []
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if key.value == "jobs" and isinstance(value, yaml.SequenceNode):
                job_lines = [item.start_mark.line + 1 for item in value.value]
                for item in value.value:
                    keys = {}
                    if isinstance(item, yaml.MappingNode):
                        keys = {str(k.value): k.start_mark.line + 1 for k, _ in item.value}
                    key_lines.append(keys)
    return document, job_lines, key_lines


def _yaml_loader_class() -> type:
    import yaml

    class Loader(yaml.SafeLoader):
        """SafeLoader whose timestamps stay text: an instant is judged as
        RFC 3339 by the same rules as the other formats, not read as a
        naive datetime taken for UTC."""

    Loader.add_constructor("tag:yaml.org,2002:timestamp", yaml.SafeLoader.construct_yaml_str)
    Loader.add_constructor("tag:yaml.org,2002:float", _yaml_number)
    return Loader


_PLAIN_NUMBER = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?\Z")


def _yaml_number(loader: Any, node: Any) -> Any:
    """A YAML float as a ``Decimal`` of its digits (a payload sends the
    number written, see ``jsontext``); YAML's other forms (``1_000.5``,
    ``.inf``, base 60) as PyYAML reads them."""
    text = loader.construct_scalar(node)
    if _PLAIN_NUMBER.match(text):
        return Decimal(text)
    return loader.construct_yaml_float(node)


_LOADER: type | None = None


def _YamlLoader(text: str) -> Any:  # noqa: N802 - reads as the class it builds
    global _LOADER
    if _LOADER is None:
        _LOADER = _yaml_loader_class()
    return _LOADER(text)


def _check_yaml_node(root: Any) -> None:
    """Refuses what a job file has no use for and a hostile one could abuse:
    anchors and aliases (an alias expands, so a small file could stand for
    an exponential one), explicit tags, a key given twice in a mapping
    (YAML would keep the last silently), nesting past :data:`MAX_DEPTH`."""
    import yaml

    def fail(node: Any, reason: str) -> None:
        raise FileError([Problem(node.start_mark.line + 1, "", "", reason)])

    seen: set[int] = set()
    stack = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if id(node) in seen:
            fail(node, "anchors and aliases are not allowed")
        seen.add(id(node))
        if getattr(node, "anchor", None):
            fail(node, "anchors and aliases are not allowed")
        if depth > MAX_DEPTH:
            fail(node, f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, yaml.ScalarNode):
            if node.tag not in _YAML_SCALAR_TAGS:
                fail(node, f"the tag {node.tag[:60]!r} is not allowed")
        elif isinstance(node, yaml.SequenceNode):
            if node.tag != "tag:yaml.org,2002:seq":
                fail(node, f"the tag {node.tag[:60]!r} is not allowed")
            stack.extend((child, depth + 1) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            if node.tag != "tag:yaml.org,2002:map":
                fail(node, f"the tag {node.tag[:60]!r} is not allowed")
            keys: set[str] = set()
            for key, value in node.value:
                if not isinstance(key, yaml.ScalarNode):
                    fail(key, "a key must be plain text")
                if key.tag == "tag:yaml.org,2002:merge":
                    fail(key, "merge keys (<<) are not allowed")
                if key.value in keys:
                    fail(key, f"the key {key.value[:60]!r} is given twice")
                keys.add(key.value)
                stack.append((key, depth + 1))
                stack.append((value, depth + 1))


_YAML_SCALAR_TAGS = frozenset(
    f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "timestamp")
)


# --- the jobs -----------------------------------------------------------------------------


def _jobs(document: Any, job_lines: list[int] | None, key_lines: list[dict[str, int]]) -> list[Declared]:
    if not isinstance(document, dict):
        raise FileError([Problem(1, "", "", "the file must hold a mapping with one key, jobs (a list of jobs)")])
    unknown = sorted(str(k) for k in document if k != "jobs")
    if unknown:
        raise FileError([Problem(None, "", unknown[0][:60], "unknown key: the file's only key is jobs")])
    if "jobs" not in document:
        raise FileError([Problem(1, "", "jobs", "required: the list of jobs (jobs = [] declares none)")])
    jobs = document["jobs"]
    if not isinstance(jobs, list):
        raise FileError([Problem(1, "", "jobs", "must be a list of jobs")])
    if len(jobs) > MAX_JOBS:
        raise FileError([Problem(None, "", "jobs", f"{len(jobs)} jobs; a file declares at most {MAX_JOBS}")])

    problems: list[Problem] = []
    declared: list[Declared] = []
    first_of: dict[str, Declared] = {}
    for index, spec in enumerate(jobs):
        line = job_lines[index] if job_lines is not None and index < len(job_lines) else None
        lines = key_lines[index] if index < len(key_lines) else {}
        job, problem = _job(index, line, lines, spec)
        if problem is not None:
            problems.append(problem)
        elif job is not None:
            earlier = first_of.get(job.name)
            if earlier is not None:
                at = f" at line {earlier.line}" if earlier.line is not None else ""
                problems.append(job.problem("name", f"declared twice: {earlier.where}{at} has the same name"))
            else:
                first_of[job.name] = job
                declared.append(job)
        if len(problems) >= MAX_PROBLEMS:
            problems.append(Problem(None, "", "", f"stopped after {MAX_PROBLEMS} problems"))
            break
    if problems:
        raise FileError(problems)
    return declared


def _job(index: int, line: int | None, key_lines: dict[str, int], spec: Any) -> tuple[Declared | None, Problem | None]:
    where = f"jobs[{index}]"
    if not isinstance(spec, dict):
        return None, Problem(line, where, "", "a job must be a mapping of keys to values")
    name = spec.get("name")
    if isinstance(name, str):
        where = f"{where} {json.dumps(name[:200], ensure_ascii=False)}"

    def problem(key: str, reason: str) -> Problem:
        return Problem(key_lines.get(key, line), where, key, reason)

    for key in spec:
        if not isinstance(key, str) or key not in JOB_KEYS:
            return None, problem(str(key)[:60], "unknown key (the keys are listed by `tickwheel apply --help`)")
    row = dict(spec)
    version = row.pop("version", None)
    if version is not None and (isinstance(version, bool) or not isinstance(version, int) or version < 1):
        return None, problem("version", "the job's version the file was written against: an integer >= 1")
    for key in INSTANT_KEYS:
        value = row.get(key)
        if isinstance(value, datetime):
            if value.tzinfo is None:
                return None, problem(key, "an instant needs its UTC offset (2026-03-29T01:30:00Z)")
            row[key] = value.isoformat()
        elif isinstance(value, (date, time)):
            return None, problem(key, "an instant needs a date, a time and a UTC offset")
    if "payload" in row and row["payload"] is not None:
        try:
            jsontext.dumps(row["payload"])
        except (TypeError, ValueError):
            return None, problem("payload", "holds a value JSON cannot carry (a date, NaN or infinity)")
        except RecursionError:
            return None, problem("payload", "nested too deeply")
    try:
        job = job_from_row(row, csv=False)
    except RowError as error:
        return None, problem(error.field, error.reason)
    except RecursionError:
        return None, problem("payload", "nested too deeply")
    return Declared(index, line, job.name, version, job, key_lines), None
