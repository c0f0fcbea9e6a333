"""What CockroachDB refuses (or accepts and ignores) of PostgreSQL's SQL, as
far as it can be checked offline: no CockroachDB server runs in the tests.

Each feature below was checked against CockroachDB's documentation or its
maintainers' word before it was listed (the source is beside it); features
CockroachDB accepts are deliberately not here: ``FOR UPDATE SKIP LOCKED``
(v22.2, cockroach#85720), ``ON CONFLICT ON CONSTRAINT`` (v22.1,
cockroach#73460), ``CREATE INDEX CONCURRENTLY`` (in its CREATE INDEX
synopsis; its schema changes are online anyway), ``unnest`` of several
arrays, ``LATERAL``, ``= ANY (array)``, row comparisons (``(a, b) > (x,
y)``: its "Scalar expressions", tuple comparison), ``SAVEPOINT`` and
``ROLLBACK TO SAVEPOINT`` with the savepoint never released (nested
savepoints since v20.1; a rollback to one keeps it, as PostgreSQL does),
partial indexes (``CREATE INDEX … WHERE``, v20.2) with ``DESC`` keys.

:func:`violations` looks at one SQL text; :func:`transaction_violations`
at the statements a client sent, in order, for a schema change that shares
its transaction with a write or with another schema change (the rules in
its docstring); :func:`literals` reads a module's
string literals (docstrings left out) with the scope they are written in,
so a test can scan the store's sources and allow a feature only in the
PostgreSQL-only branch that names it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple


class Feature(NamedTuple):
    name: str
    pattern: re.Pattern
    source: str


FEATURES = (
    Feature(
        "LISTEN/NOTIFY", re.compile(r"\b(?:UN)?LISTEN\s+[\w\"*]|\bNOTIFY\s+[\w\"]|\bpg_notify\s*\(", re.I),
        "CockroachDB 'PostgreSQL compatibility', unsupported features: Events",
    ),
    Feature(
        "advisory lock", re.compile(r"\bpg_(?:try_)?advisory_\w*\s*\(", re.I),
        "CockroachDB 'PostgreSQL compatibility': advisory lock functions unsupported, some defined as no-ops "
        "(a lock that silently does not lock); cockroach#13546",
    ),
    Feature(
        "LOCK TABLE", re.compile(r"(?:^|;)\s*LOCK\s+(?:TABLE\s+)?(?:ONLY\s+)?[\w\"]", re.I),
        "never supported: cockroach#43654 (a syntax error)",
    ),
    Feature(
        "deferred constraint", re.compile(r"\bDEFERRABLE\b|\bINITIALLY\s+DEFERRED\b|\bSET\s+CONSTRAINTS\b", re.I),
        "unimplemented: cockroach#31632, cockroach#48307",
    ),
    Feature(
        "heap system column", re.compile(r"\b(?:ctid|xmin|xmax|cmin|cmax)\b", re.I),
        "PostgreSQL's heap system columns; CockroachDB's row has none (its only such column is "
        "crdb_internal_mvcc_timestamp, cockroach#62928)",
    ),
    Feature(
        "jit setting", re.compile(r"\bSET\s+(?:LOCAL\s+|SESSION\s+)?jit\s*(?:=|\bTO\b)|\bset_config\s*\(\s*'jit'", re.I),
        "PostgreSQL's JIT: not among the session variables of CockroachDB's 'SET (session variable)' page "
        "(v19.1 to v24.3); the store turns it off at connect time on PostgreSQL only (store/engine.py)",
    ),
    Feature(
        "storage parameter",
        re.compile(
            r"\bALTER\s+(?:TABLE|INDEX)\s+(?:IF\s+EXISTS\s+)?(?:ONLY\s+)?[\w.\"{}]+\s+(?:RE)?SET\s*\("
            r"|\bWITH\s*\(\s*(?:fillfactor|deduplicate_items|autovacuum_\w+|toast[._]\w+|parallel_workers|vacuum_\w+"
            r"|log_autovacuum_min_duration|buffering|fastupdate|gin_pending_list_limit|pages_per_range)\s*=",
            re.I,
        ),
        "CockroachDB's 'WITH (storage parameter)' page (v23.1 to v26.2): its own table and index parameters "
        "(bucket_count, ttl_*, ...; fillfactor and autovacuum_enabled accepted and ignored); PostgreSQL's "
        "deduplicate_items, autovacuum_* thresholds and the rest are not among them. An ALTER TABLE/INDEX "
        "... SET (...) of them is PostgreSQL's tuning, run in a PostgreSQL-only branch",
    ),
    Feature(
        "maintenance command", re.compile(r"(?:^|;)\s*(?:VACUUM|CLUSTER|REINDEX)\s+[\w(\"]", re.I),
        "PostgreSQL's VACUUM, CLUSTER and REINDEX: CockroachDB has none (its MVCC garbage goes after the zone's "
        "gc.ttlseconds; indexes are never rebuilt by hand)",
    ),
    Feature(
        "pg_ function", re.compile(r"\bpg_\w+\s*\(", re.I),
        "PostgreSQL's own functions: CockroachDB defines some for compatibility, not all, and some as no-ops; "
        "none is relied on outside a PostgreSQL-only branch",
    ),
)


def violations(statement: str) -> list[str]:
    """The names of the features ``statement`` uses that CockroachDB does not take."""
    return [feature.name for feature in FEATURES if feature.pattern.search(statement)]


_SCHEMA_CHANGE = re.compile(r"^(?:CREATE|ALTER|DROP|TRUNCATE|COMMENT\s+ON|GRANT|REVOKE)\b", re.I)
_WRITE = re.compile(r"^(?:INSERT|UPDATE|DELETE|UPSERT)\b|^WITH\b.*\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\b", re.I | re.S)
_BEGIN = re.compile(r"^(?:BEGIN|START\s+TRANSACTION)\b", re.I)
_END = re.compile(r"^(?:COMMIT|ROLLBACK|END|ABORT)\b(?!\s+TO\b)", re.I)
_LEADING_COMMENTS = re.compile(r"^(?:\s+|--[^\n]*\n?|/\*.*?\*/)*", re.S)

DDL_AFTER_WRITE = "schema change after a write"
"""Refused by CockroachDB up to v21.2, and on v22.1 until its upgrade is
finalised: SQLSTATE 0A000, "schema change statement cannot follow a
statement that has written in the same transaction" (cockroach#26508,
cockroach#54477; lifted by cockroach#76279)."""
TWO_SCHEMA_CHANGES = "two schema changes in one transaction"
"""Not atomic on any version: CockroachDB guarantees atomicity only to a
transaction with a single schema change statement (docs, "Online Schema
Changes": "Declarative schema changer", "Schema changes within
transactions": a ``DROP COLUMN`` beside another change that fails can lose
data; declarative and legacy schema changer statements on one object may
not share a transaction); from v25.1 ``autocommit_before_ddl`` (on by
default, cockroach#133180) commits before each, splitting the transaction
silently."""
WRITE_AFTER_DDL = "write after a schema change"
"""A schema change can fail at COMMIT after the writes beside it committed,
SQLSTATE XXA00 (cockroach#42061; docs "Schema change DDL statements inside
a multi-statement transaction can fail while other statements succeed");
from v25.1 ``autocommit_before_ddl`` commits the transaction before the
schema change, so the write runs outside it."""


