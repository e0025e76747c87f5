"""Feed events for croupier tests: a round written event by event as valid feed JSON.

``RoundFeed`` numbers its events (seq 1, 2, 3, ...) and gives each a fresh UUID, so a test
states only what happens at the table. ``line()`` is the JSON text of an event; ``parsed()``
is the same text read as the settler reads it (``contract.events.read_event``).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from contract.events import FeedEvent, read_event

CH_CLASSIC = ("casino_holdem", "casino-holdem/classic")
CH_ROYAL = ("casino_holdem", "casino-holdem/royal-20")
CH_PROGRESSIVE = ("casino_holdem", "casino-holdem/progressive")
THP = ("texas_holdem_plus", "texas-holdem-plus/standard")

_NAMESPACE = uuid.UUID("9a1d53c4-40a5-4a39-8f6a-1b2a0c7e5d11")


@dataclass
class RoundFeed:
    """Events of one round; each builder returns the event as a JSON-ready dict."""

    table_id: str = "t1"
    round_id: str = "r1"
    next_seq: int = 1
    made: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)

    def make(
        self, event_type: str, payload: dict[str, Any], *, seq: int | None = None
    ) -> dict[str, Any]:
        """An event with the next seq (or ``seq``) and a fresh, deterministic event_id."""
        self.made += 1
        if seq is None:
            seq, self.next_seq = self.next_seq, self.next_seq + 1
        event_id = uuid.uuid5(_NAMESPACE, f"{self.table_id}/{self.round_id}/{self.made}")
        event = {
            "event_id": str(event_id),
            "event_type": event_type,
            "schema_version": 1,
            "table_id": self.table_id,
            "round_id": self.round_id,
            "seq": seq,
            "occurred_at": "2024-05-01T20:15:00Z",
            "payload": payload,
        }
        self.events.append(event)
        return event

    def opened(self, game: tuple[str, str] = CH_CLASSIC, **kw: Any) -> dict[str, Any]:
        return self.make("round.opened", {"game": game[0], "paytable": game[1]}, **kw)

    def bet(
        self,
        bet_id: str,
        spot: str = "ante",
        amount: int = 100,
        player: str = "p1",
        box: str = "main",
        currency: str = "EUR",
        **kw: Any,
    ) -> dict[str, Any]:
        payload = {
            "bet_id": bet_id,
            "player_id": player,
            "box": box,
            "spot": spot,
            "amount": amount,
            "currency": currency,
        }
        return self.make("bet.placed", payload, **kw)

    def cards(self, target: str, cards: str, box: str | None = None, **kw: Any) -> dict[str, Any]:
        payload: dict[str, Any] = {"target": target, "cards": cards.split()}
        if box is not None:
            payload["box"] = box
        return self.make("cards.dealt", payload, **kw)

    def hole(self, cards: str, box: str = "main", **kw: Any) -> dict[str, Any]:
        return self.cards("player", cards, box, **kw)

    def decide(
        self,
        ante: str,
        stage: str,
        action: str,
        bet_id: str | None = None,
        amount: int | None = None,
        **kw: Any,
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {"ante_bet_id": ante, "stage": stage, "action": action}
        if bet_id is not None:
            payload["bet_id"] = bet_id
        if amount is not None:
            payload["amount"] = amount
        return self.make("decision.made", payload, **kw)

    def completed(self, **kw: Any) -> dict[str, Any]:
        return self.make("round.completed", {}, **kw)

    def voided(self, reason: str = "misdeal", **kw: Any) -> dict[str, Any]:
        return self.make("round.voided", {"reason": reason}, **kw)


def line(event: dict[str, Any]) -> str:
    """The event as one line of feed JSON."""
    return json.dumps(event, separators=(",", ":"))


def parsed(event: dict[str, Any]) -> FeedEvent:
    """The event parsed by the contract, as the service receives it."""
    return read_event(line(event))
