"""Staff sign-in from a browser: a staff key (or the operator's SSO token) for a session cookie.

``GET /staff/login`` shows a short form; ``POST /staff/login`` trades what it was given
for a session cookie and sends the browser on to the round it came for. Roles are as
with ``X-Staff-Key``: the session names the key's holder, and each request looks the
holder up again, so a key removed from ``CROUPIER_STAFF_KEYS`` (or given another digest)
ends its sessions at once.

The session cookie (``__Host-croupier_staff``)
    ``HttpOnly`` (no script reads it), ``Secure`` (never sent over plain HTTP),
    ``SameSite=Lax`` and ``Path=/`` with no ``Domain`` (the ``__Host-`` prefix makes the
    browser hold it to that). Lax, not Strict, so that a support agent can open a round
    from a link in their ticket: the cookie rides only on top-level GET navigations from
    elsewhere, and every GET only reads. Its value is the holder, role and expiry (at most
    :data:`SESSION_SECONDS`), signed with HMAC-SHA256 under ``CROUPIER_WEB_SESSION_SECRET``
    (or a secret made at start, so sessions end with the service).
Cross-site request forgery
    The two POSTs (sign in, sign out) need a token from the form: sign-in checks it
    against a ``SameSite=Strict`` cookie set with the form (so another site cannot sign a
    browser in as someone else), sign-out against the session itself. A POST whose
    ``Origin`` names another host is refused as well.
Attempts
    Every attempt is logged (``croupier.web``: outcome, staff name, client address, never
    the key) and limited: :data:`PER_ADDRESS` attempts per client address and
    :data:`OVERALL` in all, each refilled over :data:`WINDOW_SECONDS` (token buckets), then
    429 with ``Retry-After``. A wrong ``X-Staff-Key`` header counts as an attempt too (a
    right one does not), and over the limit no header key is looked at. At most
    :data:`TRACKED_ADDRESSES` addresses are remembered (least recently seen dropped), so
    memory stays bounded whatever the sender. Limits are per process (``--workers N``
    allows N times as many).
SSO
    With ``CROUPIER_STAFF_SSO_PUBLIC_KEY`` set, the form also takes the operator's
    single-sign-on token: a JWT (RS256, ES256 or EdDSA) with ``sub`` (the staff member),
    ``role`` (a configured role), ``exp``, and ``aud`` = ``CROUPIER_STAFF_SSO_AUDIENCE``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

import jwt
import structlog

from croupier.history.auth import (
    ASYMMETRIC,
    MAX_TOKEN_CHARS,
    Authenticator,
    StaffKey,
    Unauthorized,
)
from croupier.history.viewer import Viewer

SESSION_COOKIE: Final = "__Host-croupier_staff"
LOGIN_COOKIE: Final = "__Host-croupier_login"
SESSION_SECONDS: Final = 8 * 3600
PER_ADDRESS: Final = 10
OVERALL: Final = 100
WINDOW_SECONDS: Final = 60.0
TRACKED_ADDRESSES: Final = 10_000
MAX_FORM_BYTES: Final = 8192
DEFAULT_SSO_AUDIENCE: Final = "croupier-staff"
_NAME: Final = re.compile(r"[^\x00-\x1f\x7f]{1,128}")
log = structlog.get_logger("croupier.web")


class TooManyAttempts(Exception):
    """Sign-in attempts over the limit (HTTP 429): try again in ``wait`` seconds."""

    def __init__(self, wait: float) -> None:
        super().__init__("too many sign-in attempts: wait")
        self.wait = wait


class SignInRefused(Exception):
    """A sign-in with a wrong key or token, or without the form's token (HTTP 401/403)."""

    def __init__(self, reason: str, status: int = 401) -> None:
        super().__init__(reason)
        self.status = status


@dataclass
class _Bucket:
    tokens: float
    at: float


@dataclass
class SignInLimiter:
    """Token buckets per client address and overall; memory bounded by ``tracked``."""

    per_address: int = PER_ADDRESS
    overall: int = OVERALL
    window: float = WINDOW_SECONDS
    tracked: int = TRACKED_ADDRESSES
    clock: Callable[[], float] = time.monotonic
    _addresses: OrderedDict[str, _Bucket] = field(default_factory=OrderedDict, repr=False)
    _all: _Bucket | None = field(default=None, repr=False)

    def attempt(self, address: str) -> float:
        """Take one attempt for ``address``: 0 if allowed, else seconds until one is."""
        now = self.clock()
        if self._all is None:
            self._all = _Bucket(float(self.overall), now)
        mine = self._addresses.pop(address, None) or _Bucket(float(self.per_address), now)
        self._addresses[address] = mine  # most recently seen last
        while len(self._addresses) > self.tracked:
            self._addresses.popitem(last=False)
        waits = [
            self._wait(bucket, capacity, now)
            for bucket, capacity in ((mine, self.per_address), (self._all, self.overall))
        ]
        if max(waits) > 0:
            return max(waits)
        mine.tokens -= 1
        self._all.tokens -= 1
        return 0.0

    def wait(self, address: str) -> float:
        """Seconds until ``address`` may try again (0: now), taking nothing."""
        now = self.clock()
        mine = self._addresses.get(address)
        waits = [self._wait(mine, self.per_address, now) if mine else 0.0]
        if self._all is not None:
            waits.append(self._wait(self._all, self.overall, now))
        return max(waits)

    def _wait(self, bucket: _Bucket, capacity: int, now: float) -> float:
        rate = capacity / self.window
        bucket.tokens = min(float(capacity), bucket.tokens + (now - bucket.at) * rate)
        bucket.at = now
        return 0.0 if bucket.tokens >= 1 else (1 - bucket.tokens) / rate


