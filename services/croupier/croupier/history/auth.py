"""Who may ask: players with the operator's short-lived JWT, staff with keys and roles.

Players
    The operator's game server signs a JWT with ``sub`` = the player id and ``exp``, HS256
    with the shared secret (``CROUPIER_PLAYER_TOKEN_SECRET``), or with its own private key
    when the operator configures the public key (``CROUPIER_PLAYER_TOKEN_PUBLIC_KEY``: PEM
    text or a file; RS256, ES256 or EdDSA). PyJWT verifies: a token is refused unless its
    signature checks with the key of the algorithm its header names, ``exp`` is in the
    future and ``sub`` is a player id (the whole claim: no control character, a trailing
    newline included). When the operator names this service's issuer and audience
    (``CROUPIER_WEB_TOKEN_ISSUER``, ``CROUPIER_WEB_TOKEN_AUDIENCE``), a token must carry
    both ``iss`` and ``aud`` and they must match: a token the same secret signed for
    another purpose is refused. The HMAC secret is never tried for an asymmetric
    algorithm, nor the public key as an HMAC secret. A token verified once is remembered
    (up to ``KNOWN_TOKENS`` of them) with its ``exp``: the same text presented again is
    the same token, admitted without the signature check until ``exp``, never after.

Staff
    The operator configures keys and roles (``CROUPIER_STAFF_KEYS``: JSON text or a file)::

        {"roles": {"support": [], "compliance": ["rejections", "hashes"]},
         "keys": [{"name": "desk-1", "role": "support", "sha256": "<hex of the key>"}]}

    Only SHA-256 digests of keys are configured; a presented key is hashed and compared in
    constant time. ``roles`` may be left out: then support has no grants and compliance
    has every grant.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import jwt

from croupier.history.viewer import Grant, Viewer

#: Limits on what a caller sends (longer is refused before any work).
MAX_TOKEN_CHARS: Final = 4096
MAX_KEY_CHARS: Final = 256
KNOWN_TOKENS: Final = 50_000
PLAYER_ID_PATTERN: Final = re.compile(r"[^\x00-\x1f\x7f]{1,128}")  # fullmatch: no "$"
ASYMMETRIC: Final = ("RS256", "ES256", "EdDSA")
DEFAULT_ROLES: Final = {
    "support": frozenset(),
    "compliance": frozenset({Grant.REJECTIONS, Grant.HASHES}),
}


class Unauthorized(Exception):
    """Missing, expired, forged or malformed credentials (HTTP 401)."""


class AuthConfigError(ValueError):
    """The operator's token or staff-key configuration is unusable."""


@dataclass(frozen=True, slots=True)
class StaffKey:
    """A configured staff key: its holder's name, role and the SHA-256 of the key."""

    name: str
    role: str
    sha256: bytes


