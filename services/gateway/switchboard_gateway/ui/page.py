"""``GET /ui``: the Control UI's shell, its scripts and its style sheet (package data under
``static/``, no build step, nothing from elsewhere). Public: they hold no data; every page
asks the gateway's API for it, with the login's cookie and CSRF token (:mod:`.login`)."""

from __future__ import annotations

from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable

from fastapi import APIRouter
from fastapi.responses import Response

router = APIRouter()
TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}
# Only this origin's scripts, styles and requests; no inline script or style, no framing, no
# form posts, no referrer.
POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",
}


def _files(folder: Traversable, prefix: str = "") -> dict[str, str]:
    """URL path -> file path under static/, for every served file (index.html is /ui)."""
    found: dict[str, str] = {}
    for entry in folder.iterdir():
        name = prefix + entry.name
        if entry.is_dir():
            found.update(_files(entry, name + "/"))
        elif any(name.endswith(suffix) for suffix in TYPES):
            found["/ui" if name == "index.html" else f"/ui/{name}"] = name
    return found


STATIC = resources.files(__package__).joinpath("static")
ASSETS = _files(STATIC)
PUBLIC_PATHS = frozenset(ASSETS)


@cache
def asset(name: str) -> bytes:
    return STATIC.joinpath(*name.split("/")).read_bytes()


def _route(path: str, name: str) -> None:
    media_type = next(t for suffix, t in TYPES.items() if name.endswith(suffix))

    async def serve() -> Response:
        return Response(asset(name), media_type=media_type, headers=HEADERS)

    router.add_api_route(path, serve, methods=["GET"], include_in_schema=False)


for _path, _name in ASSETS.items():
    _route(_path, _name)
