"""Settling a shared hand by kinds of seat: each kind once, however many players are of it.

A seat is one player's ante on one box, with the side bets beside it and the decisions on
it. Without a jackpot wager in the round, the results of a seat's wagers depend only on
its *kind*: the box, the spots and stakes of its wagers (in order) and its decisions
(stage, action, amount, in order); no other seat's bets enter them. On a shared hand,
where thousands of players bet on one box, a few kinds cover every seat, so
:func:`settle_kinds` settles one seat of each kind (through :func:`holdem.settle`, the same
rules) and the caller gives each seat its kind's results.

With a jackpot wager the results are not per seat (winners of a meter line split its
award, and the meter grows by every stake): :func:`settle_kinds` refuses, and the round is
settled bet by bet. ``tests/unit/holdem/test_settlement_properties.py`` holds the results
to those of :func:`holdem.settle` on random whole rounds of every pay table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from holdem.bets import Action, BetResult, Deal, Decision, SettlementError, Stage, Wager
from holdem.paytable import PayTable, Spot
from holdem.schedule import play_spot
from holdem.settlement import settle


class SeatKind(NamedTuple):
    """What a seat's results depend on: its box, its wagers' spots and stakes (the ante
    first, then the side bets, in the order placed) and its decisions, in order."""

    box: str
    wagers: tuple[tuple[Spot, int], ...]
    decisions: tuple[tuple[Stage, Action, int | None], ...]


@dataclass(frozen=True, slots=True)
class KindResults:
    """The results of one seat of a kind: of its wagers (in the kind's order), and of the
    play wagers its decisions made, by the index of the decision in the kind."""

    wagers: tuple[BetResult, ...]
    plays: Mapping[int, BetResult]


def settle_kinds(
    table: PayTable, deal: Deal, kinds: Sequence[SeatKind]
) -> tuple[list[KindResults], dict[str, str]]:
    """Each kind's results, in order, and the hands' descriptions (as ``Settlement.hands``).

    Raises ``SettlementError`` for a jackpot wager (settle such a round bet by bet) and
    for anything :func:`holdem.settle` refuses.
    """
    wagers: list[Wager] = []
    decisions: list[Decision] = []
    for number, kind in enumerate(kinds):
        player = f"kind{number}"
        if not kind.wagers or kind.wagers[0][0] is not Spot.ANTE:
            raise SettlementError(f"seat kind {number} does not start with its ante")
        ante = f"{number}:0"
        for index, (spot, amount) in enumerate(kind.wagers):
            if spot is Spot.JACKPOT:
                raise SettlementError("jackpot wagers are settled bet by bet")
            wagers.append(Wager(f"{number}:{index}", player, kind.box, spot, amount))
        for index, (stage, action, size) in enumerate(kind.decisions):
            bet_id = f"{number}:play{index}" if play_spot(stage, action) else None
            decisions.append(Decision(ante, stage, action, bet_id, size))
    settled = settle(table, deal, wagers, decisions, None)
    assert settled.meter is None, "no jackpot wager: the meter does not move"
    by_id = {r.bet_id: r for r in settled.results}
    assert len(by_id) == len(settled.results), "one result per wager"
    out = []
    for number, kind in enumerate(kinds):
        placed = tuple(by_id[f"{number}:{index}"] for index in range(len(kind.wagers)))
        plays = {
            index: by_id[f"{number}:play{index}"]
            for index, (stage, action, _) in enumerate(kind.decisions)
            if play_spot(stage, action)
        }
        out.append(KindResults(placed, plays))
    return out, dict(settled.hands)
