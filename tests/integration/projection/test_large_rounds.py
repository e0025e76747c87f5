"""Rounds of any size through ``croupier project``: nothing stops the projection.

A round of 150,000 bets (more rows than one commit may hold) is projected in pieces, whole
(on SQLite: the PostgreSQL ledger's append of its settlement, 75,000 outbox messages in one
transaction, outlasts the ledger's idle-in-transaction limit on a loaded host); a shared hand
of 10,000 players is projected on PostgreSQL in time linear in its facts.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import scratch_database
from croupier_feeds import CH_CLASSIC, RoundFeed, line

from croupier.ledger import Ledger, RecordedEvent, open_ledger
from croupier.projection.projector import changes_of
from croupier.projection.rounds import RoundsProjection
from croupier.projection.wagers import WagersProjection
from croupier.settlement.settler import Inbound, Settler

pytestmark = pytest.mark.integration

CLI = (sys.executable, "-m", "croupier.cli", "project")


def shared_hand(players: int, bonus: bool, round_id: str = "r-big") -> RoundFeed:
    """Casino Hold'em, one hand shared by ``players``: an ante each (and an AA Bonus when
    ``bonus``); every other player calls, the rest fold by not deciding."""
    feed = RoundFeed("ch-big", round_id)
    feed.opened(CH_CLASSIC)
    for p in range(players):
        feed.bet(f"a{p}", "ante", 100, player=f"p{p}")
        if bonus:
            feed.bet(f"b{p}", "aa_bonus", 100, player=f"p{p}")
    feed.cards("burn", "4c")
    feed.hole("Qh Th")
    feed.cards("dealer", "As Kd")
    feed.cards("board", "2h 7h 9h")
    for p in range(0, players, 2):
        feed.decide(f"a{p}", "flop", "call", f"c{p}", 200)
    feed.cards("board", "Kc 3d")
    feed.completed()
    return feed


async def settle(ledger: Ledger, feed: RoundFeed) -> None:
    settler = Settler(ledger)
    batch = [Inbound(line(e).encode(), i) for i, e in enumerate(feed.events)]
    for start in range(0, len(batch), 5000):
        await settler.handle(batch[start : start + 5000])


def project(url: str) -> tuple[str, float]:
    """``croupier project`` of the wagers and rounds read models: its output and seconds."""
    started = time.perf_counter()
    done = subprocess.run(
        [*CLI, "--ledger", url, "--only=wagers", "--only=rounds"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        timeout=900,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout, time.perf_counter() - started


@pytest.mark.long
async def test_a_round_of_150000_bets_is_projected_whole_in_pieces(tmp_path: Path) -> None:
    players = 75_000
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    async with open_ledger(url) as ledger:
        await ledger.migrate()
        await settle(ledger, shared_hand(players, bonus=True))
        head = await ledger.last_position()
        (settled,) = await ledger.read_all(head - 1, 1)
    assert len(settled.data["results"]) == 2 * players + players // 2

    output, seconds = project(url)
    assert f"read models at ledger position {head}" in output
    assert "written in pieces: 1 fact (wagers), 1 fact (rounds)" in output
    assert seconds < 600  # generous: a few tens of seconds on a loaded 2-core machine
    print(f"croupier project: {head:,} facts in {seconds:.1f} s")

    with sqlite3.connect(tmp_path / "ledger.db") as conn:
        counts = conn.execute(
            "SELECT (SELECT count(*) FROM history_recalls), "
            "(SELECT count(*) FROM history_player_rounds), "
            "(SELECT count(*) FROM wager_results), "
            "(SELECT count(*) FROM results), "
            "(SELECT sum(stake) FROM history_player_rounds), "
            "(SELECT count(*) FROM projection_checkpoints WHERE position = ? AND part = 0)",
            (head,),
        ).fetchone()
        (p7,) = conn.execute(
            "SELECT document FROM history_recalls WHERE player_id = 'p70000'"
        ).fetchone()
    assert counts == (
        players,  # recalls
        players,  # player rounds
        2 * players + players // 2,  # wager results
        players,  # results
        sum(line["stake"] for line in settled.data["results"]),
        2,  # both read models at the head, no fact part-written
    )
    assert '"player_id":"p70000"' in p7 and '"player_id":"p70001"' not in p7


async def _apply_seconds(ledger: Ledger) -> tuple[float, int]:
    """CPU seconds of both projections applying the whole ledger as one batch, and rows."""
    events: list[RecordedEvent] = await ledger.read_all(0, 1_000_000)
    started = time.process_time()
    rows = sum(changes_of(p, events).size for p in (WagersProjection(), RoundsProjection()))
    return time.process_time() - started, rows


async def _hand(url: str, players: int) -> tuple[float, int]:
    async with open_ledger(url) as ledger:
        await ledger.migrate()
        await settle(ledger, shared_hand(players, bonus=False, round_id=f"r-{players}"))
        return await _apply_seconds(ledger)


async def test_a_shared_hand_of_10000_players_costs_its_facts(postgres_database: str) -> None:
    async with scratch_database() as small:
        small_s, small_rows = await _hand(small, 1_000)
    large_s, large_rows = await _hand(postgres_database, 10_000)
    # Per player: wagers 1.5, wager results 1.5, results, player round, recall, decisions 0.5;
    # per round: its row and its hold.
    assert (small_rows, large_rows) == (6_502, 65_002)
    # Linear work is ten times the small hand's; players x facts would be a hundred times.
    assert large_s < 25 * max(small_s, 0.02), (small_s, large_s)
    assert large_s < 2.0, f"{large_s:.2f} CPU seconds to fold a 10,000-player hand"

    output, seconds = project(postgres_database)
    assert "read models at ledger position" in output and "pieces" not in output
    assert seconds < 60, f"croupier project took {seconds:.1f} s"  # generous: a loaded host
    print(
        f"fold CPU: 1,000 players {small_s:.2f} s, 10,000 {large_s:.2f} s; project {seconds:.1f} s"
    )
