"""``croupier replay --ledger postgresql://...`` against the real PostgreSQL.

The same feed replayed on PostgreSQL and on SQLite must write the same results (positions
included: both ledgers start empty and are gap-free) and the same rejections, and the
PostgreSQL ledger must hold every fact, the jackpot meter and the kept rejections.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from croupier_feeds import CH_CLASSIC, CH_PROGRESSIVE, THP, RoundFeed, line

from croupier.ledger import open_ledger
from croupier.settlement.meters import meter_stream
from croupier.settlement.settler import REJECTIONS_STREAM

pytestmark = pytest.mark.integration


def _feed() -> list[str]:
    """A few rounds of each kind: progressive meter, THP, a void, faults, out of order."""
    lines: list[str] = []
    for n in range(3):
        f = RoundFeed(table_id="chp-1", round_id=f"p{n}")
        hole, flop = ("As Ks", "Qs Js Ts") if n == 1 else ("2c 7d", "9h 4s Kd")
        lines += [
            line(e)
            for e in (
                f.opened(CH_PROGRESSIVE),
                f.bet("a1"),
                f.bet("j1", "jackpot"),
                f.bet("a2", amount=500, player="p2", currency="USD"),
                f.bet("j2", "jackpot", player="p2", currency="USD"),
                f.hole(hole),
                f.cards("dealer", "3h 3d"),
                f.cards("board", flop),
                f.decide("a1", "flop", "call", "c1", 200),
                f.cards("board", "8c 6h"),
                f.completed(),
            )
        ]
    f = RoundFeed(table_id="thp-1", round_id="t1")
    thp = [
        f.opened(THP),
        f.bet("a1", amount=1000),
        f.bet("s1", "plus", 200),
        f.hole("Ah Ad"),
        f.cards("dealer", "Kc Qc"),
        f.decide("a1", "preflop", "call", "c1", 2000),
        f.cards("board", "2s 7h 9d"),
        f.decide("a1", "flop", "bet", "fb1", 1000),
        f.cards("board", "Jc"),
        f.cards("board", "3d"),
        f.completed(),
    ]
    lines += [line(e) for e in [thp[1], thp[0], *thp[2:9], thp[10], thp[9]]]  # out of order
    f = RoundFeed(table_id="chc-1", round_id="v1")
    lines += [
        line(e) for e in (f.opened(CH_CLASSIC), f.bet("a1"), f.bet("a1", player="p2"), f.voided())
    ]
    lines += ["{not json", "{not json"]
    return lines


def _replay(feed: Path, out_dir: Path, ledger: str) -> tuple[list[Any], list[Any], str]:
    out_dir.mkdir()
    out, rejected = out_dir / "results.jsonl", out_dir / "rejections.jsonl"
    command = [sys.executable, "-m", "croupier.cli", "replay", str(feed)]
    command += ["--out", str(out), "--rejections", str(rejected), "--ledger", ledger]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(text) for text in out.read_text().splitlines()]
    rejections = [json.loads(text) for text in rejected.read_text().splitlines()]
    return rows, rejections, done.stdout


async def test_replay_on_postgres_writes_what_sqlite_writes(
    postgres_database: str, tmp_path: Path
) -> None:
    feed = tmp_path / "feed.jsonl"
    feed.write_text("".join(text + "\n" for text in _feed()))

    on_postgres = _replay(feed, tmp_path / "pg", postgres_database)
    on_sqlite = _replay(feed, tmp_path / "lite", f"sqlite:///{tmp_path / 'lite.db'}")

    results, rejections, printed = on_postgres
    assert results == on_sqlite[0]
    assert rejections == on_sqlite[1]
    assert printed == on_sqlite[2]
    assert [(r["round_id"], r["player_id"]) for r in results] == [
        ("p0", "p1"),
        ("p0", "p2"),
        ("p1", "p1"),
        ("p1", "p2"),
        ("p2", "p1"),
        ("p2", "p2"),
        ("t1", "p1"),
        ("v1", "p1"),
    ]
    assert [(r["line"], r["event_id"]) for r in rejections] == [
        (47, json.loads(_feed()[46])["event_id"]),  # bet id a1 used twice
        (49, None),
        (50, None),
    ]
    assert "rounds settled              4" in printed
    assert "rounds voided               1" in printed

    async with open_ledger(postgres_database) as ledger:
        assert (await ledger.verify()).ok
        moves = await ledger.read_stream(meter_stream("casino-holdem/progressive", "EUR"))
        assert [m.version for m in moves] == [1, 2, 3]
        assert moves[1].data["reseeded"] > 0  # the royal took the meter
        kept = await ledger.read_stream(REJECTIONS_STREAM)
        assert [r.data["raw"] for r in kept] == ["{not json"]
        position = await ledger.last_position()

    again = _replay(feed, tmp_path / "again", postgres_database)
    # Everything was settled before: the same results, read back, and nothing new written.
    assert sorted(again[0], key=lambda r: r["message_id"]) == sorted(
        results, key=lambda r: r["message_id"]
    )
    assert "closed by an earlier run (results read back): 5" in again[2]
    async with open_ledger(postgres_database) as ledger:
        assert await ledger.last_position() == position
