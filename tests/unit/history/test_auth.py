"""Player tokens and staff keys, verified by PyJWT and hashed keys."""

from __future__ import annotations

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

from croupier.cli import main
from croupier.history.auth import (
    AuthConfigError,
    Unauthorized,
    key_digest,
    load_authenticator,
    parse_staff_keys,
)
from croupier.history.viewer import Grant

SECRET = "s" * 40


def token(claims: dict[str, object], key: object = SECRET, algorithm: str = "HS256") -> str:
    return jwt.encode(claims, key, algorithm=algorithm)  # type: ignore[arg-type]


def soon() -> int:
    return int(time.time()) + 60


def test_a_signed_unexpired_token_names_its_player() -> None:
    auth = load_authenticator(SECRET, None, None)
    assert auth.player(token({"sub": "p-7", "exp": soon()})).player_id == "p-7"


@pytest.mark.parametrize(
    ("claims", "message"),
    [
        ({"sub": "p1", "exp": int(time.time()) - 1}, "expired"),
        ({"sub": "p1"}, "not valid"),
        ({"exp": 2**40}, "not valid"),
        ({"sub": "", "exp": 2**40}, "names no player"),
        ({"sub": 42, "exp": 2**40}, "not valid"),
    ],
)
def test_tokens_without_a_player_or_a_future_expiry_are_refused(
    claims: dict[str, object], message: str
) -> None:
    auth = load_authenticator(SECRET, None, None)
    with pytest.raises(Unauthorized, match=message):
        auth.player(token(claims))


def test_forged_unsigned_and_oversized_tokens_are_refused() -> None:
    auth = load_authenticator(SECRET, None, None)
    forged = token({"sub": "p1", "exp": soon()}, key="t" * 40)
    unsigned = jwt.encode({"sub": "p1", "exp": soon()}, None, algorithm="none")
    for bad in (forged, unsigned, "x.y.z", "", None, "a" * 5000):
        with pytest.raises(Unauthorized):
            auth.player(bad)


def test_a_short_hs256_secret_is_a_configuration_error() -> None:
    with pytest.raises(AuthConfigError, match="at least 32 bytes"):
        load_authenticator("short", None, None)
    with pytest.raises(AuthConfigError, match="CROUPIER_PLAYER_TOKEN_SECRET"):
        load_authenticator(None, None, None)


