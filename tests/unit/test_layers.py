"""Nothing imports upward, and no store module outgrows one job: the rules
between the server's rooms, read off the source.

Every module under ``server/tickwheel_server`` and ``tickwheel/shared`` is
parsed (not imported) and each import it makes, at module level or inside a
function, is resolved to an absolute dotted name (relative imports against
the module's package; ``from X import y`` counts as importing ``X`` and
``X.y``, which may be a submodule). Each rule in :data:`RULES` says which
modules may not import which names; there is no allow-list.

A module of ``store/`` holds the SQL of one aggregate, or of one job of it,
in at most :data:`STORE_MODULE_LINES` lines; :data:`LONG_ALLOWED` names the
exceptions and why (an entry whose module is short again fails).
"""

from __future__ import annotations

import ast
import functools
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROOTS = {
    "tickwheel_server": REPO / "server" / "tickwheel_server",
    "tickwheel.shared": REPO / "sdk" / "python" / "tickwheel" / "shared",
    "tickwheel_worker": REPO / "workers" / "tickwheel_worker",
}


@dataclass(frozen=True)
class Rule:
    """Modules named by ``modules`` (dotted prefixes), except those under
    ``exempt``, import nothing under ``forbidden`` but what ``permitted``
    names (pure data a lower room may read, such as the alert catalogue)."""

    name: str
    modules: tuple[str, ...]
    forbidden: tuple[str, ...]
    exempt: tuple[str, ...] = ()
    permitted: tuple[str, ...] = ()


def _in(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)


S = "tickwheel_server."
RULES = (
    Rule(
        "only the API, web, CLI and process wiring import api/",
        modules=("tickwheel_server",),
        forbidden=(S + "api",),
        exempt=(S + "api", S + "web", S + "cli", S + "app", S + "dev"),
    ),
    Rule(
        "store/ is SQL below every component",
        modules=(S + "store",),
        forbidden=tuple(S + room for room in (
            "dispatcher", "gateway", "wheel", "web", "cli", "api", "alerts", "maintenance", "cluster",
        )),
        permitted=(S + "alerts.catalogue",),
    ),
    Rule(
        "policy/ is pure: no store, no wire, no SQLAlchemy",
        modules=(S + "policy",),
        forbidden=(S + "store", S + "api", S + "gateway", S + "dispatcher", "sqlalchemy", "grpc"),
    ),
    Rule(
        "lease/ speaks to etcd and nothing else of the server",
        modules=(S + "lease",),
        forbidden=("tickwheel_server",),
        permitted=(S + "lease",),
    ),
    Rule(
        "schedule/ is pure: it needs nothing else of the server",
        modules=(S + "schedule",),
        forbidden=("tickwheel_server", "sqlalchemy", "grpc"),
        permitted=(S + "schedule",),
    ),
    Rule(
        "tickwheel.shared is what server and worker share: it imports neither",
        modules=("tickwheel.shared",),
        forbidden=("tickwheel_server", "tickwheel_worker"),
    ),
    Rule(
        "the worker is what tenants install: it never imports the server",
        modules=("tickwheel_worker",),
        forbidden=("tickwheel_server",),
    ),
    Rule(
        "the gateway's parts reach each other only through the wiring (gateway.py); all may ask the fence",
        modules=tuple(S + "gateway." + part for part in ("fence", "rounds", "intake", "liveness")),
        forbidden=tuple(S + "gateway." + part for part in ("gateway", "rounds", "intake", "liveness")),
    ),
)

STORE_MODULE_LINES = 500
LONG_ALLOWED = {
    # store module: why it may be longer (a stale entry fails).
    "alerts.py": "SQL only since issue 16; the numbering transaction stays with the rows it numbers (552 lines)",
}


def module_name(root: str, path: Path) -> tuple[str, bool]:
    """(dotted name, is a package) of the source file ``path`` under ``root``."""
    parts = [root, *path.relative_to(ROOTS[root]).with_suffix("").parts]
    package = parts[-1] == "__init__"
    if package:
        parts.pop()
    return ".".join(parts), package


