"""The Control UI (docs/web-ui.md): its login (:mod:`.login`) and its pages (:mod:`.page`)."""

from fastapi import APIRouter

from . import login, page

router = APIRouter()
router.include_router(login.router)
router.include_router(page.router)
PUBLIC_PATHS = login.PATHS | page.PUBLIC_PATHS

__all__ = ["PUBLIC_PATHS", "router"]
