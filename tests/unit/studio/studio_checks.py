"""An independent reading of a studio feed: rounds, and every defect a round shows.

Written from docs/feed.md and docs/rules.md alone (not from the simulator's code), so the
simulator's tests check its output against the contract rather than against itself.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from studio.feed import FeedMessage

CARD = re.compile(r"^[2-9TJQKA][cdhs]$")


@dataclass
class RoundView:
    """One round's events in the order they were sent, and what is wrong with it."""

    table_id: str
    round_id: str
    events: list[dict[str, Any]] = field(default_factory=list)
    torn_lines: int = 0
    redelivered: int = 0

    def in_seq_order(self) -> list[dict[str, Any]]:
        return sorted(self.events, key=lambda e: e["seq"])

    def of_type(self, event_type: str) -> list[dict[str, Any]]:
        return [e for e in self.in_seq_order() if e["event_type"] == event_type]

    def defects(self) -> set[str]:
        """Every defect of this round, named like the simulator's fault options."""
        found: set[str] = set()
        if self.torn_lines:
            found.add("malformed")
        if self.redelivered:
            found.add("redelivery")
        seqs = [e["seq"] for e in self.events]
        if seqs != sorted(seqs):
            found.add("out_of_order")
        if self.of_type("round.voided"):
            found.add("void")
        ordered = self.in_seq_order()
        cards = [c for e in self.of_type("cards.dealt") for c in e["payload"]["cards"]]
        if any(not CARD.match(c) for c in cards):
            found.add("bad_card")
        if any(n > 1 for n in Counter(cards).values()):
            found.add("duplicate_card")
        if self.of_type("round.completed") and self._cards_missing():
            found.add("missing_cards")
        if self._wrong_calls():
            found.add("wrong_call")
        first_deal = next((e["seq"] for e in ordered if e["event_type"] == "cards.dealt"), None)
        if first_deal is not None and any(
            e["seq"] > first_deal for e in self.of_type("bet.placed")
        ):
            found.add("late_bet")
        return found

    def _cards_missing(self) -> bool:
        deals = [e["payload"] for e in self.of_type("cards.dealt")]
        board = sum(len(p["cards"]) for p in deals if p["target"] == "board")
        dealer = sum(len(p["cards"]) for p in deals if p["target"] == "dealer")
        boxes = {p["payload"]["box"] for p in self.of_type("bet.placed")}
        dealt = {p["box"] for p in deals if p["target"] == "player"}
        return board != 5 or dealer != 2 or not boxes <= dealt

    def _wrong_calls(self) -> bool:
        antes = self.antes()
        for e in self.of_type("decision.made"):
            p = e["payload"]
            size = {"call": 2, "bet": 1}.get(p["action"])
            if size is not None and p["amount"] != size * antes[p["ante_bet_id"]]:
                return True
        return False

    def antes(self) -> dict[str, int]:
        return {
            e["payload"]["bet_id"]: e["payload"]["amount"]
            for e in self.of_type("bet.placed")
            if e["payload"]["spot"] == "ante"
        }


def read_rounds(messages: Iterable[FeedMessage]) -> dict[tuple[str, str], RoundView]:
    """The rounds of a feed, keyed by (table_id, round_id), from the message bodies alone."""
    rounds: dict[tuple[str, str], RoundView] = {}
    seen: set[str] = set()
    torn: defaultdict[str, int] = defaultdict(int)
    for message in messages:
        try:
            event = json.loads(message.body)
        except ValueError:
            torn[message.table_id] += 1
            continue
        key = (event["table_id"], event["round_id"])
        view = rounds.setdefault(key, RoundView(*key))
        view.torn_lines += torn.pop(event["table_id"], 0)
        if event["event_id"] in seen:
            view.redelivered += 1
            continue
        seen.add(event["event_id"])
        view.events.append(event)
    return rounds
