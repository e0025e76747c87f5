"""The rounds read model: rounds by table and id, and each player's rounds, newest first.

Tables (money in integer minor units; ``closed_at`` is the completing event's game time):

``history_rounds``
    One row per closed round (settled or voided): game, pay table, status, and the ledger
    ``position`` of its settlement. Keyed by (table_id, round_id); listed per table by
    position.
``history_player_rounds``
    One row per player, currency and closed round: stake, returned, and the player's
    wagers with their results and why they paid (JSON text). Keyed by (player_id,
    position, currency), the order a player's history is read in, newest first.
``history_decisions``
    Every accepted decision, by round and ante. A player's page joins it on the antes of
    its rows.

Each row comes from exactly one ledger fact and is only inserted; positions never change,
so a page cursor (the last row's position) stays valid while rounds arrive. Round recall
itself does not read these tables: it folds the round's own stream.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from croupier.history.recall import paytable_of, why_paid
from croupier.ledger import RecordedEvent
from croupier.projection import Changes, Column, Projection, Table
from croupier.round import ACCEPTED, SETTLED, VOIDED
from holdem import PayTable

#: A closed round yields at most this many results (a round can seat thousands of players).
MAX_RESULTS: Final = 100_000


def _text(name: str, nullable: bool = False) -> Column:
    return Column(name, "text", nullable)


def _int(name: str, nullable: bool = False) -> Column:
    return Column(name, "int", nullable)


ROUNDS: Final = Table(
    "history_rounds",
    (
        _text("table_id"),
        _text("round_id"),
        _text("game"),
        _text("paytable"),
        _text("status"),
        _text("closed_at", nullable=True),
        _int("position"),
    ),
    key=("table_id", "round_id"),
    indexes=(("table_id", "position"),),
)
PLAYER_ROUNDS: Final = Table(
    "history_player_rounds",
    (
        _text("player_id"),
        _int("position"),
        _text("currency"),
        _text("table_id"),
        _text("round_id"),
        _text("game"),
        _text("paytable"),
        _text("status"),
        _text("closed_at", nullable=True),
        _int("stake"),
        _int("returned"),
        _text("wagers"),
    ),
    key=("player_id", "position", "currency"),
)
DECISIONS: Final = Table(
    "history_decisions",
    (
        _text("table_id"),
        _text("round_id"),
        _text("ante_bet_id"),
        _text("stage"),
        _text("action"),
        _text("bet_id", nullable=True),
        _int("amount", nullable=True),
        _int("position"),
    ),
    key=("table_id", "round_id", "ante_bet_id", "stage"),
)


class RoundsProjection(Projection):
    """Projects closed rounds per table and per player, and accepted decisions."""

    name = "rounds"
    version = 1
    tables = (ROUNDS, PLAYER_ROUNDS, DECISIONS)

    def apply(self, events: Sequence[RecordedEvent], changes: Changes) -> None:
        for event in events:
            if not event.stream.startswith("round:"):
                continue
            if event.type == ACCEPTED and event.data["event"]["event_type"] == "decision.made":
                changes.insert(DECISIONS.name, _decision(event))
            elif event.type in (SETTLED, VOIDED):
                _closed(event, changes)


def projection() -> Projection:
    """The rounds projection (registry entry point)."""
    return RoundsProjection()


def _decision(event: RecordedEvent) -> dict[str, Any]:
    feed = event.data["event"]
    move = feed["payload"]
    return {
        "table_id": feed["table_id"],
        "round_id": feed["round_id"],
        "ante_bet_id": move["ante_bet_id"],
        "stage": move["stage"],
        "action": move["action"],
        "bet_id": move.get("bet_id"),
        "amount": move.get("amount"),
        "position": event.position,
    }


def _closed(event: RecordedEvent, changes: Changes) -> None:
    data = event.data
    feed = data["event"]
    table = paytable_of(data["paytable"]["id"], data["paytable"]["version"])
    status = "settled" if event.type == SETTLED else "voided"
    common = {
        "table_id": feed["table_id"],
        "round_id": feed["round_id"],
        "game": str(table.game) if table else "",
        "paytable": data["paytable"]["id"],
        "status": status,
        "closed_at": feed.get("occurred_at"),
        "position": event.position,
    }
    assert event.stream == f"round:{common['table_id']}:{common['round_id']}", event.stream
    changes.insert(ROUNDS.name, common)
    results = data["results"]
    assert len(results) <= MAX_RESULTS, f"a round with {len(results)} results"
    owners: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for line in results:
        owners.setdefault((line["player_id"], line["currency"]), []).append(_wager(line, table))
    for (player_id, currency), wagers in owners.items():
        stake = sum(w["stake"] for w in wagers)
        returned = sum(w["returned"] for w in wagers)
        assert stake >= 0 and returned >= 0, "money is never negative"
        row = {
            **common,
            "player_id": player_id,
            "currency": currency,
            "stake": stake,
            "returned": returned,
            "wagers": json.dumps(wagers, separators=(",", ":")),
        }
        changes.insert(PLAYER_ROUNDS.name, row)


def _wager(line: dict[str, Any], table: PayTable | None) -> dict[str, Any]:
    return {
        "bet_id": line["bet_id"],
        "player_id": line["player_id"],
        "box": line["box"],
        "spot": line["spot"],
        "stake": line["stake"],
        "returned": line["returned"],
        "net": line["returned"] - line["stake"],
        "outcome": line["outcome"],
        "line": line.get("line"),
        "currency": line["currency"],
        "why": why_paid(table, line["spot"], line["outcome"], line.get("line")),
    }
