"""The ``croupier web`` application: the history API and the pages players open in a frame.

Routes (no route writes; the database role it runs as can only read):

- ``GET /v1/rounds/{table_id}/{round_id}``: a round as recorded, cut to what the caller
  may see (:mod:`croupier.history.recall`);
- ``GET /v1/players/{player_id}/rounds``: a player's rounds, newest first, paginated;
- ``GET /v1/tables/{table_id}/rounds``: a table's rounds (staff);
- ``GET /history``, ``GET /history/rounds/{table_id}/{round_id}``: the player's pages
  (token in ``?token=``); staff open the round page signed in (a session cookie, or their
  ``X-Staff-Key`` header) and see what their role grants (every player's wagers;
  rejections and hashes for compliance); a round page opened with neither a token nor a
  staff credential goes to the staff sign-in;
- ``GET``/``POST /staff/login``, ``POST /staff/logout``, ``GET /staff/open``: staff sign-in
  from a browser (:mod:`croupier.history.staff`);
- ``GET /openapi.json``, ``/healthz``, ``/readyz``.

Players authenticate with ``Authorization: Bearer <JWT>``, staff with ``X-Staff-Key``
(:mod:`croupier.history.auth`). Missing, expired or forged credentials get 401. A round
or player the caller may not see gets the same 404 as one that does not exist, and so
does an id that cannot be one (a control character, too long).

Every bad request is answered 4xx; nothing a caller sends reaches a 500. Every response,
a 500 included, carries the security headers and framing policy of
:mod:`croupier.history.headers`.
"""

from __future__ import annotations

import hmac
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, Final
from urllib.parse import parse_qs, quote, urlsplit

import jinja2
import structlog
from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)
from fastapi.security import APIKeyHeader
from fastapi.templating import Jinja2Templates
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from contract.feed import ROUND_ID_PATTERN, TABLE_ID_PATTERN
from croupier.history import render
from croupier.history.auth import PLAYER_ID_PATTERN, Authenticator, Unauthorized
from croupier.history.headers import security_headers
from croupier.history.models import (
    PlayerRound,
    PlayerRounds,
    Problem,
    RoundRecall,
    TableRounds,
)
from croupier.history.recall import for_viewer, recall
from croupier.history.staff import (
    LOGIN_COOKIE,
    MAX_FORM_BYTES,
    SESSION_COOKIE,
    SignInRefused,
    StaffSignIn,
    TooManyAttempts,
    new_form_token,
)
from croupier.history.store import MAX_PAGE, BadCursor, Cursor, HistoryStore, StoredRound
from croupier.history.viewer import Viewer

VERSION: Final = "1.0.0"
NOT_FOUND: Final = "round not found"
DEFAULT_PAGE: Final = 20
_TEMPLATES: Final = Path(__file__).parent / "templates"
_TABLE_ID: Final = re.compile(TABLE_ID_PATTERN)
_ROUND_ID: Final = re.compile(ROUND_ID_PATTERN)
log = structlog.get_logger("croupier.web")

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
        return _staff_by_key(request, staff_key)
    scheme, _, credentials = (headers.get("authorization") or "").partition(" ")
    return auth.player(credentials if scheme.lower() == "bearer" else None)


ApiViewer = Annotated[Viewer, Depends(_api_viewer)]


class SecurityHeaders:
    """ASGI middleware: sets ``headers`` on every HTTP response that passes through it."""

    def __init__(self, app: ASGIApp, headers: Mapping[str, str]) -> None:
        self.app = app
        self.headers = dict(headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message).update(self.headers)
            await send(message)

        await self.app(scope, receive, sending)


def _staff_by_key(request: Request, key: str) -> Viewer:
    sign_in: StaffSignIn = request.app.state.sign_in
    return sign_in.with_header(key, request.client.host if request.client else "unknown")


class NotFound(Exception):
    """Answered with 404 and nothing more."""


