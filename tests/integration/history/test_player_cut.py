"""A player's cut of a shared hand tells nothing of the other players, counts and times
included: p1's recall and history row are the same whether others bet, called and were
refused beside them, or other tables' events filled those places in the ledger."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
from croupier_feeds import CH_CLASSIC, RoundFeed, line
from history_rounds import TABLE_CH
from integration.conftest import scratch_database

from croupier.history.recall import facts_digest
from croupier.history.store import HistoryStore, open_store
from croupier.ledger import open_ledger
from croupier.projection import open_store as read_models_of
from croupier.projection.projector import Projector
from croupier.projection.registry import load_projections
from croupier.settlement.settler import Inbound, Settler

pytestmark = pytest.mark.integration

ROUND = "r-crowd"
Event = dict[str, Any]
OTHERS = None  # a place where the others act (or another table's event takes the place)
#: The shared hand, as p1 sees it happen; None: another player's turn.
SCRIPT: list[Callable[[RoundFeed], Event] | None] = [
    lambda f: f.opened(CH_CLASSIC),
    OTHERS,
    lambda f: f.bet("a1", "ante", 100, player="p1"),
    OTHERS,
    OTHERS,
    lambda f: f.bet("b1", "aa_bonus", 100, player="p1"),
    lambda f: f.hole("Qh Th"),
    lambda f: f.cards("dealer", "As Kd"),
    lambda f: f.cards("board", "2h 7h 9h"),
    OTHERS,
    OTHERS,
    lambda f: f.decide("a1", "flop", "call", "c1", 200),
    OTHERS,
    OTHERS,
    lambda f: f.cards("board", "Kc 3d"),
    OTHERS,
    lambda f: f.completed(),
]
CROWD: list[Callable[[RoundFeed], Event]] = [
    lambda f: f.bet("a2", "ante", 200, player="p2"),
    lambda f: f.bet("a3", "ante", 100, player="p3"),
    lambda f: f.bet("j3", "aa_bonus", 100, player="p3"),
    lambda f: f.decide("a2", "flop", "call", "c2", 300),  # the wrong size: refused
    lambda f: f.decide("a2", "flop", "fold"),
    lambda f: f.decide("a3", "flop", "call", "c3", 200),
    lambda f: f.decide("a3", "flop", "call", "c3", 200),  # again: refused, a duplicate
    lambda f: f.bet("late", "ante", 100, player="p4"),  # after the flop: refused
]


def feed(crowded: bool) -> list[Event]:
    """The events in the order the ledger records them."""
    main, filler = RoundFeed(TABLE_CH, ROUND), RoundFeed("other-table", "r-filler")
    others = iter(CROWD)
    recorded = [filler.opened(CH_CLASSIC)]
    for index, step in enumerate(SCRIPT):
        if step is not None:
            recorded.append(step(main))
        elif crowded:
            recorded.append(next(others)(main))
        else:
            recorded.append(filler.bet(f"x{index}", "ante", 100, player=f"x{index}"))
    return recorded


@pytest.fixture(params=["postgres", "sqlite"])
async def ledger_urls(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[str, str]]:
    """Two empty ledgers on the same database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'crowded.sqlite'}", f"sqlite:///{tmp_path / 'alone.sqlite'}"
        return
    async with scratch_database() as crowded, scratch_database() as alone:
        yield crowded, alone


async def settle_and_project(url: str, events: list[Event]) -> None:
    """Each event its own batch, so each takes the next position; then the read models."""
    async with open_ledger(url) as ledger:
        await ledger.migrate()
        settler = Settler(ledger)
        for event in events:
            await settler.handle([Inbound(line(event).encode(), 0)])
        projector = Projector(ledger, read_models_of(ledger), load_projections(["rounds"]))
        await projector.setup()
        await projector.catch_up()


async def p1_sees(store: HistoryStore) -> tuple[dict[str, Any], dict[str, Any]]:
    """p1's recall of the round and their history row, as stored for the API."""
    document = await store.player_recall(TABLE_CH, ROUND, "p1")
    assert document is not None
    rows = await store.player_rounds("p1", 10, None)
    assert len(rows) == 1
    return json.loads(document), json.loads(rows[0].document)


def without_chain_hashes(recalled: dict[str, Any]) -> dict[str, Any]:
    """The recall less what the chain's content decides (the settlement's hash and the
    digest of the facts): everything else must not depend on the others."""
    verification = {
        k: v
        for k, v in recalled["verification"].items()
        if k not in ("head_hash", "facts_sha256", "how")
    }
    return {**recalled, "verification": verification}


async def test_p1s_cut_is_the_same_whatever_the_others_did(ledger_urls: tuple[str, str]) -> None:
    crowded_url, alone_url = ledger_urls
    await settle_and_project(crowded_url, feed(crowded=True))
    await settle_and_project(alone_url, feed(crowded=False))
    async with AsyncExitStack() as stack:
        crowded_store, alone_store = open_store(crowded_url), open_store(alone_url)
        stack.push_async_callback(crowded_store.close)
        stack.push_async_callback(alone_store.close)
        crowded, crowded_row = await p1_sees(crowded_store)
        alone, alone_row = await p1_sees(alone_store)
        staff = await crowded_store.round_facts(TABLE_CH, ROUND)

    assert len(staff) == 1 + 4 + len(CROWD) + 1 + 3  # the others' facts are in the ledger
    assert crowded_row == alone_row
    assert without_chain_hashes(crowded) == without_chain_hashes(alone)
    assert {r["bet_id"] for r in crowded["results"]} == {"a1", "b1", "c1"}
    for entry in crowded["timeline"]:
        assert entry["position"] is entry["version"] is entry["seq"] is None
        assert entry["recorded_at"] is None and entry["hash"] is None
        assert entry["fact"] != "feed.rejected"
    verification = crowded["verification"]
    assert verification["positions"] == [] and verification["hashes"] == []
    settlement = staff[-1]
    assert (verification["head_position"], verification["head_hash"]) == (
        settlement.position,
        settlement.hash,
    )
    # support recomputes the digest from the ledger's facts of the round, up to its close
    assert verification["facts_sha256"] == facts_digest(
        [f.position for f in staff], [f.hash for f in staff]
    )
    assert f"this reference: {settlement.position}:{settlement.hash}." in verification["how"]
