"""The four workers (Python, TypeScript, Go, Java) hold a hostile server to
the same bounds: their READMEs share one table of them word for word, and
each worker's source defines every bound with the Python worker's number.

Read off the files (nothing is built): a bound changed in one worker and
not in the others, or a README whose table drifted, fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tickwheel_worker import bounds, resolver, runtime

REPO = Path(__file__).resolve().parents[2]
READMES = [REPO / "sdk" / name / "README.md" for name in ("python", "typescript", "go", "java")]
BEGIN = "<!-- worker-bounds: this table is the same in the four SDK READMEs"
END = "<!-- worker-bounds: end -->"

# The Python worker's bounds, and where each other worker defines its own (file, name).
BOUNDS: dict[str, tuple[int, dict[str, tuple[str, str]]]] = {
    "id characters": (bounds.MAX_ID_CHARS, {
        "typescript": ("src/bounds.ts", "MAX_ID_CHARS"), "go": ("tickwheel/worker/bounds.go", "maxIDChars"),
        "java": ("Bounds.java", "MAX_ID_CHARS")}),
    "handler characters": (bounds.MAX_HANDLER_CHARS, {
        "typescript": ("src/bounds.ts", "MAX_HANDLER_CHARS"), "go": ("tickwheel/worker/bounds.go", "maxHandlerChars"),
        "java": ("Bounds.java", "MAX_HANDLER_CHARS")}),
    "payload bytes": (bounds.MAX_PAYLOAD_BYTES, {
        "typescript": ("src/bounds.ts", "MAX_PAYLOAD_BYTES"), "go": ("tickwheel/worker/bounds.go", "maxPayloadBytes"),
        "java": ("Bounds.java", "MAX_PAYLOAD_BYTES")}),
    "URL characters": (bounds.MAX_URL_CHARS, {
        "typescript": ("src/bounds.ts", "MAX_URL_CHARS"), "go": ("tickwheel/worker/bounds.go", "maxURLChars"),
        "java": ("Bounds.java", "MAX_URL_CHARS")}),
    "method characters": (bounds.MAX_METHOD_CHARS, {
        "typescript": ("src/bounds.ts", "MAX_METHOD_CHARS"), "go": ("tickwheel/worker/bounds.go", "maxMethodChars"),
        "java": ("Bounds.java", "MAX_METHOD_CHARS")}),
    "headers": (bounds.MAX_HEADERS, {
        "typescript": ("src/bounds.ts", "MAX_HEADERS"), "go": ("tickwheel/worker/bounds.go", "maxHeaders"),
        "java": ("Bounds.java", "MAX_HEADERS")}),
    "header characters": (bounds.MAX_HEADERS_CHARS, {
        "typescript": ("src/bounds.ts", "MAX_HEADERS_CHARS"), "go": ("tickwheel/worker/bounds.go", "maxHeadersChars"),
        "java": ("Bounds.java", "MAX_HEADERS_CHARS")}),
    "hello entries": (runtime.MAX_IN_FLIGHT, {
        "typescript": ("src/worker.ts", "MAX_IN_FLIGHT"), "go": ("tickwheel/worker/worker.go", "maxHelloEntries"),
        "java": ("Worker.java", "MAX_IN_FLIGHT")}),
    "refusals": (runtime.MAX_REFUSED, {
        "typescript": ("src/worker.ts", "MAX_REFUSED"), "go": ("tickwheel/worker/worker.go", "maxRefused"),
        "java": ("Worker.java", "MAX_REFUSED")}),
    "receive bytes": (runtime.MAX_RECEIVE_BYTES, {
        "typescript": ("src/worker.ts", "MAX_RECEIVE_BYTES"), "go": ("tickwheel/worker/worker.go", "maxReceiveBytes"),
        "java": ("Worker.java", "MAX_RECEIVE_BYTES")}),
    "cancel reason characters": (runtime.CANCEL_REASON_CHARS, {
        "typescript": ("src/bounds.ts", "CANCEL_REASON_CHARS"), "go": ("tickwheel/worker/worker.go", "cancelReasonChars"),
        "java": ("Worker.java", "CANCEL_REASON_CHARS")}),
}
SOURCES = {
    "typescript": REPO / "sdk" / "typescript",
    "go": REPO / "sdk" / "go",
    "java": REPO / "sdk" / "java" / "src" / "main" / "java" / "dev" / "tickwheel" / "worker",
}
NUMBER = re.compile(r"[0-9_ ()*<]+")


def table(readme: Path) -> str:
    text = readme.read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1, f"{readme}: one table of the bounds, marked"
    return text[text.index(BEGIN):text.index(END)]


def defined(source: str, name: str) -> int:
    """The value of the constant ``name`` in ``source`` (a product or shift of integer literals)."""
    found = re.findall(rf"\b{name}\s*(?::\s*\w+\s*)?=\s*([^;\n]+)", source)
    assert len(found) == 1, f"{name}: defined {len(found)} times"
    expression = found[0].strip().removesuffix(",").strip()
    assert NUMBER.fullmatch(expression), f"{name} = {expression}: not a number"
    return int(eval(expression.replace("_", "")))  # noqa: S307 - digits, *, << and parentheses only


def test_the_four_readmes_share_one_table_of_the_bounds_word_for_word() -> None:
    tables = {readme.parent.name: table(readme) for readme in READMES}
    assert len(set(tables.values())) == 1, "the tables differ: " + ", ".join(
        name for name, text in tables.items() if text != tables["python"])
    text = tables["python"]
    for number in ("1 to 1024 characters", "200 characters", "4 MiB", "64 MiB", "URL 2048, method 16 characters",
                   "32 headers, 16 KiB", "20000", "1000 refusals"):
        assert number in text, number


@pytest.mark.parametrize("bound", sorted(BOUNDS))
def test_each_worker_defines_the_bound_with_the_python_workers_number(bound: str) -> None:
    want, where = BOUNDS[bound]
    for language, (path, name) in where.items():
        assert defined((SOURCES[language] / path).read_text(), name) == want, f"{language} {name}"


def test_the_table_gives_the_python_workers_caps_on_abandoned_lookups() -> None:
    """Only the Python worker runs HTTP targets, so only it looks up a
    tenant's host name: the caps the table states are its resolver's."""
    text = table(READMES[0])
    assert (f"{resolver.DEFAULT_ABANDONED_PER_TENANT} abandoned lookups of one tenant still under way, "
            f"{resolver.DEFAULT_ABANDONED} of all") in text
    assert "looked up by the Python worker only" in text
