"""One settled round's integrity terms: its deal value and its play residual.

Deal value
    Per box, the best-play value of the cards dealt, as a return on the stakes: the ante
    times (stake so far + best EV per ante at the flop decision), plus each side bet's return
    judged on the cards (:mod:`holdem.integrity.constants` says which value exactly). It is
    a function of the cards alone, whatever anyone decides, so its sum against the pay
    table's exact mean, over the exact variance, is a z-score that only a deal unfair to one
    side moves.

Play residual
    What the box's wagers returned minus the exact expectation of the decisions actually
    taken, given the cards seen when each was taken. Casino Hold'em: the return of a call
    against its EV given hole + flop. Texas Hold'em Plus: a martingale over the stages; the
    preflop call against the best flop value that follows, the flop action against the best
    turn value that follows, the turn action against the showdown. Each stage's residual has
    mean zero given what came before, for any strategy, and its conditional variance is
    exact (from the outcome counts); the stages are uncorrelated, so the variances add.
    Side bets are settled by cards known at the decision: their expectation is what the
    pay table pays on those cards (a progressive meter line: what the meter paid), and they
    add nothing to the variance.

Shared hands: every player staking on one box sees the same cards, so their terms are summed
first and the variance is that of the sum (perfectly correlated given the decisions; players
who took different decisions are combined outcome by outcome).

Boxes of one round share the board and the dealer, so their returns are correlated too.
Casino Hold'em: when calls stand on two or more boxes, their expectation and variance are
taken together, given every card on the table (:mod:`holdem.integrity.joint`, exact). Texas
Hold'em Plus: under a fair deal, and decisions on each box that depend on the cards seen
on it, each box's residual ``T_i`` has mean zero and ``E[T_i^2] = E[var_i]``, its exact
variance. Their covariances ``E[T_i T_j]`` would take every street enumerated given every
box's cards, so the round states ``sum var_i + sum_{i != j} T_i T_j`` instead (the second
sum is ``play_covariance``): its expectation is exactly the variance of the round's
residual. Summed over rounds, the stated variance is unbiased and, divided by the true one,
tends to 1, so the play z-score tends to the standard normal. One round's covariance may be
negative, and so may a period's stated variance over a handful of rounds: the z-score is 0
there. The deal values of boxes on one flop are correlated by card removal (-1.3% of the
ante's variance between two boxes in Casino Hold'em, -3.5% in Texas Hold'em Plus; side bets
judged on a shared flop correlate positively): the round's deal variance adds
``sum_{i != j} w_i^T X w_j`` over its boxes' stakes, ``X`` the pay table's exact
cross-covariance of two boxes (:mod:`holdem.integrity.constants`), so a many-box table's deal
z-score is exact too.

All amounts are minor units; terms are floats because expectations are fractions of a unit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from math import sqrt
from typing import Final

from holdem.bets import Action, BetResult, Deal, Decision, Stage
from holdem.casino_holdem import aa_bonus_line, jackpot_line
from holdem.evaluator import evaluate
from holdem.integrity.constants import (
    DealConstants,
    aa_bonus_net,
    jackpot_net,
    load_constants,
    plus_net,
)
from holdem.integrity.joint import ch_calls
from holdem.integrity.tables import (
    ThpSituation,
    ch_flop_table,
    place,
    thp_situation,
    turn_index,
    turn_numerators,
)
from holdem.odds.combos import hole_class
from holdem.odds.par import load_par
from holdem.odds.situation import (
    CH_COMPLETIONS,
    THP_TURN_COMPLETIONS,
    THP_TURNS,
    ante_multipliers,
)
from holdem.paytable import Game, PayTable, Spot, load_paytable

_THP_FLOP: Final = THP_TURNS * THP_TURN_COMPLETIONS
#: The main game's spots: the ante and the play wagers (every other spot is a side bet).
MAIN_SPOTS: Final = frozenset({Spot.ANTE, Spot.CALL, Spot.FLOP_BET, Spot.TURN_BET})
_STAGES: Final = tuple(Stage)


@dataclass(frozen=True, slots=True)
class Terms:
    """Integrity terms of one round, or the sum over rounds (minor units)."""

    rounds: int = 0
    deal_value: float = 0.0
    deal_mean: float = 0.0
    deal_variance: float = 0.0
    play_actual: int = 0
    play_expected: float = 0.0
    play_variance: float = 0.0
    play_covariance: float = 0.0

    def __add__(self, other: Terms) -> Terms:
        return Terms(
            self.rounds + other.rounds,
            self.deal_value + other.deal_value,
            self.deal_mean + other.deal_mean,
            self.deal_variance + other.deal_variance,
            self.play_actual + other.play_actual,
            self.play_expected + other.play_expected,
            self.play_variance + other.play_variance,
            self.play_covariance + other.play_covariance,
        )

    @property
    def deal_z(self) -> float:
        """The deal value's z-score: (value - fair mean) / exact standard deviation."""
        return _z(self.deal_value - self.deal_mean, self.deal_variance)

    @property
    def play_z(self) -> float:
        """The play residual's z-score: (actual - expected) / its standard deviation, the
        boxes' exact variances plus their covariance estimated from the residuals."""
        return _z(self.play_actual - self.play_expected, self.play_variance + self.play_covariance)


