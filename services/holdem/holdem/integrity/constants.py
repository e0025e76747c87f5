"""The deal value's exact mean and covariance per pay table, by full enumeration.

The deal value of a box is a vector of per-stake values, one per wager kind, all functions
of the cards alone:

- Casino Hold'em: ``ante`` = the best flop decision's EV (call, or fold at -1 ante) given the
  hole and the flop; ``aa_bonus`` and ``jackpot`` = the side bet's net per stake judged on
  hole + flop (the "every hand" basis; a jackpot meter line at the PAR sheet's model meter,
  the seed plus one stake's contribution).
- Texas Hold'em Plus: ``ante`` = the best flop decision's EV given the hole and the flop,
  counted from the preflop call (check or bet with best play after, or fold at -3 antes);
  ``plus`` = the PLUS bet's net per stake on the hole.

Over every (hole, flop) of a fair deck (1,326 x 19,600, flops taken up to suits with their
orbit sizes) their means and covariances are exact fractions, stored beside the PAR data in
``holdem/integrity/<pay table file stem>.json`` (``croupier par --all --write``). Texas
Hold'em Plus also keeps, per hole class, the second moment of the best flop value: the
preflop stage's conditional variance.

Boxes of one round share the flop, so card removal correlates their deal values. The
cross-covariance (one box's vector against another's, two disjoint holes on one flop) is
exact too: per flop, over the ordered pairs of disjoint holes, ``sum V_h V_g^T`` is
``T T^T - sum_c S_c S_c^T + V^T V`` (``T`` the sum of every hole's vector, ``S_c`` the sum
over holes holding card ``c``; a hole shares two cards with itself), in integers.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from importlib import resources
from pathlib import Path
from typing import Any, Final

import numpy as np

from holdem.casino_holdem import aa_bonus_line, jackpot_line
from holdem.evaluator import Category, HandValue, evaluate
from holdem.odds.combos import canonical_flops, class_size, hole_class_table, hole_classes, pairs
from holdem.odds.engine import casino_holdem_flop_all, thp_flop_all
from holdem.odds.situation import (
    CH_COMPLETIONS,
    THP_TURN_COMPLETIONS,
    THP_TURNS,
    ante_multipliers,
    ch_call_numerator,
    thp_flop_numerators,
)
from holdem.paytable import Game, PayTable, PayTableError, Spot
from holdem.texas_holdem_plus import plus_line

THP_FLOP_COMPLETIONS: Final = THP_TURNS * THP_TURN_COMPLETIONS
SITUATIONS: Final = 1326 * 19600
#: Holes disjoint from one hole on a flop: C(47, 2).
OTHER_HOLES: Final = 1081
Progress = Callable[[int, int], None]
#: Five-card keys: the category (0..9), and a pair of aces apart as 10.
FIVE_KEYS: Final = 11
PAIR_OF_ACES: Final = 10


class DealConstantsError(ValueError):
    """Stored deal constants that are missing or computed for other pay table content."""


def five_key(value: HandValue) -> int:
    """The five-card key of hole + flop: its category, a pair of aces apart."""
    if value.category is Category.PAIR and value.ranks[0] == 14:
        return PAIR_OF_ACES
    return int(value.category)


def jackpot_model_meter(table: PayTable) -> Fraction:
    """The PAR sheet's jackpot model: the meter (in stakes) a meter line is valued at."""
    jp = table.jackpot
    if jp is None:
        raise PayTableError(f"pay table {table.id} has no jackpot")
    return Fraction(jp.seed + jp.contribution(jp.stake), jp.stake)


def aa_bonus_net(table: PayTable, five: HandValue) -> int:
    """The AA bonus's net per stake on hole + flop, as if the player called."""
    line = aa_bonus_line(five)
    multiplier = table.pays(Spot.AA_BONUS, line) if line else None
    return -1 if multiplier is None else multiplier


def jackpot_net(table: PayTable, five: HandValue) -> Fraction:
    """The jackpot's net per stake on hole + flop, meter lines at the model meter."""
    assert table.jackpot is not None
    line = jackpot_line(five)
    if line is not None and line in table.jackpot.meter_percent:
        return Fraction(table.jackpot.meter_percent[line], 100) * jackpot_model_meter(table)
    multiplier = table.pays(Spot.JACKPOT, line) if line else None
    return Fraction(-1 if multiplier is None else multiplier)


