"""No unbounded query: every SELECT, UPDATE and DELETE the store's modules
build is bounded, read off the source.

Each store module is parsed (not imported) and every statement it builds
is found: a call of ``sa.select``, ``sa.update``, ``sa.delete``, a
table's ``select()``, ``update()`` or ``delete()``, and driver SQL (a
string that starts with SELECT, UPDATE, DELETE or WITH). A statement's
text is the Python statement that builds it, every later statement of
the same function that goes on with it (an assigned name followed,
``query = query.where(...)`` and the names made from it) and the earlier
ones that made the names it uses (a subquery built above). It is bounded
when that text has one of:

- a LIMIT (``.limit(``, ``LIMIT``), a scan with a budget included, or a
  walk in LIMITed pages (``paged(``: ``jobexecutions.paged`` reads one
  job's executions not started a page at a time, each a LIMITed range
  continuing after the last);
- an equality on every column of a primary key or a unique key of a
  table it names (``jobs.c.id == job_id``: one row);
- a key set (``one_of``, ``pairs_in``, ``= ANY``, ``unnest``, an
  ``IN`` over a list the caller bounds; ``unsend.running_by_id``, a
  ``one_of`` over the ids with a status, and ``unsend.RUNNING_BY_ID``,
  its driver SQL).

A statement a module's function returns unbounded, or a module's
constant holds (a builder, such as ``select_jobs``), is bounded where it
is used: each use of the function's or the constant's name is a
statement of its own there. What is neither bounded nor a builder is
named in :data:`UNBOUNDED_LEFT`, per module and function with the count
found and why it is small (a table of known small size, an aggregate of
one tenant's few rows); a new one, or a stale count, fails.

The check reads text, so it errs towards passing in two ways: a LIMIT
anywhere in a statement's text counts (a subquery's too), and so does an
``IN`` over a list (its caller bounds it). A statement hidden from it (a
string built at run time) is not found.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
STORE = REPO / "server" / "tickwheel_server" / "store"

_DRIVER_SQL = re.compile(r"^\s*(SELECT|UPDATE|DELETE|WITH)\b.*\b(FROM|SET)\b", re.S)
_BOUND = re.compile(
    r"\.limit\(|\bLIMIT\b|\bpaged\(|"
    r"\bone_of\(|\bpairs_in\(|\bANY\s*\(|\bany_\(|\.in_\(|\bunnest\b|\btuples\(|\brunning_by_id\(|\bRUNNING_BY_ID\b"
)
_EQUAL = re.compile(r"\b(\w+)\.c\.(\w+)\s*==|\b(\w+)\.c\.(\w+)\.is_\(")
_ROOT_METHODS = {"select", "update", "delete"}


@dataclass
class Root:
    """A statement built in ``function`` of ``module``: its text (as above)
    and whether the function returns it unbounded."""

    module: str
    function: str
    line: int
    text: str
    returned: bool = False
    uses: list[str] = field(default_factory=list)


def _tables() -> dict[str, list[frozenset[str]]]:
    """Each table's keys: the primary key's columns and each unique constraint's or index's."""
    from tickwheel_server.store import tables as schema

    keys: dict[str, list[frozenset[str]]] = {}
    for name, table in schema.metadata.tables.items():
        found = [frozenset(c.name for c in table.primary_key.columns)]
        found += [frozenset(c.name for c in ix.columns) for ix in table.indexes if ix.unique]
        found += [frozenset(c.name for c in uc.columns) for uc in table.constraints
                  if type(uc).__name__ == "UniqueConstraint"]  # fmt: skip
        keys[name] = [key for key in found if key]
    return keys


def _aliases(tree: ast.AST, tables: set[str]) -> dict[str, str]:
    """Names bound to a table anywhere in the module (``e = executions``)."""
    found = {name: name for name in tables}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id in tables:
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = node.value.id
    return found


def _is_root(node: ast.AST, aliases: dict[str, str]) -> bool:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        owner, method = node.func.value, node.func.attr
        if method in _ROOT_METHODS and isinstance(owner, ast.Name):
            return owner.id == "sa" or owner.id in aliases
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return node.func.id in _ROOT_METHODS and node.func.id == "select"
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return bool(_DRIVER_SQL.match(node.value))
    return False


def _names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _targets(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, ast.Assign):
        return {n.id for t in stmt.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) and isinstance(stmt.target, ast.Name):
        return {stmt.target.id}
    return set()


def _simple_statements(scope: ast.AST) -> list[ast.stmt]:
    """Every statement of ``scope`` (not of the functions and classes in it)
    that holds no other; a compound statement's header (an ``if``'s test, a
    ``for``'s iterable, a ``with``'s contexts) is an entry of its own. In
    source order."""
    found: list[ast.stmt] = []

    def header(node: ast.stmt, value: ast.expr) -> None:
        found.append(ast.Expr(value=value, lineno=node.lineno, col_offset=node.col_offset,
                              end_lineno=node.lineno, end_col_offset=node.col_offset))  # fmt: skip

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if isinstance(node, (ast.If, ast.While)):
                header(node, node.test)
            elif isinstance(node, (ast.For, ast.AsyncFor)):
                header(node, node.iter)
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    header(node, item.context_expr)
            children = [getattr(node, name, []) for name in ("body", "orelse", "finalbody")]
            children += [handler.body for handler in getattr(node, "handlers", [])]
            children += [case.body for case in getattr(node, "cases", [])]
            if any(children):
                for child in children:
                    visit(child)
            else:
                found.append(node)

    visit(scope.body)
    return found


def _scopes(tree: ast.Module) -> list[tuple[str, ast.AST]]:
    """The module (its own statements) and each function, by qualified name."""
    found: list[tuple[str, ast.AST]] = [("<module>", tree)]

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found.append((prefix + child.name, child))
                visit(child, prefix + child.name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
    visit(tree, "")
    return found


def roots_of(module: str, source: str, tables: set[str], builders: set[str] = frozenset()) -> list[Root]:
    """Every statement ``source`` builds, and every use there of a name in
    ``builders`` (a call of a builder, a module constant), as :class:`Root`."""
    tree = ast.parse(source)
    aliases = _aliases(tree, tables)
    lines = source.splitlines()
    found = []

    def segment(stmt: ast.stmt) -> str:
        if isinstance(stmt, ast.Expr) and stmt.end_lineno == stmt.lineno and stmt.end_col_offset == stmt.col_offset:
            return ast.unparse(stmt.value)  # a compound statement's header
        return "\n".join(lines[stmt.lineno - 1:stmt.end_lineno])

    for function, scope in _scopes(tree):
        statements = [stmt for stmt in _simple_statements(scope)
                      if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant))]  # docstrings
        names_of = [_names_in(stmt) for stmt in statements]
        for index, stmt in enumerate(statements):
            for node in ast.walk(stmt):
                is_use = (isinstance(node, ast.Name) and node.id in builders and isinstance(node.ctx, ast.Load)
                          and function != "<module>")  # fmt: skip
                if not (_is_root(node, aliases) or is_use):
                    continue
                # the statement's names: assigned from it before it runs
                names = set() if _runs(stmt) else _targets(stmt)
                flow = [stmt]
                for later, named in zip(statements[index + 1:], names_of[index + 1:]):
                    if names & named:
                        flow.append(later)
                        if not _runs(later):
                            names |= _targets(later)
                # and the statements before it that made the names it uses (a subquery, a builder's)
                wanted, before = _names_in(stmt) - names, []
                for earlier in reversed(statements[:index]):
                    made = _targets(earlier) & wanted
                    if made and not _runs(earlier):
                        before.insert(0, earlier)
                        wanted |= _names_in(earlier)
                text = "\n".join(segment(s) for s in before + flow)
                returned = any(
                    isinstance(s, ast.Return) and s.value is not None and not _runs(s.value)
                    and (s is stmt or bool(names & _names_in(s.value))) for s in flow
                ) or (function == "<module>" and bool(_targets(stmt)))  # fmt: skip
                # a builder: a module's function or constant, used by its name
                returned = returned and "." not in function
                name = _constant_name(text) if function == "<module>" else function
                found.append(Root(module, function, node.lineno, text, returned, [name]))
                break  # one root a statement: its subqueries are in its text
    return found


def _runs(node: ast.AST) -> bool:
    """Whether ``node`` sends a statement (``conn.execute(...)`` and its kin)."""
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr.startswith(("exec", "scalar")) for n in ast.walk(node))  # fmt: skip


def bounded(text: str, keys: dict[str, list[frozenset[str]]], aliases: dict[str, str]) -> bool:
    """Whether a statement's text bounds it (the module's docstring)."""
    if _BOUND.search(text):
        return True
    equal: dict[str, set[str]] = {}
    for match in _EQUAL.finditer(text):
        owner, column = (match.group(1), match.group(2)) if match.group(1) else (match.group(3), match.group(4))
        table = aliases.get(owner)
        if table:
            equal.setdefault(table, set()).add(column)
    if any(key <= columns for table, columns in equal.items() for key in keys.get(table, ())):
        return True
    # driver SQL: ``FROM t ... WHERE col = :x`` over a key of t
    named = set(re.findall(r"\b(?:FROM|UPDATE|JOIN|INTO)\s+(\w+)", text))
    columns = set(re.findall(r"\b(\w+)\s*=\s*(?:%\(|:\w|\$\d|\?)", text))
    return any(key <= columns for table in named for key in keys.get(table, ()))


def unbounded(sources: dict[str, str]) -> dict[tuple[str, str], int]:
    """The statements of ``sources`` (module name to its text) not bounded,
    counted per (module, function), builders followed to their uses."""
    keys = _tables()
    tables = set(keys)
    builders: set[str] = set()
    aliases_of = {module: _aliases(ast.parse(source), tables) for module, source in sources.items()}
    while True:
        roots = [root for module, source in sources.items() for root in roots_of(module, source, tables, builders)]
        left, grown = [], set(builders)
        for root in roots:
            if bounded(root.text, keys, aliases_of[root.module]):
                continue
            if root.returned:
                name = root.uses[0]
                if name:
                    grown.add(name)
                    continue
            left.append(root)
        if grown == builders:
            break
        builders = grown
    counts: dict[tuple[str, str], int] = {}
    for root in left:
        counts[(root.module, root.function)] = counts.get((root.module, root.function), 0) + 1
    return counts


def _constant_name(text: str) -> str:
    match = re.match(r"\s*(\w+)\s*[:=]", text)
    return match.group(1) if match else ""


def _store_sources() -> dict[str, str]:
    return {str(path.relative_to(STORE)): path.read_text() for path in sorted(STORE.rglob("*.py"))
            if "migrations" not in path.parts}  # fmt: skip


ONE_ROW = "one row: a key of a table outside ``tables.metadata`` (the statement names it)"
UNBOUNDED_LEFT: dict[tuple[str, str], tuple[int, str]] = {
    ("alerts.py", "AlertStore.get.fn"): (1, "one row: the open alert of a key (unique among open alerts)"),
    ("arming.py", "ArmStore.start.fn"): (1, "the arm's own rows, its query built above from their ids"),
    ("calendarhold.py", "Unwalked.holds"): (1, "one tenant's calendars being walked, at most max_calendars"),
    ("calendars.py", "CalendarStore.create.fn"): (1, "a count of one tenant's calendars, at most max_calendars"),
    ("calendaruse.py", "jobs_naming"): (1, "a count of one tenant's jobs, at most max_jobs (quota.take)"),
    ("claim_writes.py", "carried_missed"): (1, "one row: a job's open misfire range (job, reason, continues_at)"),
    ("claim_writes.py", "_record"): (1, "one row: a job's open skip range (job, reason, continues_at)"),
    ("cluster.py", "ensure_cluster.fn"): (1, ONE_ROW),
    ("handout_starts.py", "_union_all"): (1, "a union of scans its callers built, each with its LIMIT"),
    ("jobpages.py", "_unread"): (1, "no table: a bound value as a scalar subquery"),
    ("lateness.py", "LatenessStore.oldest_waiting"): (1, "the paused tenants: one row a tenant"),
    ("migrate.py", "_apply_one"): (1, ONE_ROW),
    ("migrate.py", "_backfill.step"): (1, ONE_ROW),
    ("migrate.py", "_is_recorded"): (1, ONE_ROW),
    ("migrate.py", "_read_applied"): (1, "schema_migrations: one row a migration"),
    ("migrate_steps.py", "Lease.release"): (1, ONE_ROW),
    ("migrate_steps.py", "Lease.renew.renew"): (1, ONE_ROW),
    ("migrate_steps.py", "Lease.take"): (1, ONE_ROW),
    ("migrate_steps.py", "Lease.wait"): (1, ONE_ROW),
    ("partitions.py", "PartitionStore.max_epoch.fn"): (1, "partitions: one row a partition (partition_count)"),
    ("quota.py", "_deal"): (1, "one tenant's quota slots (a fixed few)"),
    ("quota.py", "counted"): (1, "a sum over one tenant's slots of one quota (a fixed few)"),
    ("retention.py", "RetentionStore.attempt_partitions.fn"): (2, "the catalogue: attempts' partitions"),
    ("retention.py", "RetentionStore.create_partition.fn"): (1, "EXISTS: stops at the first row"),
    ("retention.py", "RetentionStore.detach_partition.fn"): (1, "the catalogue: EXISTS of one partition"),
    ("retention.py", "RetentionStore.roll_up_detached.fn"): (3, ONE_ROW + " (attempt_partition_walks by partition)"),
    ("revisions.py", "keep_revisions"): (1, "CHUNK jobs' revisions: KEEP a job + the batch's (their one writer)"),
    ("timeline.py", "scans"): (2, "builders, one a tenant's running group a session at a time: its callers add "
                                  "the LIMIT (history, search_executions)"),
    ("transactions.py", "table_held"): (1, "EXISTS over the lock table: stops at the first row, outage path only"),
}
"""Statements left without a bound, per (module, function): how many, and why."""


def test_every_store_statement_is_bounded() -> None:
    found = unbounded(_store_sources())
    assert found == {key: count for key, (count, _why) in UNBOUNDED_LEFT.items()}


FIXTURE = """
import sqlalchemy as sa
from .tables import jobs, executions