def _z(difference: float, variance: float) -> float:
    return difference / sqrt(variance) if variance > 0 else 0.0


@dataclass
class Group:
    """Antes on one box with the same decisions, and what hangs on them, summed.

    Every figure of a box is linear in the stakes of players who decided alike, so a shared
    hand of thousands of players is a handful of groups.
    """

    ante: int = 0
    ante_bet_id: str = ""
    side: dict[Spot, list[BetResult]] = field(default_factory=dict)
    staked: int = 0
    returned: int = 0
    actions: dict[Stage, Action] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RoundInput:
    """What a round's terms are computed from: its cards, and its groups per box."""

    deal: Deal
    boxes: Mapping[str, tuple[Group, ...]]


def prepare(deal: Deal, results: Sequence[BetResult], decisions: Sequence[Decision]) -> RoundInput:
    """A settled round's bets (one currency's) grouped by box and decisions."""
    actions: dict[str, dict[Stage, Action]] = {}
    for d in decisions:
        actions.setdefault(d.ante_bet_id, {})[d.stage] = d.action
    by_key: dict[tuple[str, str], Group] = {}
    for r in results:
        p = by_key.get((r.player, r.box))
        if p is None:
            p = by_key[(r.player, r.box)] = Group()
        p.staked += r.stake
        p.returned += r.returned
        if r.spot is Spot.ANTE:
            p.ante, p.ante_bet_id = r.stake, r.bet_id
        elif r.spot not in MAIN_SPOTS:
            p.side.setdefault(r.spot, []).append(r)
    for p in by_key.values():
        p.actions.update(actions.get(p.ante_bet_id, {}))
    return grouped(deal, ((box, p) for (_, box), p in by_key.items()))


def grouped(deal: Deal, players: Iterable[tuple[str, Group]]) -> RoundInput:
    """A round's input from each player's group on a box (its ante, bets and actions):
    groups on one box that took the same actions merged, each side spot's bets summed."""
    merged: dict[tuple[str, tuple[Action | None, ...]], Group] = {}
    for box, p in players:
        assert p.ante_bet_id, "every bet on a box hangs on an ante"
        path = tuple(map(p.actions.get, _STAGES))
        into = merged.get((box, path))
        if into is None:
            merged[(box, path)] = p
            continue
        into.ante += p.ante
        into.staked += p.staked
        into.returned += p.returned
        for spot, bets in p.side.items():
            into.side.setdefault(spot, []).extend(bets)
    boxes: dict[str, list[Group]] = {}
    for (box, _), group in merged.items():
        for spot, bets in group.side.items():
            if len(bets) > 1:
                first = bets[0]
                stake, back = sum(b.stake for b in bets), sum(b.returned for b in bets)
                group.side[spot] = [replace(first, stake=stake, returned=back)]
        boxes.setdefault(box, []).append(group)
    return RoundInput(deal, {box: tuple(groups) for box, groups in boxes.items()})