def plus_net(table: PayTable, hole: tuple[int, int]) -> int:
    """The PLUS bet's net per stake on the hole cards."""
    line = plus_line(hole)
    multiplier = table.pays(Spot.PLUS, line) if line else None
    return -1 if multiplier is None else multiplier


def components(table: PayTable) -> tuple[Spot, ...]:
    """The wager kinds a deal value of this pay table is made of, the ante first."""
    side = (Spot.AA_BONUS, Spot.JACKPOT, Spot.PLUS)
    return (Spot.ANTE, *(s for s in side if table.offers(s)))


@dataclass(frozen=True)
class DealConstants:
    """Exact mean and covariance of the per-stake deal value vector of one pay table."""

    paytable_id: str
    version: int
    content_hash: str
    components: tuple[Spot, ...]
    mean: tuple[Fraction, ...]
    covariance: tuple[tuple[Fraction, ...], ...]
    #: Texas Hold'em Plus: E[best flop value squared | hole class], in antes squared.
    preflop_second: Mapping[str, Fraction]
    #: Covariance of one box's vector with another's on the same flop (disjoint holes).
    cross: tuple[tuple[Fraction, ...], ...]

    def __post_init__(self) -> None:
        n = len(self.components)
        assert len(self.mean) == n
        assert all(len(row) == n for row in (*self.covariance, *self.cross))
        assert len(self.covariance) == len(self.cross) == n
        for i in range(n):
            assert self.covariance[i][i] >= 0, "a variance is never negative"
            # var(v_i - v'_i) = 2 (C_ii - X_ii) of two boxes' values is never negative either.
            assert self.cross[i][i] <= self.covariance[i][i], "boxes correlate at most fully"
            for j in range(i):
                assert self.covariance[i][j] == self.covariance[j][i], "covariance is symmetric"
                assert self.cross[i][j] == self.cross[j][i], "two boxes are exchangeable"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "paytable": {
                "id": self.paytable_id,
                "version": self.version,
                "content_hash": self.content_hash,
            },
            "components": [str(c) for c in self.components],
            "mean": [str(x) for x in self.mean],
            "covariance": [[str(x) for x in row] for row in self.covariance],
            "cross_covariance": [[str(x) for x in row] for row in self.cross],
        }
        if self.preflop_second:
            out["preflop_second"] = {k: str(v) for k, v in self.preflop_second.items()}
        return out

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> DealConstants:
        return cls(
            paytable_id=str(raw["paytable"]["id"]),
            version=int(raw["paytable"]["version"]),
            content_hash=str(raw["paytable"]["content_hash"]),
            components=tuple(Spot(c) for c in raw["components"]),
            mean=tuple(Fraction(x) for x in raw["mean"]),
            covariance=tuple(tuple(Fraction(x) for x in row) for row in raw["covariance"]),
            preflop_second={k: Fraction(v) for k, v in raw.get("preflop_second", {}).items()},
            cross=tuple(tuple(Fraction(x) for x in row) for row in raw["cross_covariance"]),
        )


# --- computing ------------------------------------------------------------------------------


def _holes(flop: tuple[int, int, int]) -> np.ndarray:
    remaining = np.array(sorted(set(range(52)) - set(flop)), dtype=np.int64)
    return remaining[pairs(49)]


def disjoint_moment(values: np.ndarray) -> np.ndarray:
    """``sum V_h V_g^T`` over the ordered pairs of disjoint holes of one flop, exactly.

    ``values`` holds an integer row per hole, in the order of ``pairs(49)``; the result is a
    matrix of Python integers (the products pass 2**63).
    """
    positions = pairs(49)
    assert values.shape[0] == len(positions) and values.dtype == np.int64
    by_card = np.zeros((49, values.shape[1]), dtype=np.int64)
    np.add.at(by_card, positions[:, 0], values)
    np.add.at(by_card, positions[:, 1], values)
    exact, by_card_exact = values.astype(object), by_card.astype(object)
    total = exact.sum(axis=0)
    moment: np.ndarray = np.outer(total, total) - by_card_exact.T @ by_card_exact + exact.T @ exact
    assert (moment == moment.T).all(), "ordered pairs: the moment is symmetric"
    return moment


