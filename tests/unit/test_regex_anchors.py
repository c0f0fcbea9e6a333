"""No pattern in the Python we ship ends with ``$``: in Python's ``re`` a
``$`` also matches just before a final newline, so a check such as
``re.compile(r"^[A-Za-z0-9_.:-]{1,128}$").match`` let ``"r\\n"`` through
as a request id, a handler name, a header value, a tenant name.
Anchor the end with ``\\Z`` (or call ``fullmatch``)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = (ROOT / "server" / "tickwheel_server", ROOT / "workers" / "tickwheel_worker", ROOT / "sdk" / "python" / "tickwheel")
_PATTERN = re.compile(r"""re\.(?:compile|match|search)\(\s*[rbf]*(["'])(?P<body>.*?)(?<!\\)\1""")


def ends_with_dollar(source: str) -> list[str]:
    """The patterns in ``source`` whose last character is an unescaped ``$``."""
    found = []
    for match in _PATTERN.finditer(source):
        body = match.group("body")
        if body.endswith("$") and not body.endswith("\\$"):
            found.append(body)
    return found


def test_the_scan_finds_a_dollar_anchor_and_passes_the_others() -> None:
    assert ends_with_dollar('X = re.compile(r"^[a-z]{1,3}$")') == ["^[a-z]{1,3}$"]
    assert ends_with_dollar("re.match(r'^x$', s)") == ["^x$"]
    assert ends_with_dollar('X = re.compile(r"^[a-z]{1,3}\\Z")') == []
    assert ends_with_dollar('re.match(r"\\$[A-Za-z_]*\\$", text)') == []
    assert re.compile(r"^[a-z]{1,3}$").match("ab\n") and not re.compile(r"^[a-z]{1,3}\Z").match("ab\n")


def test_no_shipped_pattern_is_anchored_with_a_dollar() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}: {body}"
        for root in SHIPPED
        for path in sorted(root.rglob("*.py"))
        if not path.name.endswith(("_pb2.py", "_pb2_grpc.py"))
        for body in ends_with_dollar(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []
