"""The read model of wagers, settlement results and hold, by player and by round.

Tables (times are UTC text ``YYYY-MM-DDTHH:MM:SS.ffffffZ``, days ``YYYY-MM-DD``, money in
integer minor units):

``wagers``
    Every wager the ledger accepted: a placed bet, or the play wager of a call or bet
    decision (which names its ante; its player and currency are the ante's). ``position``
    is that of the acceptance.
``rejected_wagers``
    Every wager the ledger rejected, with the rejection's code and reason; keyed by the
    rejection's position (a bet id can be rejected more than once).
``results``
    One row per settlement result (``message_id``: player, currency and round), settled or
    voided: stakes, returned (settled) or refunded (voided), the bet ids, the position and
    time of the settlement, and the game time (the completing event's ``occurred_at``).
``wager_results``
    Each wager's line of its round's result: outcome, stake, returned.
``round_hold``
    Per round and currency: wagered, returned, refunded, jackpot contributed, awarded and
    reseeded, and the house's hold (its posting), with settlement and game days.

Each row comes from exactly one ledger fact, so rows are only inserted, and a rebuild
gives the same rows.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any, Final

from contract.feed import WAGER_ACTIONS
from croupier.ledger import RecordedEvent
from croupier.ledger.chain import format_timestamp
from croupier.projection import Changes, Column, Projection, ProjectionError, Table
from croupier.settlement.results import result_bodies
from croupier.settlement.round import ACCEPTED, REJECTED, SETTLED, VOIDED

_T: Final = "text"
_I: Final = "int"


def _col(name: str, type_: str = _T, nullable: bool = False) -> Column:
    return Column(name, "int" if type_ == _I else "text", nullable)


WAGERS: Final = Table(
    "wagers",
    (
        _col("table_id"),
        _col("round_id"),
        _col("bet_id"),
        _col("player_id", nullable=True),
        _col("currency", nullable=True),
        _col("box", nullable=True),
        _col("spot"),
        _col("stake", _I),
        _col("ante_bet_id", nullable=True),
        _col("event_id"),
        _col("position", _I),
        _col("accepted_at"),
    ),
    key=("table_id", "round_id", "bet_id"),
    indexes=(("position",), ("player_id", "position")),
)
REJECTED_WAGERS: Final = Table(
    "rejected_wagers",
    (
        _col("position", _I),
        _col("table_id"),
        _col("round_id"),
        _col("bet_id"),
        _col("player_id", nullable=True),
        _col("currency", nullable=True),
        _col("spot"),
        _col("amount", _I),
        _col("ante_bet_id", nullable=True),
        _col("event_id"),
        _col("code"),
        _col("reason"),
        _col("rejected_at"),
    ),
    key=("position",),
    indexes=(("table_id", "round_id", "bet_id"),),
)
RESULTS: Final = Table(
    "results",
    (
        _col("message_id"),
        _col("table_id"),
        _col("round_id"),
        _col("player_id"),
        _col("currency"),
        _col("status"),
        _col("paytable"),
        _col("stake", _I),
        _col("returned", _I),
        _col("refunded", _I),
        _col("bet_ids"),
        _col("position", _I),
        _col("settled_at"),
        _col("game_at"),
    ),
    key=("message_id",),
    indexes=(("position",), ("player_id", "position"), ("table_id", "round_id")),
)
WAGER_RESULTS: Final = Table(
    "wager_results",
    (
        _col("table_id"),
        _col("round_id"),
        _col("bet_id"),
        _col("message_id"),
        _col("spot"),
        _col("stake", _I),
        _col("returned", _I),
        _col("outcome"),
        _col("position", _I),
    ),
    key=("table_id", "round_id", "bet_id"),
    indexes=(("message_id",),),
)
ROUND_HOLD: Final = Table(
    "round_hold",
    (
        _col("table_id"),
        _col("round_id"),
        _col("currency"),
        _col("paytable"),
        _col("status"),
        _col("wagered", _I),
        _col("returned", _I),
        _col("refunded", _I),
        _col("contributed", _I),
        _col("awarded", _I),
        _col("reseeded", _I),
        _col("hold", _I),
        _col("position", _I),
        _col("settled_day"),
        _col("game_day"),
    ),
    key=("table_id", "round_id", "currency"),
    indexes=(("settled_day",), ("game_day",)),
)


class WagersProjection(Projection):
    """Wagers, results and hold from the ledger's round facts."""

    name = "wagers"
    version = 1
    tables = (WAGERS, REJECTED_WAGERS, RESULTS, WAGER_RESULTS, ROUND_HOLD)

    def apply(self, events: Sequence[RecordedEvent], changes: Changes) -> None:
        for record in events:
            if record.type == ACCEPTED:
                _accepted(record, changes)
            elif record.type == REJECTED and "event" in record.data:
                _rejected(record, changes)
            elif record.type in (SETTLED, VOIDED):
                _closed(record, changes)


def projection() -> Projection:
    """The projection this module registers."""
    return WagersProjection()


