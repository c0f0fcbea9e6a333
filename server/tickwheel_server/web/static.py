"""The console's page, script and style sheet, served from memory.

Plain files in ``static/`` (no build step), read once when the console is
assembled, so a missing file stops the server at start rather than at the
first visit. Each is served with its content type and an ETag, and
``Cache-Control: no-cache``: browsers keep a copy but ask again each time,
so a new server version is seen at the next load.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from .router import Request, Response, Router

STATIC_DIR = Path(__file__).with_name("static")
PAGES = {
    "/": "index.html",
    "/console.js": "console.js",
    "/console.css": "console.css",
    "/favicon.svg": "favicon.svg",
}
"""Route → file in :data:`STATIC_DIR`."""
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}


@dataclass(frozen=True)
class StaticFile:
    body: bytes
    content_type: str
    etag: str


def load(folder: Path = STATIC_DIR, pages: dict[str, str] = PAGES) -> dict[str, StaticFile]:
    """Route → file, read now; OSError when one is missing."""
    files = {}
    for route, name in pages.items():
        body = (folder / name).read_bytes()
        etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
        files[route] = StaticFile(body, CONTENT_TYPES[Path(name).suffix], etag)
    return files


def _matches(if_none_match: str, etag: str) -> bool:
    tags = {tag.strip().removeprefix("W/") for tag in if_none_match.split(",")}
    return etag in tags or "*" in tags


class StaticFiles:
    def __init__(self, files: dict[str, StaticFile] | None = None) -> None:
        self._files = load() if files is None else files

    def routes(self, router: Router) -> None:
        for route, file in self._files.items():
            router.get(route, self._handler(file))

    @staticmethod
    def _handler(file: StaticFile):
        async def serve(request: Request) -> Response:
            headers = (("ETag", file.etag), ("Cache-Control", "no-cache"))
            if _matches(request.header("if-none-match"), file.etag):
                return Response(304, headers=headers)
            return Response(200, file.body, file.content_type, headers)

        return serve