def _ch_job(flop: tuple[int, int, int], multipliers: Sequence[tuple[int, ...]]) -> list[Any]:
    """Per ante table: per five-key situation counts and deal numerator sums, the sum of
    squares, and the disjoint-pair moment of (deal numerator, five-key indicators)."""
    counts = casino_holdem_flop_all(flop)
    holes = _holes(flop)
    keys = np.array([five_key(evaluate([int(a), int(b), *flop])) for a, b in holes])
    indicators = np.eye(FIVE_KEYS, dtype=np.int64)[keys]
    out = []
    for m in multipliers:
        ev = ch_call_numerator(counts.no_qualify, counts.wins, counts.losses, m)
        deal = np.maximum(ev, -CH_COMPLETIONS).astype(np.int64)
        per_key = np.bincount(keys, weights=deal, minlength=FIVE_KEYS)  # exact below 2**53
        square = sum(int(x) * int(x) for x in deal)
        pair = disjoint_moment(np.column_stack([deal, indicators]))
        out.append((np.bincount(keys, minlength=FIVE_KEYS), per_key, square, pair))
    return out


def _thp_job(
    flop: tuple[int, int, int], multipliers: tuple[int, ...], plus: np.ndarray
) -> tuple[Any, Any, Any]:
    """Per hole class: sum of the best flop numerator and of its square; and the
    disjoint-pair moment of (best flop numerator, PLUS net) (``plus``: per hole class)."""
    counts = thp_flop_all(flop)
    flop_n, _, _ = thp_flop_numerators(counts.wins, counts.losses, multipliers)
    best = flop_n.max(axis=1).astype(np.int64)
    holes = _holes(flop)
    classes = hole_class_table()[holes[:, 0], holes[:, 1]]
    n = len(hole_classes())
    first = [0] * n
    second = [0] * n
    for c, v in zip(classes.tolist(), best.tolist(), strict=True):
        first[c] += v
        second[c] += v * v
    return first, second, disjoint_moment(np.column_stack([best, plus[classes]]))


def _covariance(
    probability: Sequence[Fraction], values: Sequence[Sequence[Fraction]], extra: Any = None
) -> tuple[tuple[Fraction, ...], tuple[tuple[Fraction, ...], ...]]:
    """Mean and covariance of value vectors taken with the given probabilities."""
    n = len(values[0])
    mean = tuple(sum((p * v[i] for p, v in zip(probability, values, strict=True)), Fraction(0))
                 for i in range(n))  # fmt: skip
    cov = tuple(
        tuple(
            sum((p * v[i] * v[j] for p, v in zip(probability, values, strict=True)), Fraction(0))
            - mean[i] * mean[j]
            for j in range(n)
        )
        for i in range(n)
    )
    return mean, cov


def compute_constants(
    tables: Sequence[PayTable],
    progress: Progress | None = None,
    flops: Sequence[tuple[tuple[int, int, int], int]] | None = None,
) -> list[DealConstants]:
    """Deal constants of pay tables of one game, in one pass over the (canonical) flops.

    ``flops`` (flop, weight) restricts the pass, for tests.
    """
    if len({t.game for t in tables}) != 1:
        raise PayTableError("compute_constants takes pay tables of one game at a time")
    chosen = list(flops) if flops is not None else list(canonical_flops())
    if tables[0].game is Game.CASINO_HOLDEM:
        return _ch_constants(tables, chosen, progress)
    return [_thp_constants(t, chosen, progress) for t in tables]


