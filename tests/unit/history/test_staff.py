"""Staff sessions and the sign-in limits: signed cookies, key rotation, SSO, token buckets."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import json
import time
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from croupier.history.auth import Authenticator, StaffKey, Unauthorized, key_digest
from croupier.history.staff import SignInLimiter, StaffSignIn
from croupier.history.viewer import Grant

KEY = "desk-key-0123456789"
ROLES = {"support": frozenset[Grant](), "compliance": frozenset(Grant)}


def auth(key: str = KEY, role: str = "support") -> Authenticator:
    staff = (StaffKey("desk-1", role, bytes.fromhex(key_digest(key))),)
    return Authenticator(b"k" * 32, staff_keys=staff, roles=ROLES)


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_a_key_signs_in_for_a_session_that_names_its_holder_and_role() -> None:
    sign_in = StaffSignIn(auth())
    viewer, session = sign_in.with_key(KEY)
    assert (viewer.staff_name, viewer.role) == ("desk-1", "support")
    assert sign_in.viewer(session) == viewer
    assert KEY not in session and key_digest(KEY) not in session


def test_a_wrong_key_signs_nobody_in() -> None:
    with pytest.raises(Unauthorized):
        StaffSignIn(auth()).with_key("guess")


def test_a_session_signed_with_another_secret_or_edited_is_refused() -> None:
    sign_in = StaffSignIn(auth())
    _, session = sign_in.with_key(KEY)
    body, _, mac = session.partition(".")
    forged = StaffSignIn(auth(), secret=b"x" * 32).with_key(KEY)[1]
    edited = body[:-2] + ("AA" if body[-2:] != "AA" else "BB") + "." + mac
    for cookie in (forged, edited, body, "." + mac, "", "x" * 2000, "%%%.!!!"):
        with pytest.raises(Unauthorized):
            sign_in.viewer(cookie)


def test_a_session_ends_at_its_expiry() -> None:
    clock = Clock()
    sign_in = StaffSignIn(auth(), clock=clock, lifetime=60)
    _, session = sign_in.with_key(KEY)
    clock.now += 59
    assert sign_in.viewer(session).staff_name == "desk-1"
    clock.now += 1
    with pytest.raises(Unauthorized, match="ended"):
        sign_in.viewer(session)


def test_a_changed_key_or_role_ends_the_holders_sessions() -> None:
    secret = b"s" * 32
    _, session = StaffSignIn(auth(), secret=secret).with_key(KEY)
    for changed in (auth(key="a new key 0123456789"), auth(role="compliance")):
        with pytest.raises(Unauthorized, match="changed"):
            StaffSignIn(changed, secret=secret).viewer(session)
    assert StaffSignIn(auth(), secret=secret).viewer(session).role == "support"


def test_the_session_secret_is_at_least_32_bytes() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        StaffSignIn(auth(), secret=b"short")


def sso_keys() -> tuple[Ed25519PrivateKey, str]:
    private = Ed25519PrivateKey.generate()
    public = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private, public.decode()


def test_an_sso_token_with_a_configured_role_signs_in() -> None:
    private, public = sso_keys()
    sign_in = StaffSignIn(auth(), sso_public_key=public, sso_audience="croupier-staff")
    claims = {"sub": "ana", "role": "compliance", "aud": "croupier-staff"}
    token = jwt.encode({**claims, "exp": int(time.time()) + 60}, private, algorithm="EdDSA")
    viewer, session = sign_in.with_sso(token)
    assert (viewer.staff_name, viewer.role) == ("ana", "compliance")
    assert viewer.grants == frozenset(Grant)
    assert sign_in.viewer(session) == viewer


@pytest.mark.parametrize(
    "change",
    [
        {"role": "admin"},  # no such role
        {"role": ["support"]},
        {"sub": {"name": "ana"}},
        {"aud": "wallet"},
        {"aud": None},
        {"sub": "ana\n"},
        {"exp": int(time.time()) - 1},
        {"signed_by": "another key"},
        {"alg": "HS256"},  # the public key used as an HMAC secret
    ],
)
def test_sso_tokens_that_are_not_the_operators_for_this_service_are_refused(
    change: dict[str, object],
) -> None:
    private, public = sso_keys()
    sign_in = StaffSignIn(auth(), sso_public_key=public)
    claims: dict[str, object] = {
        "sub": "ana",
        "role": "support",
        "aud": "croupier-staff",
        "exp": int(time.time()) + 60,
    }
    claims.update({k: v for k, v in change.items() if k not in ("signed_by", "alg")})
    claims = {k: v for k, v in claims.items() if v is not None}
    if "alg" in change:
        token = hs256_by_hand(claims, public.encode())
    else:
        key = Ed25519PrivateKey.generate() if "signed_by" in change else private
        token = jwt.encode(claims, key, algorithm="EdDSA")
    with pytest.raises(Unauthorized):
        sign_in.with_sso(token)


def hs256_by_hand(claims: dict[str, object], secret: bytes) -> str:
    """A token HMAC-signed with ``secret`` (PyJWT itself refuses a PEM key as the secret)."""

    def part(raw: bytes) -> str:
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    head = part(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = part(json.dumps(claims).encode())
    mac = hmac.new(secret, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{part(mac)}"


def test_without_sso_configured_a_token_signs_nobody_in() -> None:
    with pytest.raises(Unauthorized, match="not configured"):
        StaffSignIn(auth()).with_sso("a.b.c")


def test_the_limiter_allows_a_burst_per_address_then_refills_over_the_window() -> None:
    clock = Clock()
    limiter = SignInLimiter(per_address=3, overall=100, window=60, clock=clock)
    assert [limiter.attempt("10.0.0.1") for _ in range(3)] == [0, 0, 0]
    wait = limiter.attempt("10.0.0.1")
    assert wait == pytest.approx(20)  # one attempt back every 60/3 s
    assert limiter.attempt("10.0.0.2") == 0  # another address has its own allowance
    clock.now += 20
    assert limiter.attempt("10.0.0.1") == 0
    assert limiter.attempt("10.0.0.1") > 0


def test_the_overall_limit_holds_across_addresses() -> None:
    clock = Clock()
    limiter = SignInLimiter(per_address=5, overall=10, window=60, clock=clock)
    allowed = sum(limiter.attempt(f"10.0.{i}.1") == 0 for i in range(50))
    assert allowed == 10


def test_the_limiter_remembers_a_bounded_number_of_addresses() -> None:
    limiter = SignInLimiter(per_address=1, overall=10**9, tracked=100, clock=Clock())
    for i in range(10_000):
        limiter.attempt(f"2001:db8::{i:x}")
    assert len(limiter._addresses) == 100
    assert limiter.attempt("2001:db8::270f") > 0  # the most recent are the ones kept


def test_a_refused_attempt_takes_nothing_from_the_allowance() -> None:
    clock = Clock()
    limiter = SignInLimiter(per_address=1, overall=2, window=60, clock=clock)
    assert limiter.attempt("a") == 0
    for _ in range(100):
        assert limiter.attempt("a") > 0
    assert limiter.attempt("b") == 0  # "a" being refused did not spend the overall bucket


def test_sessions_survive_a_restart_only_with_the_configured_secret() -> None:
    secret = b"c" * 32
    _, session = StaffSignIn(auth(), secret=secret).with_key(KEY)
    assert StaffSignIn(auth(), secret=secret).viewer(session).staff_name == "desk-1"
    with pytest.raises(Unauthorized):
        StaffSignIn(auth()).viewer(session)  # a secret made at start
    assert dataclasses.replace(StaffSignIn(auth(), secret=secret)).viewer(session)


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("CROUPIER_WEB_SESSION_SECRET", "short", "CROUPIER_WEB_SESSION_SECRET must be at least"),
        ("CROUPIER_STAFF_SSO_PUBLIC_KEY", "{not a key", "CROUPIER_STAFF_SSO_PUBLIC_KEY must be"),
        ("CROUPIER_STAFF_SSO_PUBLIC_KEY", "/no/such/file.pem", "cannot read"),
    ],
)
def test_unusable_sign_in_settings_stop_the_command(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, message: str
) -> None:
    from croupier.cli.commands.web import access
    from croupier.config import load_settings
    from croupier.errors import CommandError

    monkeypatch.setenv("CROUPIER_PLAYER_TOKEN_SECRET", "p" * 40)
    monkeypatch.setenv(variable, value)
    with pytest.raises(CommandError, match=message):
        access(load_settings())


def test_the_sign_in_settings_make_the_services_access(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from croupier.cli.commands.web import access
    from croupier.config import load_settings

    _, public = sso_keys()
    (tmp_path / "sso.pem").write_text(public)
    monkeypatch.setenv("CROUPIER_PLAYER_TOKEN_SECRET", "p" * 40)
    monkeypatch.setenv("CROUPIER_WEB_SESSION_SECRET", "s" * 32)
    monkeypatch.setenv("CROUPIER_STAFF_SSO_PUBLIC_KEY", str(tmp_path / "sso.pem"))
    monkeypatch.setenv("CROUPIER_STAFF_SSO_AUDIENCE", "ops")
    monkeypatch.setenv("CROUPIER_WEB_FRAME_ANCESTORS", "https://a.example https://b.example")
    chosen = access(load_settings())
    assert chosen.staff_sign_in.secret == b"s" * 32
    assert chosen.staff_sign_in.sso_public_key == public
    assert chosen.staff_sign_in.sso_audience == "ops"
    assert chosen.frame_ancestors == ("https://a.example", "https://b.example")