def _accepted(record: RecordedEvent, changes: Changes) -> None:
    event = record.data["event"]
    wager = _wager(event)
    if wager is not None:
        row = {**wager, "event_id": event["event_id"], "position": record.position}
        changes.insert("wagers", {**row, "accepted_at": _time(record.recorded_at)})


def _rejected(record: RecordedEvent, changes: Changes) -> None:
    event = record.data["event"]
    wager = _wager(event)
    if wager is None:
        return
    changes.insert(
        "rejected_wagers",
        {
            "position": record.position,
            **{k: v for k, v in wager.items() if k != "stake" and k != "box"},
            "amount": wager["stake"],
            "event_id": event["event_id"],
            "code": record.data["code"],
            "reason": record.data["reason"],
            "rejected_at": _time(record.recorded_at),
        },
    )


def _wager(event: Mapping[str, Any]) -> dict[str, Any] | None:
    """The wager a bet or a call/bet decision makes (None for other events)."""
    payload = event["payload"]
    ids = {"table_id": event["table_id"], "round_id": event["round_id"]}
    if event["event_type"] == "bet.placed":
        return {
            **ids,
            "bet_id": payload["bet_id"],
            "player_id": payload["player_id"],
            "currency": payload["currency"],
            "box": payload["box"],
            "spot": payload["spot"],
            "stake": payload["amount"],
            "ante_bet_id": None,
        }
    if event["event_type"] == "decision.made" and payload["action"] in WAGER_ACTIONS:
        return {
            **ids,
            "bet_id": payload["bet_id"],
            "player_id": None,
            "currency": None,
            "box": None,
            "spot": f"{payload['stage']}:{payload['action']}",
            "stake": payload["amount"],
            "ante_bet_id": payload["ante_bet_id"],
        }
    return None


def _closed(record: RecordedEvent, changes: Changes) -> None:
    data = record.data
    event = data["event"]
    voided = record.type == VOIDED
    settled_at = _time(record.recorded_at)
    game_at = _time(datetime.fromisoformat(event["occurred_at"]))
    paytable = data["paytable"]["id"]
    for body in result_bodies(data):
        bets = body["bets"]
        changes.insert(
            "results",
            {
                "message_id": body["message_id"],
                "table_id": body["table_id"],
                "round_id": body["round_id"],
                "player_id": body["player_id"],
                "currency": body["currency"],
                "status": "voided" if voided else "settled",
                "paytable": paytable,
                "stake": body["stake_total"],
                "returned": 0 if voided else body["returned_total"],
                "refunded": body["returned_total"] if voided else 0,
                "bet_ids": json.dumps([bet["bet_id"] for bet in bets]),
                "position": record.position,
                "settled_at": settled_at,
                "game_at": game_at,
            },
        )
        for bet in bets:
            changes.insert(
                "wager_results",
                {
                    "table_id": body["table_id"],
                    "round_id": body["round_id"],
                    "bet_id": bet["bet_id"],
                    "message_id": body["message_id"],
                    "spot": bet["spot"],
                    "stake": bet["stake"],
                    "returned": bet["returned"],
                    "outcome": bet["outcome"],
                    "position": record.position,
                },
            )
    for row in _hold(data, voided):
        row.update(position=record.position, settled_day=settled_at[:10], game_day=game_at[:10])
        changes.insert("round_hold", {**row, "paytable": paytable})


def _hold(data: Mapping[str, Any], voided: bool) -> list[dict[str, Any]]:
    """Per currency: the round's money, checked against its house posting to the unit."""
    event = data["event"]
    house = {p["currency"]: p["amount"] for p in data["postings"] if p["account"] == "house"}
    rows = []
    for currency in sorted({line["currency"] for line in data["results"]}):
        lines = [line for line in data["results"] if line["currency"] == currency]
        staked = sum(line["stake"] for line in lines)
        paid = sum(line["returned"] for line in lines)
        meters = [m for m in data["jackpot"] if m["currency"] == currency]
        contributed = sum(m["contributed"] for m in meters)
        awarded = sum(m["awarded"] for m in meters)
        reseeded = sum(m["reseeded"] for m in meters)
        hold = staked - paid - contributed + awarded - reseeded
        if hold != house.get(currency, 0):
            raise ProjectionError(
                f"round {event['table_id']}/{event['round_id']} {currency}: hold {hold} "
                f"differs from its house posting {house.get(currency)}"
            )
        rows.append(
            {
                "table_id": event["table_id"],
                "round_id": event["round_id"],
                "currency": currency,
                "status": "voided" if voided else "settled",
                "wagered": 0 if voided else staked,
                "returned": 0 if voided else paid,
                "refunded": paid if voided else 0,
                "contributed": contributed,
                "awarded": awarded,
                "reseeded": reseeded,
                "hold": hold,
            }
        )
    return rows


@lru_cache(maxsize=1024)
def _time(moment: datetime) -> str:
    # Every fact of an append batch shares its recording time: one text for all of them.
    return format_timestamp(moment)
