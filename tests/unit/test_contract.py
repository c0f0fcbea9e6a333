"""The contract's gate: buf lint (STANDARD) and format, the breaking-change
check against the previous commit, and generated code that matches proto/."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_proto_lint_format_breaking_and_generated_code_are_current() -> None:
    result = subprocess.run(
        ["bash", "scripts/check-proto.sh"], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "generated code is up to date" in result.stdout


def test_every_service_rpc_message_enum_and_field_is_commented() -> None:
    missing = []
    for path in sorted((REPO / "proto" / "tickwheel" / "v1").glob("*.proto")):
        lines = path.read_text().splitlines()
        for number, line in enumerate(lines):
            stripped = line.strip()
            declaration = stripped.startswith(("message ", "enum ", "rpc ", "service ", "oneof "))
            field = stripped.endswith(";") and " = " in stripped and not stripped.startswith(("option ", "reserved ", "syntax "))
            if (declaration and not stripped.startswith("oneof ")) or field:
                if not lines[number - 1].strip().startswith("//"):
                    missing.append(f"{path.name}:{number + 1}: {stripped}")
    assert not missing, "uncommented declarations:\n" + "\n".join(missing)
