"""``tickwheel completion bash``: the script is generated from the parsers, so
every command and flag completes, including the delegated commands' own
(``worker``, ``server``, ``cron next``); bash runs it here, word by word."""

from __future__ import annotations

import io
import subprocess

import pytest

from tickwheel_server.cli.completion import command_tree, completion_main
from tickwheel_server.cli.main import main


@pytest.fixture(scope="module")
def script(tmp_path_factory) -> str:
    out = io.StringIO()
    assert completion_main(["bash"], out) == 0
    path = tmp_path_factory.mktemp("completion") / "tickwheel.bash"
    path.write_text(out.getvalue())
    return str(path)


def complete(script: str, *words: str) -> list[str]:
    """What bash offers for the last of ``words`` (``tickwheel`` first)."""
    line = " ".join(f"'{word}'" for word in words)
    program = f'source "{script}"; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; _tickwheel; printf "%s\\n" "${{COMPREPLY[@]}}"'
    done = subprocess.run(["bash", "-c", program], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and not done.stderr, done.stderr
    return [word for word in done.stdout.splitlines() if word]


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (("tickwheel", ""), {"job", "calendar", "apply", "admin", "dev", "server", "worker", "migrate", "cron", "completion", "dlq"}),
        (("tickwheel", "jo"), {"job"}),
        (("tickwheel", "job", "cr"), {"create"}),
        (("tickwheel", "apply", "--pr"), {"--prune"}),
        (("tickwheel", "job", "create", "--na"), {"--name"}),
        (("tickwheel", "--address", "host:1", "job", "de"), {"delete"}),  # a global option's value is skipped
        (("tickwheel", "job", "--timeout", "job", "cr"), {"create"}),  # even when it looks like a command
        (("tickwheel", "worker", "--otlp-protocol", ""), {"grpc", "http/protobuf"}),
        (("tickwheel", "worker", "--trace-"), {"--trace-export"}),
        (("tickwheel", "server", "--metrics-"), {"--metrics-export", "--metrics-top-tenants"}),
        (("tickwheel", "cron", "next", "--t"), {"--tz"}),
        (("tickwheel", "completion", ""), {"bash", "zsh"}),
        (("tickwheel", "admin", "alerts", "list", "--kind", "dead"), {"dead_letter"}),
        (("tickwheel", "job", "create", "--name", ""), set()),  # a free value: nothing to offer
    ],
)
def test_bash_completes_commands_options_and_choices(script: str, words: tuple[str, ...], expected: set[str]) -> None:
    assert set(complete(script, *words)) == expected


def test_every_command_path_and_flag_is_in_the_script(script: str) -> None:
    text = open(script).read()
    tree = command_tree()
    assert ("job", "create") in tree and ("admin", "tenant", "create") in tree and ("worker",) in tree
    for path, node in tree.items():
        key = "/".join(("tickwheel", *path))
        assert f"_tickwheel_options[{key}]=" in text
        for option in node.options:
            assert option in text
    assert "--cron" in tree[("job", "create")].options and "--dev" in tree[("worker",)].options


def test_the_command_line_prints_it(capsys) -> None:
    assert main(["completion", "bash"]) == 0
    assert "complete -o default -F _tickwheel tickwheel" in capsys.readouterr().out
    assert main(["completion", "fish"]) == 2
    assert "invalid choice" in capsys.readouterr().err


def complete_zsh(script: str, *words: str) -> list[str]:
    """What zsh's bashcompinit hands the completion system for ``words``
    (zsh then matches the prefix itself, so the current word is left empty)."""
    line = " ".join(f"'{word}'" for word in words)
    program = (f'source "{script}"; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; _tickwheel; '
               'print -l -- "${COMPREPLY[@]}"')  # fmt: skip
    done = subprocess.run(["zsh", "-f", "-c", program], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and not done.stderr, done.stderr
    return [word for word in done.stdout.splitlines() if word]


@pytest.mark.parametrize(
    "words",
    [
        ("tickwheel", ""),
        ("tickwheel", "--address", "host:1", "job", ""),
        ("tickwheel", "worker", "--otlp-protocol", ""),
        ("tickwheel", "admin", "tenant", ""),
        ("tickwheel", "job", "create", "-"),
    ],
)
def test_zsh_offers_what_bash_offers(script: str, tmp_path, words: tuple[str, ...]) -> None:
    out = io.StringIO()
    completion_main(["zsh"], out)
    zsh_script = tmp_path / "tickwheel.zsh"
    zsh_script.write_text(out.getvalue())
    assert out.getvalue().startswith("# zsh runs the bash function through bashcompinit")
    assert set(complete_zsh(str(zsh_script), *words)) == set(complete(script, *words)) != set()
