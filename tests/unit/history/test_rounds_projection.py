"""The rounds projection is pure: the same ledger facts always give the same rows."""

from __future__ import annotations

import json

from history_rounds import boxes_round, settle, shared_round, voided_round

from croupier.history.models import PlayerRound, RoundRecall
from croupier.history.recall import for_viewer, participants, recall
from croupier.history.viewer import Viewer
from croupier.ledger import open_ledger
from croupier.projection import Changes, open_store
from croupier.projection.projector import Projector
from croupier.projection.rounds import DECISIONS, PLAYER_ROUNDS, ROUNDS, projection


async def test_closed_rounds_give_one_row_per_player_and_currency_and_decisions_by_ante() -> None:
    async with open_ledger("sqlite:///:memory:") as ledger:
        await ledger.migrate()
        await settle(ledger, [shared_round(), boxes_round(), voided_round()])
        events = await ledger.read_all(0, 10_000)
    changes, again = Changes(), Changes()
    projection().apply(events, changes)
    projection().apply(events, again)

    assert changes.inserts == again.inserts
    rounds = changes.inserts[ROUNDS.name]
    assert [(r["round_id"], r["status"], r["game"]) for r in rounds] == [
        ("r-shared", "settled", "casino_holdem"),
        ("r-boxes", "settled", "texas_holdem_plus"),
        ("r-void", "voided", "casino_holdem"),
    ]
    players = changes.inserts[PLAYER_ROUNDS.name]
    assert sorted((r["round_id"], r["player_id"], r["stake"], r["returned"]) for r in players) == [
        ("r-boxes", "p1", 700, 1300),
        ("r-boxes", "p3", 100, 0),
        ("r-shared", "p1", 400, 2800),
        ("r-shared", "p2", 200, 0),
        ("r-void", "p1", 300, 300),
    ]
    for row in players:
        wagers = json.loads(row["wagers"])
        assert {w["player_id"] for w in wagers} == {row["player_id"]}
        assert sum(w["stake"] for w in wagers) == row["stake"]
    decided = changes.inserts[DECISIONS.name]
    assert len(decided) == 2 + 5  # the rejected call is no decision
    assert all(d["position"] > 0 for d in decided)


async def test_recalls_folded_across_batches_are_the_players_cut_of_the_whole_stream() -> None:
    async with open_ledger("sqlite:///:memory:") as ledger:
        await ledger.migrate()
        rounds = [shared_round(), boxes_round(), voided_round()]
        await settle(ledger, rounds)
        projector = Projector(ledger, open_store(ledger), [projection()], batch=3)
        await projector.setup()
        await projector.catch_up()  # every round spans several batches
        store = open_store(ledger)
        async with store.session() as session:
            stored = await session.fetch(
                "SELECT table_id, round_id, player_id, document FROM history_recalls"
            )
            documents = await session.fetch(
                "SELECT player_id, round_id, document FROM history_player_rounds"
            )
        expected = {}
        for feed in rounds:
            facts = await ledger.read_stream(f"round:{feed.table_id}:{feed.round_id}")
            whole = recall(feed.table_id, feed.round_id, facts)
            assert whole is not None
            for player in participants(whole):
                shown = for_viewer(whole, Viewer(player_id=player))
                assert shown is not None
                expected[(feed.table_id, feed.round_id, player)] = shown
    assert {(t, r, p): RoundRecall.model_validate_json(d) for t, r, p, d in stored} == expected
    assert len(expected) == 2 + 2 + 1
    p2 = next(d for p, r, d in documents if (p, r) == ("p2", "r-shared"))
    decided = PlayerRound.model_validate_json(p2).decisions
    assert [(d.stage, d.action) for d in decided] == [("flop", "fold")]  # not the rejected call