class Calculator:
    """The integrity terms of settled rounds of one pay table."""

    def __init__(self, table: PayTable, constants: DealConstants | None = None) -> None:
        """``constants``: the pay table's stored deal constants unless given (tests pass
        constants computed over a few flops, to deal from those flops only)."""
        self.table = table
        self.constants: DealConstants = constants or load_constants(table)
        self.multipliers = ante_multipliers(table)
        self._mean = [float(x) for x in self.constants.mean]
        self._cov = [[float(x) for x in row] for row in self.constants.covariance]
        self._cross = [[float(x) for x in row] for row in self.constants.cross]
        self._spots = self.constants.components
        # Each component's deal value is a return on the stake so far at the decision: one
        # ante in Casino Hold'em, ante and call in Texas Hold'em Plus; a side bet's stake.
        so_far = 1.0 if table.game is Game.CASINO_HOLDEM else 3.0
        self._bases = [so_far if s is Spot.ANTE else 1.0 for s in self._spots]
        if table.game is Game.TEXAS_HOLDEM_PLUS:
            par = load_par(table)
            self._preflop = {k: float(v) for k, v in par.preflop_ev.items()}
            self._preflop_var = {
                name: float(self.constants.preflop_second[name] - ev * ev)
                for name, ev in par.preflop_ev.items()
            }

    def round(
        self, deal: Deal, results: Sequence[BetResult], decisions: Sequence[Decision]
    ) -> Terms:
        """The terms of one settled round (one currency's bets)."""
        return self.terms(prepare(deal, results, decisions))

    def terms(self, round_: RoundInput) -> Terms:
        """The terms of one prepared round."""
        if self.table.game is Game.CASINO_HOLDEM:
            return self._ch_round(round_)
        stakes = self._stakes_by_box(round_)
        total = self._between_boxes(stakes.values())
        residuals = []
        for box, groups in round_.boxes.items():
            terms = self._thp_box(round_.deal.boxes[box], round_.deal.board, groups, stakes[box])
            total += terms
            residuals.append(terms.play_actual - terms.play_expected)
        if len(residuals) < 2:
            return total
        # sum_{i != j} T_i T_j: the boxes' covariance, estimated without bias.
        together = sum(residuals)
        covariance = together * together - sum(r * r for r in residuals)
        return replace(total, play_covariance=covariance)

    def _ch_round(self, round_: RoundInput) -> Terms:
        stakes = self._stakes_by_box(round_)
        total = self._between_boxes(stakes.values())
        deal = round_.deal
        calls = []
        for box, groups in round_.boxes.items():
            hole = deal.boxes[box]
            terms, callers, ev, variance = self._ch_box(hole, deal.board, groups, stakes[box])
            total += terms
            calls.append((hole, callers, ev, variance))
        if sum(1 for _, callers, _, _ in calls if callers) < 2:
            return total
        # Calls on several boxes: their expectation and variance given every card seen.
        others = [hole for box, hole in deal.boxes.items() if box not in round_.boxes]
        holes = [hole for hole, _, _, _ in calls] + others
        weights = [callers for _, callers, _, _ in calls] + [0] * len(others)
        mean, variance = ch_calls(self.multipliers, deal.board[:3], holes, weights)
        alone = sum(callers * ev for _, callers, ev, _ in calls)
        alone_variance = sum(callers * callers * v for _, callers, _, v in calls)
        return total + Terms(play_expected=mean - alone, play_variance=variance - alone_variance)

    # -- deal value ------------------------------------------------------------------------

    def _deal(self, per_stake: Sequence[float], w: Sequence[int]) -> Terms:
        """A box's deal value, fair mean and own variance, ``w`` its stakes per component."""
        bases = self._bases
        value = sum(w[i] * (bases[i] + v) for i, v in enumerate(per_stake))
        mean = sum(w[i] * (bases[i] + m) for i, m in enumerate(self._mean))
        return Terms(0, value, mean, _quadratic(w, self._cov))

    def _between_boxes(self, stakes: Iterable[Sequence[int]]) -> Terms:
        """A round, and the deal variance its boxes add together: ``sum_{i != j} w_i^T X w_j``
        with ``X`` the exact cross-covariance of two boxes' values on one flop."""
        vectors = list(stakes)
        if len(vectors) < 2:
            return Terms(rounds=1)
        together = [sum(column) for column in zip(*vectors, strict=True)]
        alone = sum(_quadratic(w, self._cross) for w in vectors)
        return Terms(rounds=1, deal_variance=_quadratic(together, self._cross) - alone)

    def _stakes_by_box(self, round_: RoundInput) -> dict[str, tuple[int, ...]]:
        """Per box, its stakes on each deal value component (antes, side bets)."""
        out = {}
        for box, players in round_.boxes.items():
            weights = self._weights(players)
            out[box] = tuple(weights.get(s, 0) for s in self._spots)
        return out

    @staticmethod
    def _weights(players: Sequence[Group]) -> dict[Spot, int]:
        out: dict[Spot, int] = {Spot.ANTE: sum(p.ante for p in players)}
        for p in players:
            for spot, bets in p.side.items():
                out[spot] = out.get(spot, 0) + sum(b.stake for b in bets)
        return out

    # -- Casino Hold'em --------------------------------------------------------------------

    def _ch_box(
        self,
        hole: tuple[int, int],
        board: Sequence[int],
        players: Sequence[Group],
        stakes: Sequence[int],
    ) -> tuple[Terms, int, float, float]:
        """The box's terms, the antes that called, a call's EV and variance per ante."""
        flop = board[:3]
        where = place(hole, flop)
        table = ch_flop_table(self.multipliers, where.flop)
        ev = float(table.ev[where.row]) / CH_COMPLETIONS
        variance = float(table.second[where.row]) / CH_COMPLETIONS - ev * ev
        five = evaluate([*hole, *flop])
        per_stake = [max(ev, -1.0)]
        if Spot.AA_BONUS in self._spots:
            per_stake.append(float(aa_bonus_net(self.table, five)))
        if Spot.JACKPOT in self._spots:
            per_stake.append(float(jackpot_net(self.table, five)))
        deal = self._deal(per_stake, stakes)
        callers = 0
        expected = 0.0
        actual = 0
        aa = self.table.pays(Spot.AA_BONUS, aa_bonus_line(five) or "")
        jp_line = jackpot_line(five)
        jp = self.table.pays(Spot.JACKPOT, jp_line or "")
        meter_line = self.table.jackpot is not None and jp_line in self.table.jackpot.meter_percent
        for p in players:
            actual += p.returned
            if p.actions.get(Stage.FLOP) is not Action.CALL:
                continue  # a fold returns nothing, and nothing is uncertain
            callers += p.ante
            expected += p.ante * (3.0 + ev)
            if aa:
                expected += sum(bet.stake * (1 + aa) for bet in p.side.get(Spot.AA_BONUS, ()))
            for bet in p.side.get(Spot.JACKPOT, ()):
                if meter_line:
                    expected += bet.returned  # paid from the meter, as it stood
                elif jp:
                    expected += bet.stake * (1 + jp)
        variance = max(variance, 0.0)
        play = Terms(0, 0, 0, 0, actual, expected, callers * callers * variance)
        return deal + play, callers, ev, variance

    # -- Texas Hold'em Plus ----------------------------------------------------------------

    def _thp_box(
        self,
        hole: tuple[int, int],
        board: Sequence[int],
        players: Sequence[Group],
        stakes: Sequence[int],
    ) -> Terms:
        """The box's terms: its deal value, and its play residual with its exact variance."""
        where = place(hole, board[:3])
        s = thp_situation(
            self.multipliers, where.flop, where.row, turn_index(where, hole, board[3])
        )
        v1 = max(s.flop) / _THP_FLOP
        name = hole_class(hole[0], hole[1])
        per_stake = [v1]
        plus = plus_net(self.table, hole) if Spot.PLUS in self._spots else -1
        if Spot.PLUS in self._spots:
            per_stake.append(float(plus))
        deal = self._deal(per_stake, stakes)
        q0 = self._preflop[name]
        turn_n = [turn_numerators(s.won, s.lost, s.paid, fb) for fb in (0, 1)]
        callers = 0
        flop_w = [0, 0]  # by flop bet
        turn_w: dict[tuple[int, int], int] = {}
        expected = 0.0
        actual = 0
        for p in players:
            actual += p.returned
            if plus > 0:
                expected += sum(bet.stake * (1 + plus) for bet in p.side.get(Spot.PLUS, ()))
            if p.actions.get(Stage.PREFLOP) is not Action.CALL:
                continue  # no call before the flop is a fold: the ante is lost for sure
            callers += p.ante
            net = q0  # the expectation of the decisions taken, in antes
            staked = 3
            flop = p.actions.get(Stage.FLOP, Action.CHECK)
            if flop is Action.FOLD:
                net -= v1 + 3
            else:
                fb = int(flop is Action.BET)
                staked += fb
                net -= v1 - s.flop[2 if fb else 0] / _THP_FLOP
                flop_w[fb] += p.ante
                v2 = s.after[fb]
                action = p.actions.get(Stage.TURN, Action.CHECK)
                q2 = turn_n[fb][{Action.CHECK: 0, Action.FOLD: 1, Action.BET: 2}[action]]
                net -= v2 - q2 / THP_TURN_COMPLETIONS
                if action is not Action.FOLD:
                    tb = int(action is Action.BET)
                    staked += tb
                    turn_w[(fb, tb)] = turn_w.get((fb, tb), 0) + p.ante
            expected += p.ante * (staked + net)
        w0, w1 = flop_w
        stages = (
            callers * callers * self._preflop_var[name],
            w0 * w0 * s.spread[0] + 2 * w0 * w1 * s.spread[1] + w1 * w1 * s.spread[2],
            _showdown_variance(s, turn_w),
        )
        variance = sum(max(stage, 0.0) for stage in stages)
        return deal + Terms(0, 0, 0, 0, actual, expected, variance)