def test_an_operator_public_key_verifies_its_tokens_and_is_never_an_hmac_secret() -> None:
    private = Ed25519PrivateKey.generate()
    pem = (
        private.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    auth = load_authenticator(None, pem, None)
    signed = token({"sub": "p9", "exp": soon()}, private, "EdDSA")
    assert auth.player(signed).player_id == "p9"
    # A token MACed with the public key text (algorithm confusion) is refused.
    header = jwt.utils.base64url_encode(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = jwt.utils.base64url_encode(json.dumps({"sub": "p9", "exp": soon()}).encode())
    mac = hmac.new(pem.encode(), header + b"." + body, hashlib.sha256).digest()
    with pytest.raises(Unauthorized):
        auth.player(b".".join([header, body, jwt.utils.base64url_encode(mac)]).decode())


def test_staff_keys_map_to_their_roles_grants() -> None:
    document = json.dumps(
        {
            "roles": {"support": [], "compliance": ["rejections", "hashes"]},
            "keys": [
                {"name": "desk", "role": "support", "sha256": key_digest("k-support")},
                {"name": "audit", "role": "compliance", "sha256": key_digest("k-audit")},
            ],
        }
    )
    auth = load_authenticator(SECRET, None, document)
    support, audit = auth.staff("k-support"), auth.staff("k-audit")
    assert (support.role, support.grants) == ("support", frozenset())
    assert audit.grants == {Grant.REJECTIONS, Grant.HASHES}
    assert audit.staff_name == "audit" and audit.is_staff and not support.player_id
    for bad in ("k-other", "", None, "k" * 300):
        with pytest.raises(Unauthorized):
            auth.staff(bad)


def test_a_staff_key_document_with_an_unknown_role_or_grant_is_refused() -> None:
    unknown_role = {"keys": [{"name": "x", "role": "cashier", "sha256": key_digest("k")}]}
    with pytest.raises(AuthConfigError, match="cashier"):
        load_authenticator(SECRET, None, json.dumps(unknown_role))
    with pytest.raises(AuthConfigError, match="CROUPIER_STAFF_KEYS"):
        parse_staff_keys(json.dumps({"roles": {"support": ["everything"]}, "keys": []}))
    with pytest.raises(AuthConfigError, match="cannot read"):
        parse_staff_keys("/nonexistent/staff.json")


def test_croupier_web_without_a_way_to_check_tokens_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("CROUPIER_PLAYER_TOKEN_SECRET", "CROUPIER_PLAYER_TOKEN_PUBLIC_KEY"):
        monkeypatch.delenv(name, raising=False)
    assert main(["web"]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and error[0].startswith("croupier web: set CROUPIER_PLAYER_TOKEN_SECRET")
    monkeypatch.setenv("CROUPIER_PLAYER_TOKEN_SECRET", "short")
    assert main(["web"]) == 2
    assert "at least 32 bytes" in capsys.readouterr().err


def test_a_token_seen_before_is_admitted_until_its_expiry_and_not_after() -> None:
    now = [time.time()]
    auth = dataclasses.replace(load_authenticator(SECRET, None, None), clock=lambda: now[0])
    signed = token({"sub": "p-7", "exp": int(now[0]) + 60})
    assert auth.player(signed).player_id == "p-7"
    assert auth.player(signed).player_id == "p-7"  # remembered
    tampered = signed[:-2] + ("A" if signed[-2] != "A" else "B") + signed[-1]
    with pytest.raises(Unauthorized):
        auth.player(tampered)  # another text: checked, and refused
    now[0] += 61
    with pytest.raises(Unauthorized, match="expired"):
        auth.player(signed)
    with pytest.raises(Unauthorized):
        auth.player(signed)


@pytest.mark.parametrize("subject", ["p1\n", "p1\r\n", "\np1", "p\x001", "p1\x7f", "x" * 129])
def test_a_subject_with_a_control_character_or_too_long_names_no_player(subject: str) -> None:
    auth = load_authenticator(SECRET, None, None)
    with pytest.raises(Unauthorized, match="names no player"):
        auth.player(token({"sub": subject, "exp": soon()}))


ISSUER = "https://games.casino.example"
AUDIENCE = "croupier-history"


@pytest.mark.parametrize(
    "claims",
    [
        {},  # a token for another purpose, made with the same secret
        {"iss": ISSUER},
        {"aud": AUDIENCE},
        {"iss": "https://other.example", "aud": AUDIENCE},
        {"iss": ISSUER, "aud": "wallet"},
        {"iss": ISSUER, "aud": ["wallet", "bonus"]},
    ],
)
def test_with_issuer_and_audience_configured_a_token_must_carry_both(
    claims: dict[str, object],
) -> None:
    auth = load_authenticator(SECRET, None, None, ISSUER, AUDIENCE)
    with pytest.raises(Unauthorized, match="not valid"):
        auth.player(token({"sub": "p1", "exp": soon(), **claims}))


def test_a_token_for_this_issuer_and_audience_is_admitted() -> None:
    auth = load_authenticator(SECRET, None, None, ISSUER, AUDIENCE)
    claims = {"sub": "p1", "exp": soon(), "iss": ISSUER}
    assert auth.player(token({**claims, "aud": AUDIENCE})).player_id == "p1"
    assert auth.player(token({**claims, "aud": [AUDIENCE, "x"]})).player_id == "p1"


def test_only_the_issuer_can_be_required() -> None:
    auth = load_authenticator(SECRET, None, None, ISSUER, None)
    assert auth.player(token({"sub": "p1", "exp": soon(), "iss": ISSUER})).player_id == "p1"
    with pytest.raises(Unauthorized):
        auth.player(token({"sub": "p1", "exp": soon()}))


def test_the_issuer_and_audience_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from croupier.cli.commands.web import authenticator
    from croupier.config import load_settings

    monkeypatch.setenv("CROUPIER_PLAYER_TOKEN_SECRET", SECRET)
    monkeypatch.setenv("CROUPIER_WEB_TOKEN_ISSUER", ISSUER)
    monkeypatch.setenv("CROUPIER_WEB_TOKEN_AUDIENCE", AUDIENCE)
    auth = authenticator(load_settings())
    assert (auth.issuer, auth.audience) == (ISSUER, AUDIENCE)
    with pytest.raises(Unauthorized):
        auth.player(token({"sub": "p1", "exp": soon()}))
