"""Jackpot meters: each pay table's progressive level per currency, a ledger stream of its own.

A meter's stream (:func:`meter_stream`) holds one ``jackpot.meter_moved`` fact per
settlement that moved it; each movement's ``before`` is the previous one's ``after``
(asserted here as it is written, re-checked by ``verify``). :class:`Meters` keeps the levels
as of the last decided batch and reads a meter from the ledger the first time a round could
settle against it.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Final

from contract.events import BetPlaced, FeedEvent, RoundOpened
from contract.feed import EventType
from croupier.ledger import Ledger
from croupier.settlement.facts import Fact, MeterMoved
from croupier.settlement.facts import closing as closing_data
from croupier.settlement.round import Round
from holdem import PayTable, PayTableError, load_paytable

METER_MOVED: Final = "jackpot.meter_moved"
METER_PREFIX: Final = "jackpot:"


def meter_stream(paytable_id: str, currency: str) -> str:
    """The ledger stream of a jackpot meter."""
    return f"{METER_PREFIX}{paytable_id}:{currency}"


def moved_on(moves: Sequence[Fact], level: int) -> list[Fact] | None:
    """A batch's movements of one meter (in order) moved onto ``level``, the meter's level as
    recorded now, when another writer moved it on first: each ``before`` and ``after``
    shifted alike, the contributions unchanged. None when one of them awards or reseeds:
    an award is a share of the level it met, so its round must be decided again."""
    if any(m.data["awarded"] or m.data["reseeded"] for m in moves):
        return None
    delta = level - moves[0].data["before"]
    shifted = [
        Fact(
            m.type,
            {**m.data, "before": m.data["before"] + delta, "after": m.data["after"] + delta},
            m.key,
        )
        for m in moves
    ]
    for previous, move in itertools.pairwise(shifted):
        assert move.data["before"] == previous.data["after"], "a meter's movements chain"
    return shifted


class Meters:
    """The meters' (level, stream version) by stream, as of the last decided batch."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self._levels: dict[str, tuple[int, int]] = {}

    def unread(self, state: Round, event: FeedEvent) -> list[tuple[str, int]]:
        """The meters (stream, seed) this event could settle the round against, not read yet.

        Only a completion settles, or an event that releases held ones (a held completion
        among them); a round is read back from the ledger without its meters, so those
        events ask for the meter of every currency in the round.
        """
        table = state.table
        if type(event) is RoundOpened and table is None and state.held:
            try:
                table = load_paytable(event.payload.paytable)
            except PayTableError:
                return []
        elif event.event_type is not EventType.ROUND_COMPLETED and not state.held:
            return []
        return self._unread(state, table)

    def unread_held(self, state: Round) -> list[tuple[str, int]]:
        """The meters (stream, seed) the events ``state`` holds could settle it against,
        not read yet: what a refused message that takes its place may release."""
        return self._unread(state, state.table) if state.held else []

    def _unread(self, state: Round, table: PayTable | None) -> list[tuple[str, int]]:
        if table is None or table.jackpot is None:
            return []
        currencies = {bet.currency for bet in state.bets.values()}
        currencies.update(e.payload.currency for e in state.held.values() if type(e) is BetPlaced)
        keys = (meter_stream(table.id, currency) for currency in currencies)
        return [(key, table.jackpot.seed) for key in keys if key not in self._levels]

    async def read(self, meters: Sequence[tuple[str, int]]) -> None:
        """Read these meters (stream, seed) from the ledger: the seed for a new one."""
        for key, seed in meters:
            last = await self.ledger.read_last(key)
            self._levels[key] = (seed, 0) if last is None else (last.data["after"], last.version)

    def level(self, table: PayTable, currency: str, pending: Mapping[str, int]) -> int:
        """The meter's level: as ``pending`` (a batch being decided) left it, else as known."""
        key = meter_stream(table.id, currency)
        return pending[key] if key in pending else self._levels[key][0]

    def movements(
        self, closing: Fact, pending: dict[str, int], versions: dict[str, int]
    ) -> list[tuple[str, Fact]]:
        """The (stream, fact) of each meter a closing fact moves, moving ``pending`` (the
        batch's levels) and ``versions`` (its streams' versions) on."""
        moved: list[tuple[str, Fact]] = []
        data = closing_data(closing.data)
        for movement in data["jackpot"]:
            key = meter_stream(data["paytable"]["id"], movement["currency"])
            versions.setdefault(key, self._levels[key][1])
            level = pending.get(key, self._levels[key][0])
            assert movement["before"] == level, f"meter {key} moves on from {level}"
            pending[key] = movement["after"]
            fact: MeterMoved = {**movement, "settlement": closing.key}
            moved.append((key, Fact(METER_MOVED, fact, f"{closing.key}:{key}")))
        return moved

    def decided(self, pending: Mapping[str, int], versions: Mapping[str, int]) -> None:
        """A batch was decided: its levels are the meters' now."""
        for key, level in pending.items():
            self._levels[key] = (level, versions[key])

    def forget(self) -> None:
        """Drop every level; they are read back from the ledger when needed."""
        self._levels.clear()
