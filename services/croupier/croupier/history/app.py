"""The ``croupier web`` application: the history API and the pages players open in a frame.

Routes (no route writes; the database role it runs as can only read):

- ``GET /v1/rounds/{table_id}/{round_id}``: a round as recorded, cut to what the caller
  may see (:mod:`croupier.history.recall`);
- ``GET /v1/players/{player_id}/rounds``: a player's rounds, newest first, paginated;
- ``GET /v1/tables/{table_id}/rounds``: a table's rounds (staff);
- ``GET /history``, ``GET /history/rounds/{table_id}/{round_id}``: the player's pages
  (token in ``?token=``); staff open the round page with their ``X-Staff-Key`` header and
  see what their role grants (every player's wagers; rejections and hashes for compliance);
- ``GET /openapi.json``, ``/healthz``, ``/readyz``.

Players authenticate with ``Authorization: Bearer <JWT>``, staff with ``X-Staff-Key``
(:mod:`croupier.history.auth`). Missing, expired or forged credentials get 401. A round
or player the caller may not see gets the same 404 as one that does not exist.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, Final

import jinja2
from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from fastapi.security import APIKeyHeader
from fastapi.templating import Jinja2Templates
from starlette.exceptions import HTTPException as StarletteHTTPException

from contract.feed import ROUND_ID_PATTERN, TABLE_ID_PATTERN
from croupier.history import render
from croupier.history.auth import Authenticator, Unauthorized
from croupier.history.models import (
    PlayerRound,
    PlayerRounds,
    Problem,
    RoundRecall,
    TableRounds,
)
from croupier.history.recall import for_viewer, recall
from croupier.history.store import MAX_PAGE, BadCursor, Cursor, HistoryStore, StoredRound
from croupier.history.viewer import Viewer

VERSION: Final = "1.0.0"
NOT_FOUND: Final = "round not found"
DEFAULT_PAGE: Final = 20
_TEMPLATES: Final = Path(__file__).parent / "templates"
_SECURITY_HEADERS: Final = {
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",  # page URLs carry the player's token
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
}

_staff_key = APIKeyHeader(
    name="X-Staff-Key", auto_error=False, description="a staff key the operator configured"
)
#: How the API's callers authenticate, as the OpenAPI document states it. The API reads the
#: two headers itself (one dependency, not three: it is on every request's path).
_SECURITY_SCHEMES: Final = {
    "HTTPBearer": {
        "type": "http",
        "scheme": "bearer",
        "description": "the player's JWT from the game server",
    },
    "APIKeyHeader": {
        "type": "apiKey",
        "in": "header",
        "name": "X-Staff-Key",
        "description": "a staff key the operator configured",
    },
}
_SIGNED_IN: Final[dict[str, Any]] = {"security": [{"HTTPBearer": []}, {"APIKeyHeader": []}]}
Limit = Annotated[int, Query(ge=1, le=MAX_PAGE, description="rows per page")]
CursorText = Annotated[str | None, Query(max_length=64, description="from next_cursor")]


async def _api_viewer(request: Request) -> Viewer:
    auth: Authenticator = request.app.state.auth
    headers = request.headers
    staff_key = headers.get("x-staff-key")
    if staff_key is not None:
        return auth.staff(staff_key)
    scheme, _, credentials = (headers.get("authorization") or "").partition(" ")
    return auth.player(credentials if scheme.lower() == "bearer" else None)


ApiViewer = Annotated[Viewer, Depends(_api_viewer)]


class NotFound(Exception):
    """Answered with 404 and nothing more."""


def create_app(
    store: HistoryStore,
    auth: Authenticator,
    on_shutdown: Callable[[], Awaitable[None]] | None = None,
) -> FastAPI:
    """The application over ``store``, admitting whom ``auth`` admits."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        if on_shutdown is not None:
            await on_shutdown()

    app = FastAPI(
        lifespan=lifespan,
        title="Croupier history",
        version=VERSION,
        description=(
            "Round recall and game history, read from the ledger. Money is integer minor "
            "units. Players: `Authorization: Bearer <JWT>`; staff: `X-Staff-Key`."
        ),
        docs_url=None,
        redoc_url=None,
    )
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(_TEMPLATES), autoescape=True)
    render.install(env)
    templates = Jinja2Templates(env=env)
    errors: dict[int | str, dict[str, Any]] = {401: {"model": Problem}, 404: {"model": Problem}}

    app.state.auth = auth

    @app.exception_handler(Unauthorized)
    async def unauthorized(request: Request, error: Unauthorized) -> Response:
        if request.url.path.startswith("/history"):
            return _page(templates, request, "error.html", 401, title="Sign in again", error=error)
        headers = {"WWW-Authenticate": 'Bearer realm="croupier"', **_SECURITY_HEADERS}
        return JSONResponse({"detail": str(error)}, 401, headers=headers)

    @app.exception_handler(NotFound)
    async def not_found(request: Request, _: NotFound) -> Response:
        if request.url.path.startswith("/history"):
            return _page(templates, request, "error.html", 404, title="Not found", error=NOT_FOUND)
        return JSONResponse({"detail": NOT_FOUND}, 404, headers=_SECURITY_HEADERS)

    @app.exception_handler(BadCursor)
    async def bad_cursor(_: Request, error: BadCursor) -> Response:
        return JSONResponse({"detail": str(error)}, 400, headers=_SECURITY_HEADERS)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, error: RequestValidationError) -> Response:
        detail = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in error.errors()[:5]
        )
        return JSONResponse({"detail": detail}, 422, headers=_SECURITY_HEADERS)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, error: StarletteHTTPException) -> Response:
        return JSONResponse({"detail": str(error.detail)}, error.status_code)

    async def recalled(viewer: Viewer, table_id: str, round_id: str) -> str | RoundRecall:
        """A player's stored recall (JSON text), or staff's cut of the round folded now."""
        if not (_matches(TABLE_ID_PATTERN, table_id) and _matches(ROUND_ID_PATTERN, round_id)):
            raise NotFound
        if viewer.player_id is not None:
            document = await store.player_recall(table_id, round_id, viewer.player_id)
            if document is None:  # not theirs, or no such round: the same one lookup
                raise NotFound
            return document
        found = recall(table_id, round_id, await store.round_facts(table_id, round_id))
        if found is None:
            raise NotFound
        return _for_staff(found, viewer)

    async def player_page(
        viewer: Viewer, player_id: str, limit: int, cursor: str | None
    ) -> tuple[list[StoredRound], str | None]:
        if viewer.player_id is not None and viewer.player_id != player_id:
            raise NotFound
        before = Cursor.decode(cursor) if cursor else None
        rows = await store.player_rounds(player_id, limit + 1, before)
        more = len(rows) > limit
        rows = rows[:limit]
        last = Cursor(rows[-1].position, rows[-1].currency).encode() if more else None
        return rows, last

    @app.get(
        "/v1/rounds/{table_id}/{round_id}",
        response_model=RoundRecall,
        responses=errors,
        summary="A round as recorded in the ledger",
        openapi_extra=_SIGNED_IN,
    )
    async def get_round(viewer: ApiViewer, table_id: str, round_id: str) -> Any:
        shown = await recalled(viewer, table_id, round_id)
        return _json(shown if isinstance(shown, str) else shown.model_dump_json())

    @app.get(
        "/v1/players/{player_id}/rounds",
        response_model=PlayerRounds,
        responses={**errors, 400: {"model": Problem}},
        summary="A player's rounds, newest first",
        openapi_extra=_SIGNED_IN,
    )
    async def get_player_rounds(
        viewer: ApiViewer,
        player_id: str,
        limit: Limit = DEFAULT_PAGE,
        cursor: CursorText = None,
    ) -> Any:
        rows, last = await player_page(viewer, player_id, limit, cursor)
        return _json(
            f'{{"player_id":{_text(player_id)},"rounds":[{",".join(r.document for r in rows)}],'
            f'"next_cursor":{_text(last)}}}'
        )

    @app.get(
        "/v1/tables/{table_id}/rounds",
        response_model=TableRounds,
        responses={**errors, 400: {"model": Problem}},
        summary="A table's rounds, newest first (staff)",
        openapi_extra=_SIGNED_IN,
    )
    async def get_table_rounds(
        viewer: ApiViewer, table_id: str, limit: Limit = DEFAULT_PAGE, cursor: CursorText = None
    ) -> Any:
        if not viewer.is_staff:
            raise NotFound
        before = Cursor.decode(cursor) if cursor else None
        rows = await store.table_rounds(table_id, limit + 1, before)
        more = len(rows) > limit
        rows = rows[:limit]
        last = Cursor(rows[-1].position).encode() if more else None
        return _json(
            TableRounds(table_id=table_id, rounds=rows, next_cursor=last).model_dump_json()
        )

    @app.get("/history", response_class=HTMLResponse, include_in_schema=False)
    async def history_page(
        request: Request, token: str | None = None, cursor: CursorText = None
    ) -> Response:
        viewer = auth.player(token)
        assert viewer.player_id is not None
        rows, last = await player_page(viewer, viewer.player_id, DEFAULT_PAGE, cursor)
        rounds = [PlayerRound.model_validate_json(r.document) for r in rows]
        page = PlayerRounds(player_id=viewer.player_id, rounds=rounds, next_cursor=last)
        return _page(
            templates, request, "history.html", 200, title="Game history", page=page, token=token
        )

    @app.get(
        "/history/rounds/{table_id}/{round_id}",
        response_class=HTMLResponse,
        include_in_schema=False,
    )
    async def round_page(
        request: Request,
        staff_key: Annotated[str | None, Depends(_staff_key)],
        table_id: str,
        round_id: str,
        token: str | None = None,
    ) -> Response:
        viewer = auth.staff(staff_key) if staff_key is not None else auth.player(token)
        found = await recalled(viewer, table_id, round_id)
        shown = RoundRecall.model_validate_json(found) if isinstance(found, str) else found
        staff = viewer if viewer.is_staff else None
        title = f"Round {round_id}"
        return _page(
            templates,
            request,
            "round.html",
            200,
            title=title,
            round=shown,
            token=token,
            staff=staff,
        )

    schema = app.openapi

    def openapi() -> dict[str, Any]:
        document = schema()
        document.setdefault("components", {})["securitySchemes"] = _SECURITY_SCHEMES
        return document

    app.openapi = openapi  # type: ignore[method-assign]

    @app.get("/healthz", response_class=PlainTextResponse, include_in_schema=False)
    async def healthz() -> str:
        return "alive\n"

    @app.get("/readyz", response_class=PlainTextResponse, include_in_schema=False)
    async def readyz() -> Response:
        ok = await store.ready()
        text = f"store: {'ok' if ok else 'NOT READY'}\n"
        return PlainTextResponse(text, 200 if ok else 503)

    return app


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document the application serves at ``/openapi.json``."""
    from croupier.history.postgres import PostgresHistory

    unused = PostgresHistory("postgresql://openapi.invalid/none")  # never connects
    document: dict[str, Any] = create_app(unused, Authenticator(b"x" * 32)).openapi()
    return document


def _json(text: str) -> Response:
    return Response(text, media_type="application/json", headers=_SECURITY_HEADERS)


def _text(value: str | None) -> str:
    return json.dumps(value, ensure_ascii=False)


def _for_staff(found: RoundRecall, viewer: Viewer) -> RoundRecall:
    shown = for_viewer(found, viewer)
    assert shown is not None, "staff see every round"
    return shown


def _page(
    templates: Jinja2Templates, request: Request, name: str, status: int, **context: Any
) -> Response:
    response = templates.TemplateResponse(request, name, context, status_code=status)
    response.headers.update(_SECURITY_HEADERS)
    return response


def _matches(pattern: str, text: str) -> bool:
    return re.match(pattern, text) is not None