def _kind(statement: str) -> str:
    text = _LEADING_COMMENTS.sub("", statement, count=1)
    for kind, pattern in (("begin", _BEGIN), ("end", _END), ("ddl", _SCHEMA_CHANGE), ("write", _WRITE)):
        if pattern.match(text):
            return kind
    return "read"


def transaction_violations(statements: Iterable[str]) -> list[tuple[str, str]]:
    """``(rule, statement)`` for each statement of ``statements`` (one
    session's, in the order sent) that breaks a rule of CockroachDB's for
    schema changes in an explicit transaction (``BEGIN`` … ``COMMIT``):
    :data:`DDL_AFTER_WRITE`, :data:`TWO_SCHEMA_CHANGES`,
    :data:`WRITE_AFTER_DDL`. A schema change alone in its transaction (reads
    beside it are allowed), or sent outside one (an implicit transaction),
    breaks none."""
    found: list[tuple[str, str]] = []
    explicit, wrote, changed = False, False, False
    for statement in statements:
        kind = _kind(statement)
        if kind == "begin":
            explicit, wrote, changed = True, False, False
        elif kind == "end":
            explicit = False
        elif not explicit:
            continue
        elif kind == "ddl":
            if wrote:
                found.append((DDL_AFTER_WRITE, statement))
            if changed:
                found.append((TWO_SCHEMA_CHANGES, statement))
            changed = True
        elif kind == "write":
            if changed:
                found.append((WRITE_AFTER_DDL, statement))
            wrote = True
    return found


class Literal(NamedTuple):
    scope: str
    """Where it is written: ``Class.method.inner`` or a module-level name."""
    text: str
    line: int


def literals(source: str) -> Iterator[Literal]:
    """Every string literal of ``source`` but its docstrings, with its scope;
    an f-string's fixed parts joined, each placeholder as ``{}``."""
    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
    }
    # Attribute docstrings (a string statement after an assignment) are prose too.
    docstrings |= {
        id(node.value) for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
    }

    def visit(node: ast.AST, scope: tuple[str, ...]) -> Iterator[Literal]:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            scope = (*scope, node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and not scope:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            if names:
                scope = (names[0],)
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
            yield Literal(".".join(scope) or "<module>", text, node.lineno)
            return
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield Literal(".".join(scope) or "<module>", node.value, node.lineno)
        for child in ast.iter_child_nodes(node):
            yield from visit(child, scope)

    yield from visit(tree, ())


def found_in(root: Path) -> list[tuple[str, str, str, int]]:
    """(module path under ``root``, scope, feature, line) of every literal of
    every module under ``root`` that uses a feature CockroachDB does not take."""
    hits = []
    for path in sorted(root.rglob("*.py")):
        for literal in literals(path.read_text()):
            for name in violations(literal.text):
                hits.append((path.relative_to(root).as_posix(), literal.scope, name, literal.line))
    return hits