def _ch_constants(
    tables: Sequence[PayTable],
    flops: Sequence[tuple[tuple[int, int, int], int]],
    progress: Progress | None,
) -> list[DealConstants]:
    multipliers = [ante_multipliers(t) for t in tables]
    counts = [[0] * FIVE_KEYS for _ in tables]
    sums = [[0] * FIVE_KEYS for _ in tables]
    squares = [0 for _ in tables]
    moments: list[Any] = [0 for _ in tables]
    for done, (flop, weight) in enumerate(flops, 1):
        for i, (n, per_key, square, pair) in enumerate(_ch_job(flop, multipliers)):
            for k in range(FIVE_KEYS):
                counts[i][k] += weight * int(n[k])
                sums[i][k] += weight * int(per_key[k])
            squares[i] += weight * square
            moments[i] = moments[i] + weight * pair
        if progress:
            progress(done, len(flops))
    out = []
    examples = _five_examples()
    for i, table in enumerate(tables):
        total = sum(counts[i])
        spots = components(table)
        # Per five-key: the deal's conditional mean, and each side bet's fixed value.
        probability = [Fraction(counts[i][k], total) for k in range(FIVE_KEYS)]
        rows = []
        for k in range(FIVE_KEYS):
            deal = Fraction(sums[i][k], counts[i][k] * CH_COMPLETIONS) if counts[i][k] else 0
            row = [Fraction(deal)]
            if Spot.AA_BONUS in spots:
                row.append(Fraction(aa_bonus_net(table, examples[k])))
            if Spot.JACKPOT in spots:
                row.append(jackpot_net(table, examples[k]))
            rows.append(row)
        mean, cov = _covariance(probability, rows)
        # The ante's own variance needs the sum of squares, not the per-key means.
        second = Fraction(squares[i], total * CH_COMPLETIONS**2)
        cov = _with_variance(cov, 0, second - mean[0] ** 2)
        # The pair moment's coordinates: the deal numerator, then the five-key indicators.
        scale = [[Fraction(1, CH_COMPLETIONS)] + [Fraction(0)] * FIVE_KEYS]
        scale += [[Fraction(0)] + [Fraction(r[j]) for r in rows] for j in range(1, len(spots))]
        cross = _cross(moments[i], scale, mean, total)
        out.append(_constants(table, spots, mean, cov, {}, cross))
    return out


def _thp_constants(
    table: PayTable, flops: Sequence[tuple[tuple[int, int, int], int]], progress: Progress | None
) -> DealConstants:
    names = hole_classes()
    first = [0] * len(names)
    second = [0] * len(names)
    units = [0] * len(names)
    multipliers = ante_multipliers(table)
    plus = np.array([plus_net(table, _class_example(name)) for name in names], dtype=np.int64)
    moment: Any = 0
    for done, (flop, weight) in enumerate(flops, 1):
        f, s, pair = _thp_job(flop, multipliers, plus)
        moment = moment + weight * pair
        for c in range(len(names)):
            first[c] += weight * f[c]
            second[c] += weight * s[c]
        holes = _holes(flop)
        for c in hole_class_table()[holes[:, 0], holes[:, 1]].tolist():
            units[c] += weight
        if progress:
            progress(done, len(flops))
    total = sum(units)
    spots = components(table)
    probability, rows, preflop_second = [], [], {}
    squares = Fraction(0)
    for c, name in enumerate(names):
        if not units[c]:
            continue
        probability.append(Fraction(units[c], total))
        row = [Fraction(first[c], units[c] * THP_FLOP_COMPLETIONS)]
        if Spot.PLUS in spots:
            row.append(Fraction(plus_net(table, _class_example(name))))
        rows.append(row)
        preflop_second[name] = Fraction(second[c], units[c] * THP_FLOP_COMPLETIONS**2)
        squares += Fraction(units[c], total) * preflop_second[name]
    mean, cov = _covariance(probability, rows)
    cov = _with_variance(cov, 0, squares - mean[0] ** 2)
    # The pair moment's coordinates: the best flop numerator, then the PLUS net.
    scale = [[Fraction(1, THP_FLOP_COMPLETIONS), Fraction(0)], [Fraction(0), Fraction(1)]]
    cross = _cross(moment, scale[: len(spots)], mean, total)
    return _constants(table, spots, mean, cov, preflop_second, cross)


