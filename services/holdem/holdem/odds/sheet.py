"""PAR sheet data: outcome tables with exact integer counts, and the figures they give.

Every probability is ``count / denominator`` with integers, so every figure derived here
(RTP, house edge, element of risk, hit frequency) is an exact :class:`~fractions.Fraction`;
only the standard deviation, a square root, is a float.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any


@dataclass(frozen=True)
class Line:
    """One final outcome of a wager: what it nets and how often it happens.

    ``net`` and ``stake`` are in units of the wager's base stake (antes for the base game).
    A meter line (progressive jackpot) nets ``meter_percent`` % of the meter on top of
    ``net``, the meter being counted in stakes.
    """

    name: str
    net: int
    count: int
    stake: int = 1
    meter_percent: int = 0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "net": self.net, "count": self.count}
        if self.stake != 1:
            out["stake"] = self.stake
        if self.meter_percent:
            out["meter_percent"] = self.meter_percent
        return out

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Line:
        return cls(
            name=str(raw["name"]),
            net=int(raw["net"]),
            count=int(raw["count"]),
            stake=int(raw.get("stake", 1)),
            meter_percent=int(raw.get("meter_percent", 0)),
        )


@dataclass(frozen=True)
class BetSheet:
    """The outcome table of one wager (the base game, or a side bet) on one basis.

    ``basis`` says which rounds are counted: ``"best strategy"`` (the player takes the
    highest-EV action; a side bet lost to a fold counts as lost) or ``"every hand"`` (the side
    bet judged on every deal, as if the player always called).
    """

    name: str
    basis: str
    denominator: int
    lines: tuple[Line, ...]

    def __post_init__(self) -> None:
        total = sum(line.count for line in self.lines)
        if total != self.denominator:
            raise ValueError(f"{self.name}: counts add up to {total}, not {self.denominator}")

    def probability(self, line: Line) -> Fraction:
        return Fraction(line.count, self.denominator)

    def _nets(self, meter: Fraction) -> list[tuple[Fraction, Fraction]]:
        return [
            (self.probability(ln), ln.net + Fraction(ln.meter_percent, 100) * meter)
            for ln in self.lines
        ]

    def ev(self, meter: Fraction = Fraction(0)) -> Fraction:
        """Expected net win per base stake; ``meter`` is the jackpot meter in stakes."""
        return sum((p * net for p, net in self._nets(meter)), Fraction(0))

    def rtp(self, meter: Fraction = Fraction(0)) -> Fraction:
        """Return to player per base stake (1 + EV)."""
        return 1 + self.ev(meter)

    def house_edge(self, meter: Fraction = Fraction(0)) -> Fraction:
        """What the house keeps per base stake (-EV)."""
        return -self.ev(meter)

    def break_even_meter(self) -> Fraction | None:
        """The meter (in stakes) at which the RTP reaches 100%, for a bet with meter lines."""
        slope = sum(
            (self.probability(ln) * Fraction(ln.meter_percent, 100) for ln in self.lines),
            Fraction(0),
        )
        return -self.ev() / slope if slope else None

    @property
    def average_stake(self) -> Fraction:
        """Average total staked per round, in base stakes."""
        return sum((self.probability(ln) * ln.stake for ln in self.lines), Fraction(0))

    def element_of_risk(self, meter: Fraction = Fraction(0)) -> Fraction:
        """The house edge per unit of total stake."""
        return self.house_edge(meter) / self.average_stake

    def hit_frequency(self) -> Fraction:
        """How often the wager nets a win."""
        return sum(
            (self.probability(ln) for ln in self.lines if ln.net > 0 or ln.meter_percent),
            Fraction(0),
        )

    def variance(self, meter: Fraction = Fraction(0)) -> Fraction:
        nets = self._nets(meter)
        mean = sum((p * v for p, v in nets), Fraction(0))
        return sum((p * (v - mean) ** 2 for p, v in nets), Fraction(0))

    def std_dev(self, meter: Fraction = Fraction(0)) -> float:
        """Standard deviation of the net win per round, in base stakes."""
        return math.sqrt(self.variance(meter))

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "basis": self.basis,
            "denominator": self.denominator,
            "lines": [line.to_json() for line in self.lines],
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> BetSheet:
        return cls(
            name=str(raw["name"]),
            basis=str(raw["basis"]),
            denominator=int(raw["denominator"]),
            lines=tuple(Line.from_json(x) for x in raw["lines"]),
        )


@dataclass(frozen=True)
class DecisionSheet:
    """How often each action is taken at one decision, among the rounds that reach it.

    ``reached`` and ``counts`` are in the units of ``total`` (all rounds), so
    ``reached / total`` is how often the decision comes up at all.
    """

    stage: str
    counts: Mapping[str, int]
    reached: int
    total: int

    def __post_init__(self) -> None:
        if sum(self.counts.values()) != self.reached:
            raise ValueError(f"{self.stage}: action counts do not add up to {self.reached}")

    def probability(self, action: str) -> Fraction:
        """The chance of ``action`` when the decision comes up."""
        return Fraction(self.counts[action], self.reached) if self.reached else Fraction(0)

    def to_json(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "counts": dict(self.counts),
            "reached": self.reached,
            "total": self.total,
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> DecisionSheet:
        return cls(
            stage=str(raw["stage"]),
            counts={str(k): int(v) for k, v in raw["counts"].items()},
            reached=int(raw["reached"]),
            total=int(raw["total"]),
        )


@dataclass(frozen=True)
class ParSheet:
    """The PAR sheet of one pay table version, for the best strategy."""

    paytable_id: str
    version: int
    content_hash: str
    game: str
    base: BetSheet
    decisions: tuple[DecisionSheet, ...]
    side_bets: tuple[BetSheet, ...] = ()
    #: Texas Hold'em Plus: EV of CALL before the flop per hole class, as "num/den" antes.
    preflop_ev: Mapping[str, Fraction] = field(default_factory=dict)
    #: Jackpot: the meter level (in stakes) the figures are quoted at, if there is one.
    jackpot_meter: Fraction | None = None
    #: The strategy's EV per ante, summed from each decision's best EV (not from the outcome
    #: table): the self-check is that the two agree.
    strategy_ev: Fraction | None = None

    def __post_init__(self) -> None:
        if self.strategy_ev is not None and self.strategy_ev != self.base.ev():
            raise ValueError(
                f"{self.paytable_id}: the strategy's EV {self.strategy_ev} is not the outcome "
                f"table's mean {self.base.ev()}"
            )

    def side_bet(self, name: str, basis: str) -> BetSheet:
        for sheet in self.side_bets:
            if sheet.name == name and sheet.basis == basis:
                return sheet
        raise KeyError(f"no side bet {name!r} on basis {basis!r}")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "paytable": {
                "id": self.paytable_id,
                "version": self.version,
                "content_hash": self.content_hash,
            },
            "game": self.game,
            "base": self.base.to_json(),
            "decisions": [d.to_json() for d in self.decisions],
            "side_bets": [s.to_json() for s in self.side_bets],
        }
        if self.preflop_ev:
            out["preflop_ev"] = {k: str(v) for k, v in self.preflop_ev.items()}
        if self.jackpot_meter is not None:
            out["jackpot_meter"] = str(self.jackpot_meter)
        if self.strategy_ev is not None:
            out["strategy_ev"] = str(self.strategy_ev)
        return out

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> ParSheet:
        meter = raw.get("jackpot_meter")
        return cls(
            paytable_id=str(raw["paytable"]["id"]),
            version=int(raw["paytable"]["version"]),
            content_hash=str(raw["paytable"]["content_hash"]),
            game=str(raw["game"]),
            base=BetSheet.from_json(raw["base"]),
            decisions=tuple(DecisionSheet.from_json(d) for d in raw["decisions"]),
            side_bets=tuple(BetSheet.from_json(s) for s in raw["side_bets"]),
            preflop_ev={k: Fraction(v) for k, v in raw.get("preflop_ev", {}).items()},
            jackpot_meter=Fraction(meter) if meter is not None else None,
            strategy_ev=Fraction(raw["strategy_ev"]) if "strategy_ev" in raw else None,
        )


def percent(x: Fraction, places: int = 4) -> str:
    """A fraction as a percentage with ``places`` decimals, rounded half up."""
    scaled = x * 100 * 10**places
    sign = "-" if scaled < 0 else ""
    q = (abs(scaled) * 2 + 1) // 2
    whole, frac = divmod(int(q), 10**places)
    return f"{sign}{whole}.{frac:0{places}d}%" if places else f"{sign}{whole}%"
