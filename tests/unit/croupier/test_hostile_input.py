"""Hostile feed lines through the settler and ``croupier replay``: each one a rejection with a
code, kept in the ledger; the valid round around them settles; the command exits 0.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from croupier_feeds import RoundFeed, line

from croupier.bus import KEPT_BYTES
from croupier.cli import main
from croupier.ledger import Ledger, open_ledger
from croupier.settlement.settler import REJECTIONS_STREAM, Inbound, Settler

HOSTILE = {
    b'{"a":' * 100_000: "too_large",
    b'{"a":' * 3_000: "not_json",
    b"[" * 5_000 + b"]" * 5_000: "not_json",
    b"\xff\xfe\x00": "not_json",
}


@pytest.fixture
async def ledger(tmp_path: Path) -> AsyncIterator[Ledger]:
    async with open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as opened:
        await opened.migrate()
        yield opened


def valid_round() -> list[bytes]:
    f = RoundFeed(table_id="t-hostile")
    events = [
        f.opened(),
        f.bet("a1"),
        f.hole("As Ad"),
        f.cards("dealer", "9c 9d"),
        f.cards("board", "Ah 7c 2d"),
        f.decide("a1", "flop", "call", "c1", 200),
        f.cards("board", "Ks 4h"),
        f.completed(),
    ]
    bad_player = f.make("bet.placed", {}, seq=99)
    bad_player["payload"] = {
        "bet_id": "x1",
        "player_id": "p" * 300,
        "box": "\u0000",
        "spot": "ante",
        "amount": 100,
        "currency": "EUR",
    }
    return [line(e).encode() for e in events] + [line(bad_player).encode()]


async def test_the_settler_rejects_hostile_bodies_in_one_batch(ledger: Ledger) -> None:
    good = valid_round()
    bodies = [good[0], *HOSTILE, *good[1:]]

    report = await Settler(ledger).handle([Inbound(b, n) for n, b in enumerate(bodies, 1)])

    codes = {h.ref: h.code for h in report.handled if h.verdict == "rejected"}
    assert codes == {2: "too_large", 3: "not_json", 4: "not_json", 5: "not_json", 13: "contract"}
    assert len(report.closed) == 1
    kept = await ledger.read_stream(REJECTIONS_STREAM)
    assert [r.data["code"] for r in kept] == [*HOSTILE.values(), "contract"]
    oversized = kept[0].data
    assert (oversized["size"], oversized["raw"]) == (500_000, bodies[1][:KEPT_BYTES].decode())


def test_replay_rejects_hostile_lines_and_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = valid_round()
    feed = tmp_path / "feed.jsonl"
    feed.write_bytes(b"\n".join([good[0], *HOSTILE, *good[1:]]) + b"\n")
    out, rejected = tmp_path / "out.jsonl", tmp_path / "rejected.jsonl"
    ledger = f"sqlite:///{tmp_path / 'ledger.db'}"

    status = main(
        ["replay", str(feed), "--out", str(out), "--rejections", str(rejected), "--ledger", ledger]
    )

    assert status == 0
    assert "rounds settled              1" in capsys.readouterr().out
    rejections = [json.loads(text) for text in rejected.read_text().splitlines()]
    assert [(r["line"], r["code"]) for r in rejections] == [
        (2, "too_large"),
        (3, "not_json"),
        (4, "not_json"),
        (5, "not_json"),
        (13, "contract"),
    ]
    assert len(out.read_text().splitlines()) == 1
