"""Every player's cut of a round, made from one index of it, is what the rule says they see."""

from __future__ import annotations

from typing import Any

from history_rounds import boxes_round, jackpot_round, settle, shared_round, voided_round
from projection_suite import settle as settle_feed
from projection_suite import studio_feed

from croupier.history.models import RoundRecall
from croupier.history.recall import (
    for_viewer,
    participants,
    recall,
)
from croupier.history.viewer import Viewer
from croupier.ledger import Ledger, open_ledger
from croupier.settlement.round import ACCEPTED, SETTLED, VOIDED


def seen(round_: RoundRecall) -> dict[str, Any]:
    """What a cut selects of the round (not how each entry is shown)."""
    return {
        "wagers": [w.bet_id for w in round_.wagers],
        "decisions": [(d.ante_bet_id, d.stage, d.action) for d in round_.decisions],
        "results": [r.bet_id for r in round_.results],
        "totals": [(t.player_id, t.currency) for t in round_.totals],
        "boxes": [b.box for b in round_.cards.boxes],
        "timeline": [(t.fact, t.event_type, t.occurred_at, t.summary) for t in round_.timeline],
        "jackpot": round_.jackpot,
        "postings": round_.postings,
    }


def by_the_rule(round_: RoundRecall, me: str) -> dict[str, Any]:
    """A player's cut straight from the rule, item by item over the whole round."""
    mine = {w.bet_id for w in round_.wagers if w.player_id == me}
    antes = {w.bet_id for w in round_.wagers if w.player_id == me and w.spot == "ante"}
    boxes = {w.box for w in round_.wagers if w.player_id == me}
    return {
        "wagers": [w.bet_id for w in round_.wagers if w.bet_id in mine],
        "decisions": [
            (d.ante_bet_id, d.stage, d.action) for d in round_.decisions if d.ante_bet_id in antes
        ],
        "results": [r.bet_id for r in round_.results if r.bet_id in mine],
        "totals": [(t.player_id, t.currency) for t in round_.totals if t.player_id == me],
        "boxes": [b.box for b in round_.cards.boxes if b.box in boxes],
        "timeline": [
            (t.fact, t.event_type, t.occurred_at, t.summary)
            for t in round_.timeline
            if t.fact in (ACCEPTED, SETTLED, VOIDED)
            and t.player_id in (None, me)
            and (t.box is None or t.box in boxes)
            and (t.bet_id is None or t.bet_id in mine)
        ],
        "jackpot": [],
        "postings": [],
    }


async def rounds_of(ledger: Ledger) -> list[RoundRecall]:
    streams: dict[str, list[Any]] = {}
    after = 0
    while page := await ledger.read_all(after, 1000):
        for fact in page:
            if fact.stream.startswith("round:"):
                streams.setdefault(fact.stream, []).append(fact)
        after = page[-1].position
    found = []
    for stream, facts in streams.items():
        _, table_id, round_id = stream.split(":", 2)
        whole = recall(table_id, round_id, facts)
        assert whole is not None
        found.append(whole)
    return found


async def test_each_cut_is_the_rule_applied_to_the_whole_round() -> None:
    async with open_ledger("sqlite:///:memory:") as ledger:
        await ledger.migrate()
        await settle(ledger, [shared_round(), boxes_round(), jackpot_round(), voided_round()])
        await settle_feed(ledger, studio_feed(rounds=40, seed=11))
        rounds = await rounds_of(ledger)
    assert len(rounds) > 40
    checked = 0
    for whole in rounds:
        for player_id in sorted(participants(whole)):
            cut = for_viewer(whole, Viewer(player_id=player_id))
            assert cut is not None
            assert seen(cut) == by_the_rule(whole, player_id)
            checked += 1
    assert checked > 200