def imported(module: str, package: bool, tree: ast.AST) -> set[str]:
    """Every dotted name ``tree`` (the source of ``module``) imports."""
    here = module if package else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = here.split(".")
                if node.level - 1 >= len(parts):
                    raise AssertionError(f"{module}: relative import beyond the top level (line {node.lineno})")
                base = ".".join(parts[: len(parts) - (node.level - 1)] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
    return names


@functools.cache
def imports() -> dict[str, set[str]]:
    """Dotted module name -> what it imports, for every module under :data:`ROOTS`."""
    found: dict[str, set[str]] = {}
    for root, directory in ROOTS.items():
        for path in sorted(directory.rglob("*.py")):
            module, package = module_name(root, path)
            found[module] = imported(module, package, ast.parse(path.read_text(), filename=str(path)))
    return found


def breaches(rule: Rule) -> set[tuple[str, str]]:
    """(module, imported module) pairs breaking ``rule``: each imported name
    reduced to the shortest of its prefixes that the rule forbids and the
    source tree holds, so ``from ..api.convert import x`` reads as ``api.convert``."""
    modules = imports()
    found: set[tuple[str, str]] = set()
    for module, names in modules.items():
        if not _in(module, rule.modules) or _in(module, rule.exempt):
            continue
        for name in names:
            if not _in(name, rule.forbidden) or _in(name, rule.permitted):
                continue
            parts = name.split(".")
            known = [".".join(parts[:i]) for i in range(1, len(parts) + 1) if ".".join(parts[:i]) in modules]
            found.add((module, known[-1] if known else name))
    return found


def test_the_import_reader_resolves_relative_and_from_imports() -> None:
    source = ast.parse(
        "from . import sibling\nfrom ..api.convert import x\nimport sqlalchemy.orm\n"
        "def f():\n    from ..outside import y\n"
    )
    assert imported("a.b.c", False, source) == {
        "a.b", "a.b.sibling", "a.api.convert", "a.api.convert.x", "sqlalchemy.orm", "a.outside", "a.outside.y",
    }
    assert imported("a.b", True, ast.parse("from .c import d")) == {"a.b.c", "a.b.c.d"}
    with pytest.raises(AssertionError, match="beyond the top level"):
        imported("a.b", False, ast.parse("from ... import z"))


def test_every_room_is_read() -> None:
    modules = imports()
    for room in ("api.convert", "store.engine", "policy.retry", "gateway.gateway", "app"):
        assert S + room in modules
    assert "tickwheel.shared.clock" in modules and "tickwheel_worker" in modules


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.name)
def test_nothing_imports_upward(rule: Rule) -> None:
    unexpected = sorted(breaches(rule))
    assert not unexpected, f"{rule.name}: " + "; ".join(f"{module} imports {name}" for module, name in unexpected)


def long_store_modules() -> dict[str, int]:
    """File name -> lines, for each ``store/`` module longer than :data:`STORE_MODULE_LINES`."""
    store = ROOTS["tickwheel_server"] / "store"
    lines = {path.name: len(path.read_text().splitlines()) for path in store.glob("*.py")}
    return {name: count for name, count in lines.items() if count > STORE_MODULE_LINES}


def test_no_store_module_outgrows_one_job() -> None:
    unexpected = {name: count for name, count in long_store_modules().items() if name not in LONG_ALLOWED}
    assert not unexpected, f"store modules over {STORE_MODULE_LINES} lines (split by aggregate or job): {unexpected}"
    stale = sorted(set(LONG_ALLOWED) - set(long_store_modules()))
    assert not stale, f"remove these entries from LONG_ALLOWED, the modules are short now: {stale}"


def test_croniter_is_a_benchmark_dependency_only() -> None:
    # The schedule engine is Tickwheel's own (docs/architecture.md, "Time
    # zones and tzdata updates"); croniter is bench_next_fire.py's baseline.
    importing = sorted(module for module, names in imports().items() if any(_in(n, ("croniter",)) for n in names))
    assert not importing, f"croniter imported at run time by {importing}"
    sdk = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    server = tomllib.loads((REPO / "server" / "pyproject.toml").read_text())["project"]
    assert not [d for d in sdk["dependencies"] + server["dependencies"] if d.lower().startswith("croniter")]
    assert any(d.startswith("croniter") for d in server["optional-dependencies"]["bench"])