def page(conn, tenant, after):
    query = sa.select(jobs).where(jobs.c.tenant == tenant, jobs.c.id > after)
    return conn.execute(query.order_by(jobs.c.id).limit(100)).all()


def one(conn, job_id):
    return conn.execute(sa.select(jobs).where(jobs.c.id == job_id)).first()


def some(conn, ids):
    return conn.execute(sa.select(executions).where(one_of(conn, executions.c.id, ids))).all()


def _builder(tenant):
    return sa.select(jobs.c.id).where(jobs.c.tenant == tenant)


def used(conn, tenant):
    return conn.execute(_builder(tenant).limit(10)).all()


def driver(conn):
    return conn.exec_driver_sql("SELECT id FROM jobs WHERE tenant = %(t)s ORDER BY id LIMIT 5").all()
"""
"""Bounded statements only: a page with a LIMIT, a key, a key set, a
builder bounded where it is used, driver SQL with a LIMIT."""

UNBOUNDED = {
    "a SELECT of a tenant's jobs": "conn.execute(sa.select(jobs).where(jobs.c.tenant == tenant)).all()",
    "an UPDATE of a job's executions": "conn.execute(executions.update().where(executions.c.job_id == j).values(a=1))",
    "a DELETE by a tenant": "conn.execute(sa.delete(jobs).where(jobs.c.tenant == tenant))",
    "driver SQL": "conn.exec_driver_sql(\"SELECT id FROM jobs WHERE tenant = %(t)s ORDER BY id\").all()",
    "a builder used without a bound": "conn.execute(_builder(tenant)).all()",
}
"""Each an unbounded statement the guard must find when added to :data:`FIXTURE`."""


def test_the_fixture_s_bounded_statements_pass() -> None:
    assert unbounded({"fixture.py": FIXTURE}) == {}


@pytest.mark.parametrize("added", sorted(UNBOUNDED))
def test_an_unbounded_statement_added_fails_the_guard(added: str) -> None:
    source = FIXTURE + f"\n\ndef added(conn, tenant, j):\n    return {UNBOUNDED[added]}\n"
    assert unbounded({"fixture.py": source}) == {("fixture.py", "added"): 1}


def test_a_new_unbounded_statement_in_a_store_module_fails_the_guard() -> None:
    sources = _store_sources()
    sources["jobs.py"] += "\n\ndef every_job(conn):\n    return conn.execute(sa.select(jobs)).all()\n"
    found = unbounded(sources)
    assert found[("jobs.py", "every_job")] == 1
    assert found != {key: count for key, (count, _why) in UNBOUNDED_LEFT.items()}