def _quadratic(w: Sequence[int], matrix: Sequence[Sequence[float]]) -> float:
    """``w^T M w`` for a few components (plain floats: numpy's call costs more here)."""
    return sum(
        wi * sum(m * wj for m, wj in zip(row, w, strict=True))
        for wi, row in zip(w, matrix, strict=True)
    )


def _showdown_variance(s: ThpSituation, weights: Mapping[tuple[int, int], int]) -> float:
    """Variance of the stakes still in at the turn (by flop and turn bet), over the showdown.

    A stake that played ``p`` antes of play wagers nets ``p + m`` on a win paying ``m``,
    nothing on a tie and ``-(1 + p)`` on a loss; the sums over the wins of ``m`` and ``m^2``
    give every product of two stakes' nets, so the variance is exact, in integers until the
    last division.
    """
    total = THP_TURN_COMPLETIONS
    played = [(2 + fb + tb, w) for (fb, tb), w in weights.items()]
    first = sum(w * (p * s.won + s.paid - (1 + p) * s.lost) for p, w in played)
    second = sum(
        wg * wh * (pg * ph * s.won + (pg + ph) * s.paid + s.paid_square)
        + wg * wh * (1 + pg) * (1 + ph) * s.lost
        for pg, wg in played
        for ph, wh in played
    )
    return (total * second - first * first) / (total * total)


def calculator(table: PayTable) -> Calculator:
    """The process's calculator of a pay table (tables and constants loaded once)."""
    return _calculator(table.id, table.version)


@cache
def _calculator(paytable_id: str, version: int) -> Calculator:
    return Calculator(load_paytable(paytable_id, version))