def create_app(
    store: HistoryStore,
    auth: Authenticator,
    on_shutdown: Callable[[], Awaitable[None]] | None = None,
    *,
    frame_ancestors: Sequence[str] = (),
    staff_sign_in: StaffSignIn | None = None,
) -> FastAPI:
    """The application over ``store``, admitting whom ``auth`` admits; the pages may be
    framed by ``frame_ancestors`` only; staff sign in through ``staff_sign_in`` (default:
    sessions signed with a secret made now)."""

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
    headers = security_headers(frame_ancestors)
    app.add_middleware(SecurityHeaders, headers=headers)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(_TEMPLATES), autoescape=True)
    render.install(env)
    templates = Jinja2Templates(env=env)
    errors: dict[int | str, dict[str, Any]] = {401: {"model": Problem}, 404: {"model": Problem}}
    sign_in = staff_sign_in or StaffSignIn(auth)

    app.state.auth = auth
    app.state.sign_in = sign_in

    @app.exception_handler(TooManyAttempts)
    async def too_many(request: Request, error: TooManyAttempts) -> Response:
        retry = {"Retry-After": str(max(1, round(error.wait)))}
        if request.url.path.startswith("/history"):
            response = _page(templates, request, "error.html", 429, title="Wait", error=error)
            response.headers.update(retry)
            return response
        return JSONResponse({"detail": str(error)}, 429, headers=retry)

    @app.exception_handler(Unauthorized)
    async def unauthorized(request: Request, error: Unauthorized) -> Response:
        if request.url.path.startswith("/history"):
            return _page(templates, request, "error.html", 401, title="Sign in again", error=error)
        challenge = {"WWW-Authenticate": 'Bearer realm="croupier"'}
        return JSONResponse({"detail": str(error)}, 401, headers=challenge)

    @app.exception_handler(NotFound)
    async def not_found(request: Request, _: NotFound) -> Response:
        if request.url.path.startswith("/history"):
            return _page(templates, request, "error.html", 404, title="Not found", error=NOT_FOUND)
        return JSONResponse({"detail": NOT_FOUND}, 404)

    @app.exception_handler(BadCursor)
    async def bad_cursor(request: Request, error: BadCursor) -> Response:
        if request.url.path.startswith("/history"):
            return _page(templates, request, "error.html", 400, title="Bad link", error=error)
        return JSONResponse({"detail": str(error)}, 400)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, error: RequestValidationError) -> Response:
        detail = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in error.errors()[:5]
        )
        return JSONResponse({"detail": detail}, 422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, error: StarletteHTTPException) -> Response:
        return JSONResponse({"detail": str(error.detail)}, error.status_code)

    @app.exception_handler(Exception)
    async def fault(request: Request, error: Exception) -> Response:
        """A fault of the service, not of the request: logged; the headers still go out."""
        log.error("request failed", path=request.url.path[:200], exc_info=error)
        return JSONResponse({"detail": "internal error"}, 500, headers=headers)

    async def recalled(viewer: Viewer, table_id: str, round_id: str) -> str | RoundRecall:
        """A player's stored recall (JSON text), or staff's cut of the round folded now."""
        if not (_TABLE_ID.fullmatch(table_id) and _ROUND_ID.fullmatch(round_id)):
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
        if not PLAYER_ID_PATTERN.fullmatch(player_id):
            raise NotFound  # no player has that id
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
        if not viewer.is_staff or not _TABLE_ID.fullmatch(table_id):
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
        session = request.cookies.get(SESSION_COOKIE)
        if staff_key is not None:
            viewer = _staff_by_key(request, staff_key)
        elif token is not None:
            viewer = auth.player(token)
        else:  # a link without a player's token: a member of staff opening a round
            try:
                viewer = sign_in.viewer(session)
            except Unauthorized:
                return RedirectResponse(f"/staff/login?next={quote(request.url.path)}", 303)
        found = await recalled(viewer, table_id, round_id)
        shown = RoundRecall.model_validate_json(found) if isinstance(found, str) else found
        staff = viewer if viewer.is_staff else None
        title = f"Round {round_id}"
        signed_in = staff is not None and staff_key is None and token is None
        return _page(
            templates,
            request,
            "round.html",
            200,
            title=title,
            round=shown,
            token=token,
            staff=staff,
            sign_out=sign_in.logout_token(session) if signed_in and session else None,
        )

    def login_page(
        request: Request, status: int, next_page: str, error: str | None = None
    ) -> Response:
        form_token = new_form_token()
        session = request.cookies.get(SESSION_COOKIE)
        try:
            signed_in = sign_in.viewer(session) if session else None
        except Unauthorized:
            signed_in = None
        if error is None and not _secure_context(request):
            error = "Sign-in needs HTTPS here: browsers keep the Secure session cookie only then."
        response = _page(
            templates,
            request,
            "login.html",
            status,
            title="Staff sign-in",
            form_token=form_token,
            next_page=next_page,
            error=error,
            sso=sign_in.sso_public_key is not None,
            signed_in=signed_in,
            sign_out=sign_in.logout_token(session) if signed_in and session else None,
        )
        response.set_cookie(
            LOGIN_COOKIE, form_token, max_age=1800, path="/", secure=True, httponly=True,
            samesite="strict",
        )  # fmt: skip
        return response

    @app.get("/staff/login", response_class=HTMLResponse, include_in_schema=False)
    async def login_form(
        request: Request, next_page: Annotated[str | None, Query(alias="next")] = None
    ) -> Response:
        return login_page(request, 200, _next_page(next_page))

    @app.post("/staff/login", response_class=HTMLResponse, include_in_schema=False)
    async def login(request: Request) -> Response:
        client = request.client.host if request.client else "unknown"
        form = await _form(request)
        next_page = _next_page(form.get("next"))
        wait = sign_in.limiter.attempt(client)
        if wait > 0:
            log.warning("staff sign-in", outcome="limited", client=client)
            response = login_page(request, 429, next_page, "Too many sign-in attempts: wait.")
            response.headers["Retry-After"] = str(max(1, round(wait)))
            return response
        try:
            _same_origin(request)
            expected = request.cookies.get(LOGIN_COOKIE) or ""
            if not (expected and _equal(form.get("form_token", ""), expected)):
                raise SignInRefused("the sign-in form has expired: sign in again", 403)
            if form.get("sso_token"):
                viewer, session = sign_in.with_sso(form["sso_token"])
            else:
                viewer, session = sign_in.with_key(form.get("key", ""))
        except (Unauthorized, SignInRefused) as error:
            status = error.status if isinstance(error, SignInRefused) else 401
            log.warning("staff sign-in", outcome="refused", client=client, reason=str(error))
            return login_page(request, status, next_page, "Sign-in refused: " + str(error))
        log.info(
            "staff sign-in", outcome="ok", client=client, staff=viewer.staff_name, role=viewer.role
        )
        response = RedirectResponse(next_page, 303)
        response.set_cookie(
            SESSION_COOKIE, session, max_age=sign_in.lifetime, path="/", secure=True,
            httponly=True, samesite="lax",
        )  # fmt: skip
        response.delete_cookie(LOGIN_COOKIE, path="/", secure=True, httponly=True)
        return response

    @app.post("/staff/logout", include_in_schema=False)
    async def logout(request: Request) -> Response:
        form = await _form(request)
        session = request.cookies.get(SESSION_COOKIE)
        _same_origin(request)
        if not session or not _equal(form.get("form_token", ""), sign_in.logout_token(session)):
            raise SignInRefused("sign out from the page that shows you signed in", 403)
        response = RedirectResponse("/staff/login", 303)
        response.delete_cookie(SESSION_COOKIE, path="/", secure=True, httponly=True)
        return response

    @app.get("/staff/open", include_in_schema=False)
    async def open_round(
        table: str = "", round_id: Annotated[str, Query(alias="round")] = ""
    ) -> Response:
        if not (_TABLE_ID.fullmatch(table) and _ROUND_ID.fullmatch(round_id)):
            raise SignInRefused("a table id and a round id, as the round's page shows them", 400)
        return RedirectResponse(f"/history/rounds/{quote(table)}/{quote(round_id)}", 303)

    @app.exception_handler(SignInRefused)
    async def refused(request: Request, error: SignInRefused) -> Response:
        return _page(templates, request, "error.html", error.status, title="Staff", error=error)

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
    return Response(text, media_type="application/json")


