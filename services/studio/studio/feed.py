"""The studio feed: every table's rounds, interleaved as a live studio sends them.

>>> config = StudioConfig(tables=every_paytable(players=20), rounds=8, seed=7)
>>> messages = list(simulate(config))
>>> write_jsonl(simulate(config), "feed.jsonl")  # doctest: +SKIP

Each table plays its rounds in order on its own clock; the tables run side by side, so their
events interleave by time while each table's own events stay in the order it sent them.
"""

from __future__ import annotations

import heapq
import os
import random
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from operator import itemgetter

from contract.feed import EventType
from studio.config import StudioConfig
from studio.faults import fault_messages, fault_round
from studio.message import FeedMessage
from studio.table import StudioTable

__all__ = ["FeedMessage", "FeedTally", "TableTally", "simulate", "write_jsonl"]

#: Tables open a few seconds apart, as a studio floor does.
TABLE_STAGGER_MS = 2_500


def simulate(config: StudioConfig) -> Iterator[FeedMessage]:
    """Every message of the simulation, in the order the studio sends them."""
    master = random.Random(config.seed)
    streams = []
    for index, spec in enumerate(config.tables):
        table_rng = random.Random(master.getrandbits(64))
        table = StudioTable(spec, config, table_rng, offset_ms=index * TABLE_STAGGER_MS)
        streams.append(_table_stream(table, config, config.rounds_of(index)))
    for _, message in heapq.merge(*streams, key=itemgetter(0)):
        yield message


def _table_stream(
    table: StudioTable, config: StudioConfig, rounds: int
) -> Iterator[tuple[int, FeedMessage]]:
    """(send time in ms, message) of one table's rounds; the send times never go back."""
    faults, rng = config.faults, table.rng
    sent_ms = 0
    for _ in range(rounds):
        draft = table.draft_round()
        fault_round(draft, faults, rng)
        messages = fault_messages(table.stamp(draft), faults, rng)
        times = iter([step.at_ms for step in draft.steps])
        for message in messages:
            sent_ms = max(sent_ms, next(times, sent_ms))
            yield sent_ms, message


def write_jsonl(messages: Iterable[FeedMessage], path: str | os.PathLike[str]) -> int:
    """Write one message body per line to ``path``; return how many lines were written."""
    count = 0
    with open(path, "wb", buffering=1 << 20) as out:
        for message in messages:
            out.write(message.body + b"\n")
            count += 1
    return count


@dataclass
class TableTally:
    """What one table sent."""

    rounds: int = 0
    events: int = 0
    bets: int = 0
    play_wagers: int = 0
    staked: int = 0
    voided: int = 0
    faults: Counter[str] = field(default_factory=Counter)


@dataclass
class FeedTally:
    """Counts of a feed as it passes: rounds, events, bets and faults, per table.

    ``for message in tally.watch(simulate(config)): ...`` counts without holding the feed.
    Redelivered copies and torn lines count as events (they are sent) but nothing else.
    """

    tables: dict[str, TableTally] = field(default_factory=dict)

    def add(self, message: FeedMessage) -> None:
        """Count one message."""
        tally = self.tables.get(message.table_id)
        if tally is None:
            tally = self.tables[message.table_id] = TableTally()
        tally.events += 1
        if message.fault is not None:
            tally.faults[message.fault] += 1
        if message.event is None or message.fault == "redelivery":
            return
        kind, payload = message.event["event_type"], message.event["payload"]
        if kind == EventType.BET_PLACED:
            tally.bets += 1
            tally.staked += payload["amount"]
        elif kind == EventType.DECISION_MADE and "amount" in payload:
            tally.play_wagers += 1
            tally.staked += payload["amount"]
        elif kind == EventType.ROUND_OPENED:
            tally.rounds += 1
        elif kind == EventType.ROUND_VOIDED:
            tally.voided += 1

    def watch(self, messages: Iterable[FeedMessage]) -> Iterator[FeedMessage]:
        """Pass ``messages`` through, counting each."""
        for message in messages:
            self.add(message)
            yield message

    @property
    def total(self) -> TableTally:
        """The sums over every table."""
        total = TableTally()
        for tally in self.tables.values():
            total.rounds += tally.rounds
            total.events += tally.events
            total.bets += tally.bets
            total.play_wagers += tally.play_wagers
            total.staked += tally.staked
            total.voided += tally.voided
            total.faults.update(tally.faults)
        return total

    def report(self) -> str:
        """A short human summary, one line per table and a total."""
        lines = [_line(table_id, t) for table_id, t in sorted(self.tables.items())]
        lines.append(_line("total", self.total))
        return "\n".join(lines)


def _line(name: str, tally: TableTally) -> str:
    text = (
        f"{name}: {tally.rounds} rounds, {tally.events} events, {tally.bets} bets, "
        f"{tally.play_wagers} play wagers, {tally.voided} voided"
    )
    if tally.faults:
        text += ", faults " + ", ".join(f"{k}={n}" for k, n in sorted(tally.faults.items()))
    return text
