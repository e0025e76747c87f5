"""``croupier token`` makes the token a player signs in with, from the configured secret:
the history service's own verification admits it, for that player, until ``--ttl`` ends."""

from __future__ import annotations

import time
from pathlib import Path

import jwt
import pytest

from croupier.history.auth import Authenticator, Unauthorized
from floor.cli import main

SECRET = "a-secret-of-at-least-thirty-two-bytes!"


@pytest.fixture(autouse=True)
def _scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no .env of the checkout
    for name in (
        "CROUPIER_PLAYER_TOKEN_SECRET",
        "CROUPIER_PLAYER_TOKEN_PUBLIC_KEY",
        "CROUPIER_WEB_TOKEN_ISSUER",
        "CROUPIER_WEB_TOKEN_AUDIENCE",
    ):
        monkeypatch.delenv(name, raising=False)


def token(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["token", *args]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert len(out.splitlines()) == 1
    return out.strip()


def expires(text: str) -> int:
    claims = jwt.decode(text, SECRET, algorithms=["HS256"], options={"verify_aud": False})
    return int(claims["exp"])


def test_the_token_signs_the_player_in(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CROUPIER_PLAYER_TOKEN_SECRET", SECRET)
    made = int(time.time())
    text = token(["--player", "table-7 player 12", "--ttl", "120"], capsys)

    assert Authenticator(SECRET.encode()).player(text).player_id == "table-7 player 12"
    assert made + 120 <= expires(text) <= time.time() + 120
    with pytest.raises(Unauthorized, match="not valid"):
        Authenticator(b"another secret, also thirty-two bytes").player(text)


def test_the_token_carries_the_issuer_and_audience_the_service_requires(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CROUPIER_PLAYER_TOKEN_SECRET", SECRET)
    monkeypatch.setenv("CROUPIER_WEB_TOKEN_ISSUER", "game-server")
    monkeypatch.setenv("CROUPIER_WEB_TOKEN_AUDIENCE", "croupier-history")
    text = token(["--player", "p1"], capsys)

    bound = Authenticator(SECRET.encode(), issuer="game-server", audience="croupier-history")
    assert bound.player(text).player_id == "p1"
    with pytest.raises(Unauthorized, match="not valid"):
        Authenticator(SECRET.encode(), issuer="game-server", audience="elsewhere").player(text)


def test_the_default_lifetime_is_an_hour(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CROUPIER_PLAYER_TOKEN_SECRET", SECRET)
    made = int(time.time())
    assert made + 3600 <= expires(token(["--player", "p1"], capsys)) <= time.time() + 3600


def test_the_token_is_refused_once_its_time_is_up(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CROUPIER_PLAYER_TOKEN_SECRET", SECRET)
    text = token(["--player", "p1", "--ttl", "1"], capsys)
    time.sleep(max(0.0, expires(text) - time.time()) + 0.1)
    with pytest.raises(Unauthorized, match="expired"):
        Authenticator(SECRET.encode()).player(text)


@pytest.mark.parametrize(
    ("env", "args", "message"),
    [
        ({}, ["--player", "p1"], "CROUPIER_PLAYER_TOKEN_SECRET is not set"),
        ({"CROUPIER_PLAYER_TOKEN_SECRET": "short"}, ["--player", "p1"], "at least 32 bytes"),
        ({"CROUPIER_PLAYER_TOKEN_SECRET": SECRET}, ["--player", "p1", "--ttl", "0"], "--ttl"),
        ({"CROUPIER_PLAYER_TOKEN_SECRET": SECRET}, ["--player", "x" * 129], "--player"),
        ({"CROUPIER_PLAYER_TOKEN_SECRET": SECRET}, [], "--player"),
    ],
)
def test_what_cannot_make_a_token_is_one_line_and_exit_2(
    env: dict[str, str],
    args: list[str],
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(["token", *args]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.splitlines()) == 1 and message in err, err
    assert err.startswith("croupier token:")