@dataclass(frozen=True)
class StaffSignIn:
    """Issues and checks staff sessions over the keys and roles of ``auth``."""

    auth: Authenticator
    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    sso_public_key: str | None = None
    sso_audience: str = DEFAULT_SSO_AUDIENCE
    lifetime: int = SESSION_SECONDS
    clock: Callable[[], float] = time.time
    limiter: SignInLimiter = field(default_factory=SignInLimiter)

    def __post_init__(self) -> None:
        if len(self.secret) < 32:
            raise ValueError("CROUPIER_WEB_SESSION_SECRET must be at least 32 bytes")

    def with_key(self, key: str) -> tuple[Viewer, str]:
        """The staff member a key belongs to, and their session cookie's value."""
        found = self.auth.staff_key(key)
        viewer = Viewer(role=found.role, staff_name=found.name, grants=self.auth.grants[found.role])
        return viewer, self._session(viewer, self._fingerprint(found))

    def with_sso(self, token: str) -> tuple[Viewer, str]:
        """The staff member the operator's SSO token names, and their session."""
        if self.sso_public_key is None:
            raise Unauthorized("single sign-on is not configured")
        if not token or len(token) > MAX_TOKEN_CHARS:
            raise Unauthorized("the sign-on token is not valid")
        try:
            claims = jwt.decode(
                token,
                self.sso_public_key,
                algorithms=list(ASYMMETRIC),
                audience=self.sso_audience,
                options={"require": ["exp", "sub", "aud", "role"]},
            )
        except jwt.PyJWTError:
            raise Unauthorized("the sign-on token is not valid") from None
        name, role = claims["sub"], claims["role"]
        named = isinstance(name, str) and _NAME.fullmatch(name)
        if not (named and isinstance(role, str) and role in self.auth.grants):
            raise Unauthorized("the sign-on token names no staff role")
        viewer = Viewer(role=role, staff_name=name, grants=self.auth.grants[role])
        return viewer, self._session(viewer, "sso")

    def with_header(self, key: str, client: str) -> Viewer:
        """The staff member an ``X-Staff-Key`` header names. Wrong keys count as sign-in
        attempts of ``client`` (right ones do not), and over the limit no key is looked at."""
        wait = self.limiter.wait(client)
        if wait > 0:
            log.warning("staff sign-in", outcome="limited", client=client, via="header")
            raise TooManyAttempts(wait)
        try:
            return self.auth.staff(key)
        except Unauthorized as error:
            self.limiter.attempt(client)
            log.warning("staff sign-in", outcome="refused", client=client, via="header")
            raise error from None

    def viewer(self, cookie: str | None) -> Viewer:
        """The staff member a session cookie names; :class:`Unauthorized` otherwise."""
        if not cookie or len(cookie) > 1024:
            raise Unauthorized("sign in as staff")
        body, _, mac = cookie.partition(".")
        try:
            raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
            given = base64.urlsafe_b64decode(mac + "=" * (-len(mac) % 4))
        except (ValueError, binascii.Error):
            raise Unauthorized("sign in as staff") from None
        if not hmac.compare_digest(given, self._mac(raw)):
            raise Unauthorized("sign in as staff")
        session = json.loads(raw)
        if self.clock() >= session["exp"]:
            raise Unauthorized("the staff session has ended: sign in again")
        role = session["role"]
        if session["via"] != "sso" and not any(
            k.name == session["name"] and k.role == role and self._fingerprint(k) == session["via"]
            for k in self.auth.staff_keys
        ):
            raise Unauthorized("the staff key was changed: sign in again")
        if role not in self.auth.grants:
            raise Unauthorized("the staff role was removed: sign in again")
        return Viewer(role=role, staff_name=session["name"], grants=self.auth.grants[role])

    def logout_token(self, cookie: str) -> str:
        """The token the sign-out form carries for this session."""
        return hmac.new(self.secret, b"sign-out\x00" + cookie.encode(), hashlib.sha256).hexdigest()

    def _session(self, viewer: Viewer, via: str) -> str:
        """``via``: "sso", or the fingerprint of the key signed in with."""
        session = {
            "name": viewer.staff_name,
            "role": viewer.role,
            "via": via,
            "exp": int(self.clock()) + self.lifetime,
        }
        raw = json.dumps(session, separators=(",", ":"), sort_keys=True).encode()
        return f"{_b64(raw)}.{_b64(self._mac(raw))}"

    def _fingerprint(self, key: StaffKey) -> str:
        """Names the key in a session without revealing its digest."""
        return hmac.new(self.secret, b"staff-key\x00" + key.sha256, hashlib.sha256).hexdigest()[:32]

    def _mac(self, raw: bytes) -> bytes:
        return hmac.new(self.secret, b"staff-session\x00" + raw, hashlib.sha256).digest()


def new_form_token() -> str:
    """A fresh token for the sign-in form and its cookie."""
    return secrets.token_urlsafe(24)


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")
