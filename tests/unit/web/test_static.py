"""The console's files: served with their types and ETags, and written so
that the Content-Security-Policy they are served under holds."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from tickwheel_server.web.router import Request, Router
from tickwheel_server.web.static import PAGES, STATIC_DIR, StaticFiles, load


class Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.inline_script = False
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        if self._in_script and data.strip():
            self.inline_script = True


def test_the_page_has_no_inline_script_style_or_handler_so_the_policy_can_forbid_them() -> None:
    page = Page()
    page.feed((STATIC_DIR / "index.html").read_text())
    assert not page.inline_script
    for tag, attrs in page.tags:
        assert tag != "style", "inline <style>"
        assert "style" not in attrs, f"style attribute on <{tag}>"
        assert not [a for a in attrs if a.startswith("on")], f"event handler attribute on <{tag}>"
        if tag == "script":
            assert attrs.get("src", "").startswith("/"), "scripts come from this origin"
    assert ("script", {"src": "/console.js", "defer": None}) in page.tags


def test_the_script_uses_no_html_sink() -> None:
    # The page is served with Trusted Types required, which makes these throw
    # in the browser; the script builds every node with createElement and text.
    source = (STATIC_DIR / "console.js").read_text()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function",
                 "setTimeout(\"", "DOMParser", "createContextualFragment"):  # fmt: skip
        assert sink not in source, sink
    assert re.search(r"sessionStorage", source) and "localStorage" not in source


def test_every_file_is_read_with_its_content_type_and_a_strong_etag() -> None:
    files = load()
    assert set(files) == set(PAGES)
    assert files["/"].content_type == "text/html; charset=utf-8"
    assert files["/console.js"].content_type == "text/javascript; charset=utf-8"
    assert files["/console.css"].content_type == "text/css; charset=utf-8"
    assert files["/favicon.svg"].content_type == "image/svg+xml"
    assert all(re.fullmatch(r'"[0-9a-f]{32}"', f.etag) for f in files.values())


def test_a_missing_file_stops_the_console_from_being_assembled(tmp_path) -> None:
    with pytest.raises(OSError):
        load(tmp_path)


@pytest.mark.parametrize(
    ("if_none_match", "status"),
    [("", 200), ('"other"', 200), ("{etag}", 304), ("W/{etag}", 304), ('"other", {etag}', 304), ("*", 304)],
)
async def test_files_revalidate_by_etag(if_none_match, status) -> None:
    router = Router()
    StaticFiles().routes(router)
    handler, _ = router.resolve("/console.js")
    etag = load()["/console.js"].etag
    headers = {"if-none-match": if_none_match.format(etag=etag)} if if_none_match else {}
    response = await handler(Request("GET", "/console.js", "/console.js", {}, headers))
    assert response.status == status
    assert dict(response.headers) == {"ETag": etag, "Cache-Control": "no-cache"}
    assert (response.body == b"") == (status == 304)