def _text(value: str | None) -> str:
    return json.dumps(value, ensure_ascii=False)


def _for_staff(found: RoundRecall, viewer: Viewer) -> RoundRecall:
    shown = for_viewer(found, viewer)
    assert shown is not None, "staff see every round"
    return shown


def _page(
    templates: Jinja2Templates, request: Request, name: str, status: int, **context: Any
) -> Response:
    return templates.TemplateResponse(request, name, context, status_code=status)


_ROUND_PAGE: Final = re.compile(r"/history/rounds/[A-Za-z0-9_-]{1,64}/[A-Za-z0-9_.:%-]{1,384}")


def _next_page(text: str | None) -> str:
    """Where a sign-in goes on to: a round page of this site, or the sign-in page itself
    (never another site: the form's ``next`` is whatever a link said)."""
    return text if text and _ROUND_PAGE.fullmatch(text) else "/staff/login"


async def _form(request: Request) -> dict[str, str]:
    """A small URL-encoded form's fields (the first value of each); too large is 413."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise SignInRefused("the form is too large", 413)
    try:
        fields = parse_qs(body.decode(), max_num_fields=10, strict_parsing=False)
    except (UnicodeDecodeError, ValueError):
        raise SignInRefused("the form is not URL-encoded text", 400) from None
    return {name: values[0] for name, values in fields.items()}


def _same_origin(request: Request) -> None:
    """Refuses a POST another site's page sent (its ``Origin`` names another host). The
    pages' ``Referrer-Policy: no-referrer`` makes browsers send ``Origin: null`` for their
    own forms, so null proves nothing either way: the form tokens decide then."""
    origin = request.headers.get("origin")
    if origin not in (None, "null") and urlsplit(origin).netloc != request.headers.get("host"):
        raise SignInRefused("a sign-in from another site", 403)


_LOOPBACK: Final = ("localhost", "127.0.0.1", "::1")


def _secure_context(request: Request) -> bool:
    """Whether a browser keeps a Secure cookie from this request: HTTPS (a proxy's
    ``X-Forwarded-Proto`` as uvicorn trusts it), or a loopback host."""
    return request.url.scheme == "https" or request.url.hostname in (
        "localhost",
        "127.0.0.1",
        "::1",
    )


def _equal(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())