def _cross(
    moment: Any, scale: Sequence[Sequence[Fraction]], mean: Sequence[Fraction], holes: int
) -> tuple[tuple[Fraction, ...], ...]:
    """Two boxes' cross-covariance from the disjoint-pair moment summed over the flops.

    ``scale`` maps the moment's integer coordinates to the components; ``holes`` counts the
    (hole, flop) situations, each with C(47, 2) disjoint others.
    """
    pairs_total = holes * OTHER_HOLES
    n = len(scale)
    size = len(scale[0])
    return tuple(
        tuple(
            sum(
                (scale[i][a] * scale[j][b] * int(moment[a][b])
                 for a in range(size) for b in range(size)
                 if scale[i][a] and scale[j][b]),
                Fraction(0),
            ) / pairs_total
            - mean[i] * mean[j]
            for j in range(n)
        )
        for i in range(n)
    )  # fmt: skip


def _with_variance(
    cov: tuple[tuple[Fraction, ...], ...], i: int, variance: Fraction
) -> tuple[tuple[Fraction, ...], ...]:
    rows = [list(r) for r in cov]
    rows[i][i] = variance
    return tuple(tuple(r) for r in rows)


def _constants(
    table: PayTable,
    spots: tuple[Spot, ...],
    mean: tuple[Fraction, ...],
    cov: tuple[tuple[Fraction, ...], ...],
    preflop_second: Mapping[str, Fraction],
    cross: tuple[tuple[Fraction, ...], ...],
) -> DealConstants:
    return DealConstants(
        table.id, table.version, table.content_hash, spots, mean, cov, dict(preflop_second), cross
    )


def _five_examples() -> dict[int, HandValue]:
    hands = {
        0: [51, 45, 38, 29, 0], 1: [0, 1, 51, 45, 38], 2: [0, 1, 4, 5, 51],
        3: [0, 1, 2, 51, 45], 4: [0, 5, 10, 15, 17], 5: [0, 4, 8, 12, 20],
        6: [0, 1, 2, 4, 5], 7: [0, 1, 2, 3, 51], 8: [0, 4, 8, 12, 16],
        9: [35, 39, 43, 47, 51], 10: [48, 49, 0, 5, 10],
    }  # fmt: skip
    out = {k: evaluate(cards) for k, cards in hands.items()}
    assert all(five_key(v) == k for k, v in out.items())
    return out


def _class_example(name: str) -> tuple[int, int]:
    ranks = "23456789TJQKA"
    hi, lo = ranks.index(name[0]) * 4, ranks.index(name[1]) * 4
    if len(name) == 2:
        return hi, lo + 1
    return (hi, lo) if name.endswith("s") else (hi, lo + 1)


assert class_size("AKs") == 4  # the class names this module parses


# --- stored data ------------------------------------------------------------------------------


def constants_file_name(table: PayTable) -> str:
    """The stored deal constants of a pay table version: its pay table file's name."""
    return f"{table.id.replace('/', '--')}--v{table.version}.json"


def constants_directory() -> Path:
    """Where the deal constants live in the source tree (for writing)."""
    return Path(__file__).resolve().parent / "data"


def dump_constants(constants: DealConstants) -> str:
    """The stored form of deal constants."""
    return json.dumps(constants.to_json(), indent=1) + "\n"


def parse_constants(raw: str, table: PayTable) -> DealConstants:
    """Stored deal constants, checked against the pay table they claim to be for."""
    constants = DealConstants.from_json(json.loads(raw))
    if (constants.paytable_id, constants.version, constants.content_hash) != (
        table.id,
        table.version,
        table.content_hash,
    ):
        raise DealConstantsError(
            f"deal constants for {constants.paytable_id} v{constants.version} "
            f"({constants.content_hash}) do not match {table.id} v{table.version} "
            f"({table.content_hash}): run `make par`"
        )
    if constants.components != components(table):
        raise DealConstantsError(f"deal constants of {table.id} have other components")
    return constants


def load_constants(table: PayTable) -> DealConstants:
    """The stored deal constants of a pay table version."""
    entry = resources.files("holdem.integrity") / "data" / constants_file_name(table)
    if not entry.is_file():
        raise DealConstantsError(f"no stored deal constants for {table.id}: run `make par`")
    return parse_constants(entry.read_text(encoding="utf-8"), table)