@dataclass(frozen=True)
class Authenticator:
    """Verifies player tokens and staff keys; builds the :class:`Viewer` of a request."""

    token_secret: bytes | None
    public_key: str | None = None
    staff_keys: tuple[StaffKey, ...] = ()
    roles: dict[str, frozenset[Grant]] | None = None
    issuer: str | None = None
    audience: str | None = None
    clock: Callable[[], float] = time.time
    _known: dict[str, tuple[Viewer, float]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if self.token_secret is not None and len(self.token_secret) < 32:
            raise AuthConfigError(
                "CROUPIER_PLAYER_TOKEN_SECRET must be at least 32 bytes (HS256 needs a key "
                "as long as its hash)"
            )
        roles = self.roles or DEFAULT_ROLES
        for key in self.staff_keys:
            if key.role not in roles:
                raise AuthConfigError(f"staff key {key.name!r} has role {key.role!r}, not in roles")

    def player(self, token: str | None) -> Viewer:
        """The player a bearer token names; raises :class:`Unauthorized` otherwise."""
        if not token:
            raise Unauthorized("a player token is required")
        if len(token) > MAX_TOKEN_CHARS:
            raise Unauthorized("the token is too long")
        known = self._known.get(token)
        if known is not None:
            if self.clock() < known[1]:
                return known[0]
            raise Unauthorized("the token has expired")
        try:
            algorithm = jwt.get_unverified_header(token).get("alg")
            key = self._key_for(algorithm)
            claims = jwt.decode(
                token,
                key,
                algorithms=[str(algorithm)],
                options={"require": self._required},
                issuer=self.issuer,
                audience=self.audience,
            )
        except jwt.ExpiredSignatureError:
            raise Unauthorized("the token has expired") from None
        except jwt.PyJWTError:
            raise Unauthorized("the token is not valid") from None
        subject = claims["sub"]
        if not isinstance(subject, str) or not PLAYER_ID_PATTERN.fullmatch(subject):
            raise Unauthorized("the token names no player")
        viewer = Viewer(player_id=subject)
        if len(self._known) >= KNOWN_TOKENS:
            self._known.clear()
        self._known[token] = (viewer, float(claims["exp"]))
        return viewer

    def staff(self, key: str | None) -> Viewer:
        """The staff member a key belongs to; raises :class:`Unauthorized` otherwise."""
        found = self.staff_key(key)
        return Viewer(role=found.role, staff_name=found.name, grants=self.grants[found.role])

    def staff_key(self, key: str | None) -> StaffKey:
        """The configured key ``key`` is; raises :class:`Unauthorized` otherwise."""
        if not key or len(key) > MAX_KEY_CHARS:
            raise Unauthorized("a staff key is required")
        digest = hashlib.sha256(key.encode()).digest()
        found = None
        for staff in self.staff_keys:  # every key compared: the time says nothing
            if hmac.compare_digest(staff.sha256, digest):
                found = staff
        if found is None:
            raise Unauthorized("unknown staff key")
        return found

    @property
    def grants(self) -> dict[str, frozenset[Grant]]:
        """Each staff role's grants."""
        return self.roles or DEFAULT_ROLES

    @property
    def _required(self) -> list[str]:
        claims = ["exp", "sub"]
        if self.issuer is not None:
            claims.append("iss")
        if self.audience is not None:
            claims.append("aud")
        return claims

    def _key_for(self, algorithm: object) -> Any:
        if algorithm == "HS256" and self.token_secret is not None:
            return self.token_secret
        if algorithm in ASYMMETRIC and self.public_key is not None:
            return self.public_key
        raise jwt.InvalidAlgorithmError(f"algorithm {algorithm!r} is not accepted")


def player_token(
    secret: bytes,
    player_id: str,
    seconds: int,
    *,
    issuer: str | None = None,
    audience: str | None = None,
    now: float | None = None,
) -> str:
    """A player's HS256 token, valid ``seconds`` from ``now``, carrying ``iss`` and ``aud``
    when given: what the operator's game server signs, for an :class:`Authenticator` with
    the same secret, issuer and audience."""
    Authenticator(secret)  # the same checks on the secret as when verifying
    if not PLAYER_ID_PATTERN.fullmatch(player_id):
        raise ValueError(f"not a player id: {player_id!r}")
    claims: dict[str, Any] = {"sub": player_id, "exp": int(time.time() if now is None else now)}
    claims["exp"] += seconds
    if issuer is not None:
        claims["iss"] = issuer
    if audience is not None:
        claims["aud"] = audience
    return jwt.encode(claims, secret, algorithm="HS256")


def load_authenticator(
    secret: str | None,
    public_key: str | None,
    staff_keys: str | None,
    issuer: str | None = None,
    audience: str | None = None,
) -> Authenticator:
    """An authenticator from the settings' values (``None`` when unset)."""
    if not secret and not public_key:
        raise AuthConfigError(
            "set CROUPIER_PLAYER_TOKEN_SECRET (at least 32 bytes) or "
            "CROUPIER_PLAYER_TOKEN_PUBLIC_KEY so that players can sign in"
        )
    pem = load_pem(public_key, "CROUPIER_PLAYER_TOKEN_PUBLIC_KEY") if public_key else None
    keys, roles = parse_staff_keys(staff_keys) if staff_keys else ((), None)
    return Authenticator(
        secret.encode() if secret else None, pem, keys, roles, issuer or None, audience or None
    )


def load_pem(setting: str, name: str) -> str:
    """A PEM public key given as text or as a file (``name``: the setting, for errors)."""
    pem = _text_or_file(setting, name)
    if "BEGIN PUBLIC KEY" not in pem:
        raise AuthConfigError(f"{name} must be a PEM public key")
    return pem


def parse_staff_keys(setting: str) -> tuple[tuple[StaffKey, ...], dict[str, frozenset[Grant]]]:
    """Keys and roles from JSON text or a JSON file (see the module docstring)."""
    text = _text_or_file(setting, "CROUPIER_STAFF_KEYS")
    try:
        document = json.loads(text)
        roles = {
            str(name): frozenset(Grant(g) for g in grants)
            for name, grants in document.get("roles", DEFAULT_ROLES).items()
        }
        keys = tuple(
            StaffKey(str(k["name"]), str(k["role"]), bytes.fromhex(k["sha256"]))
            for k in document["keys"]
        )
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise AuthConfigError(
            f"CROUPIER_STAFF_KEYS is not a valid staff key document ({error}); expected "
            '{"roles": {...}, "keys": [{"name": ..., "role": ..., "sha256": ...}]}'
        ) from None
    if any(len(k.sha256) != 32 for k in keys):
        raise AuthConfigError("CROUPIER_STAFF_KEYS: every sha256 is 64 hex digits")
    return keys, roles


def key_digest(key: str) -> str:
    """The SHA-256 hex digest to configure for a staff key."""
    return hashlib.sha256(key.encode()).hexdigest()


def _text_or_file(value: str, name: str) -> str:
    if value.lstrip().startswith(("{", "-----BEGIN")):
        return value
    try:
        return Path(value).read_text()
    except OSError as error:
        raise AuthConfigError(f"{name}: cannot read {value!r} ({error.strerror})") from None
