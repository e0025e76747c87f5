"""Feed events as docs/feed.md describes them, and a way to break one field at a time."""

from __future__ import annotations

import copy
import json
from typing import Any

TABLE = "ch-07"
ROUND = "ch-07:2024-05-01:000123"
_DELETE = object()
DELETE: Any = _DELETE


def event(event_type: str, seq: int, payload: dict[str, Any], n: int = 0) -> dict[str, Any]:
    """One feed event with a valid envelope."""
    return {
        "event_id": f"0b6f1f8e-5a47-4c1e-9a4e-{n:012x}",
        "event_type": event_type,
        "schema_version": 1,
        "table_id": TABLE,
        "round_id": ROUND,
        "seq": seq,
        "occurred_at": "2024-05-01T20:15:00.250Z",
        "payload": payload,
    }


VALID: dict[str, dict[str, Any]] = {
    "round.opened": event(
        "round.opened", 1, {"game": "casino_holdem", "paytable": "casino-holdem/classic"}, 1
    ),
    "round.opened/thp": event(
        "round.opened",
        1,
        {"game": "texas_holdem_plus", "paytable": "texas-holdem-plus/standard"},
        2,
    ),
    "bet.placed": event(
        "bet.placed",
        2,
        {
            "bet_id": "b-1",
            "player_id": "p-1042",
            "box": "main",
            "spot": "ante",
            "amount": 500,
            "currency": "EUR",
        },
        3,
    ),
    "bet.placed/aa_bonus": event(
        "bet.placed",
        3,
        {
            "bet_id": "b-2",
            "player_id": "p-1042",
            "box": "main",
            "spot": "aa_bonus",
            "amount": 100,
            "currency": "EUR",
        },
        4,
    ),
    "cards.dealt/player": event(
        "cards.dealt", 4, {"target": "player", "box": "main", "cards": ["As", "Kd"]}, 5
    ),
    "cards.dealt/dealer": event("cards.dealt", 5, {"target": "dealer", "cards": ["2c", "Th"]}, 6),
    "cards.dealt/board": event(
        "cards.dealt", 6, {"target": "board", "cards": ["9s", "9h", "Qc"]}, 7
    ),
    "cards.dealt/burn": event("cards.dealt", 7, {"target": "burn", "cards": ["5d"]}, 8),
    "decision.made/call": event(
        "decision.made",
        8,
        {
            "ante_bet_id": "b-1",
            "stage": "flop",
            "action": "call",
            "bet_id": "b-3",
            "amount": 1000,
        },
        9,
    ),
    "decision.made/fold": event(
        "decision.made", 8, {"ante_bet_id": "b-1", "stage": "flop", "action": "fold"}, 10
    ),
    "decision.made/bet": event(
        "decision.made",
        9,
        {"ante_bet_id": "b-1", "stage": "turn", "action": "bet", "bet_id": "b-4", "amount": 500},
        11,
    ),
    "decision.made/check": event(
        "decision.made", 9, {"ante_bet_id": "b-1", "stage": "turn", "action": "check"}, 12
    ),
    "round.completed": event("round.completed", 10, {}, 13),
    "round.voided": event("round.voided", 10, {"reason": "misdeal: card exposed on the flop"}, 14),
}


def broken(name: str, path: str, value: Any) -> dict[str, Any]:
    """A copy of VALID[name] with the dotted ``path`` set to ``value`` (or removed by DELETE)."""
    data = copy.deepcopy(VALID[name])
    *parents, last = path.split(".")
    target = data
    for key in parents:
        target = target[key]
    if value is DELETE:
        del target[last]
    else:
        target[last] = value
    return data


def text(data: Any) -> str:
    """JSON text of ``data``."""
    return json.dumps(data)


SETTLEMENT: dict[str, Any] = {
    "message_id": "settle:ch-07:2024-05-01:000123:p-1042",
    "table_id": TABLE,
    "round_id": ROUND,
    "player_id": "p-1042",
    "currency": "EUR",
    "bets": [
        {"bet_id": "b-1", "spot": "ante", "stake": 500, "returned": 1000, "outcome": "win"},
        {"bet_id": "b-2", "spot": "aa_bonus", "stake": 100, "returned": 0, "outcome": "lose"},
        {"bet_id": "b-3", "spot": "call", "stake": 1000, "returned": 1000, "outcome": "push"},
    ],
    "stake_total": 1600,
    "returned_total": 2000,
    "ledger_position": 42,
}
