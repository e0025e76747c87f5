"""Pay tables: versioned data files in ``holdem/paytables/``, validated when loaded.

Every multiplier is "to 1": a line paying 7 returns the stake plus seven stakes. A pay table's
content hash (sha256 of its canonical JSON) lets a settled round record exactly what it used.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import Any, Final


class Game(StrEnum):
    """The games Croupier settles."""

    CASINO_HOLDEM = "casino_holdem"
    TEXAS_HOLDEM_PLUS = "texas_holdem_plus"


class Spot(StrEnum):
    """Where a wager sits on the layout."""

    ANTE = "ante"
    AA_BONUS = "aa_bonus"
    JACKPOT = "jackpot"
    PLUS = "plus"
    CALL = "call"
    FLOP_BET = "flop_bet"
    TURN_BET = "turn_bet"


CATEGORY_LINES: Final = (
    "royal_flush", "straight_flush", "four_of_a_kind", "full_house", "flush",
    "straight", "three_of_a_kind", "two_pair", "pair", "high_card",
)  # fmt: skip
PLUS_LINES: Final = (
    "pair_of_aces", "ace_king_suited", "ace_queen_or_jack_suited", "ace_king_offsuit",
    "pair_of_jacks_to_kings", "ace_queen_or_jack_offsuit", "pair_of_twos_to_tens",
)  # fmt: skip
_LINES: Final[Mapping[Spot, frozenset[str]]] = {
    Spot.ANTE: frozenset(CATEGORY_LINES),
    Spot.AA_BONUS: frozenset(CATEGORY_LINES[:-2]) | {"pair_of_aces"},
    Spot.JACKPOT: frozenset(CATEGORY_LINES[2:5]),
    Spot.PLUS: frozenset(PLUS_LINES),
    Spot.CALL: frozenset({"win"}),
    Spot.FLOP_BET: frozenset({"win"}),
    Spot.TURN_BET: frozenset({"win"}),
}
_SPOTS: Final[Mapping[Game, tuple[frozenset[Spot], frozenset[Spot]]]] = {
    # game: (spots it must have, spots it may have)
    Game.CASINO_HOLDEM: (
        frozenset({Spot.ANTE, Spot.CALL}),
        frozenset({Spot.AA_BONUS, Spot.JACKPOT}),
    ),
    Game.TEXAS_HOLDEM_PLUS: (
        frozenset({Spot.ANTE, Spot.CALL, Spot.FLOP_BET, Spot.TURN_BET}),
        frozenset({Spot.PLUS}),
    ),
}
#: Play wagers: fixed multiples of the ante, so their limits follow the ante's.
PLAY_WAGERS: Final = {Spot.CALL: 2, Spot.FLOP_BET: 1, Spot.TURN_BET: 1}


class PayTableError(ValueError):
    """A pay table file that is not valid, or a pay table that does not exist."""


@dataclass(frozen=True)
class StakeLimit:
    """Inclusive stake limits of one spot, in minor units."""

    min: int
    max: int

    def admits(self, amount: int) -> bool:
        """Whether a stake of ``amount`` is within the limits."""
        return self.min <= amount <= self.max


@dataclass(frozen=True)
class Jackpot:
    """The progressive jackpot: a fixed stake, a meter, and lines paid as a share of it."""

    stake: int
    meter_share_percent: int
    seed: int
    meter_percent: Mapping[str, int]

    def contribution(self, stakes: int) -> int:
        """What ``stakes`` (a sum of jackpot stakes) feed into the meter, rounded down."""
        return stakes * self.meter_share_percent // 100


@dataclass(frozen=True)
class PayTable:
    """One version of one pay table."""

    id: str
    version: int
    game: Game
    title: str
    spots: Mapping[Spot, Mapping[str, int]]
    limits: Mapping[Spot, StakeLimit]
    jackpot: Jackpot | None
    content_hash: str = field(repr=False)

    def pays(self, spot: Spot, line: str) -> int | None:
        """The multiplier of a line ("to 1"), or None when the line pays nothing."""
        return self.spots.get(spot, {}).get(line)

    def offers(self, spot: Spot) -> bool:
        """Whether players may stake on this spot."""
        return spot in self.spots

    def limit(self, spot: Spot) -> StakeLimit | None:
        """The stake limits of a spot that players stake directly."""
        return self.limits.get(spot)


def _fail(source: str, problem: str) -> PayTableError:
    return PayTableError(f"pay table {source}: {problem}")


def _positive_int(source: str, where: str, value: Any) -> int:
    if type(value) is not int or value <= 0:
        raise _fail(source, f"{where} must be a positive integer, got {value!r}")
    return value


def _spot_lines(source: str, spot: Spot, lines: Any) -> Mapping[str, int]:
    if not isinstance(lines, dict) or not lines:
        raise _fail(source, f"spots.{spot} must map pay lines to multipliers")
    unknown = set(lines) - _LINES[spot]
    if unknown:
        raise _fail(source, f"spots.{spot} has unknown lines {sorted(unknown)}")
    return MappingProxyType(
        {line: _positive_int(source, f"spots.{spot}.{line}", m) for line, m in lines.items()}
    )


def _jackpot(source: str, raw: Any) -> Jackpot:
    if not isinstance(raw, dict) or set(raw) != {
        "stake",
        "meter_share_percent",
        "seed",
        "meter_percent",
    }:
        raise _fail(source, "jackpot needs exactly stake, meter_share_percent, seed, meter_percent")
    share = raw["meter_share_percent"]
    if type(share) is not int or not 0 <= share <= 100:
        raise _fail(source, f"jackpot.meter_share_percent must be 0..100, got {share!r}")
    lines = raw["meter_percent"]
    if not isinstance(lines, dict) or set(lines) - {"royal_flush", "straight_flush"}:
        raise _fail(source, "jackpot.meter_percent pays only royal_flush and straight_flush")
    percents = {
        line: _positive_int(source, f"jackpot.meter_percent.{line}", p) for line, p in lines.items()
    }
    if any(p > 100 for p in percents.values()):
        raise _fail(source, "jackpot.meter_percent lines are at most 100")
    return Jackpot(
        stake=_positive_int(source, "jackpot.stake", raw["stake"]),
        meter_share_percent=share,
        seed=_positive_int(source, "jackpot.seed", raw["seed"]),
        meter_percent=MappingProxyType(percents),
    )


def parse_paytable(raw: Mapping[str, Any], source: str = "<data>") -> PayTable:
    """Validate one pay table document and return it with its content hash."""
    expected = {"id", "version", "game", "title", "sources", "spots", "limits"}
    keys = set(raw)
    if not expected <= keys or keys - expected - {"jackpot"}:
        raise _fail(source, f"needs the fields {sorted(expected)} (and jackpot if it has one)")
    try:
        game = Game(raw["game"])
        spots = {Spot(name): lines for name, lines in raw["spots"].items()}
        limits = {Spot(name): limit for name, limit in raw["limits"].items()}
    except (ValueError, AttributeError) as error:
        raise _fail(source, str(error)) from None
    required, optional = _SPOTS[game]
    if not required <= set(spots) or set(spots) - required - optional:
        raise _fail(source, f"{game} needs spots {sorted(required)}, may have {sorted(optional)}")
    has_jackpot = Spot.JACKPOT in spots
    if has_jackpot != ("jackpot" in raw):
        raise _fail(source, "a jackpot spot and a jackpot section go together")
    table = PayTable(
        id=str(raw["id"]),
        version=_positive_int(source, "version", raw["version"]),
        game=game,
        title=str(raw["title"]),
        spots=MappingProxyType({s: _spot_lines(source, s, lines) for s, lines in spots.items()}),
        limits=MappingProxyType(_limits(source, limits, set(spots))),
        jackpot=_jackpot(source, raw["jackpot"]) if has_jackpot else None,
        content_hash=content_hash(raw),
    )
    if table.jackpot and not table.limits[Spot.JACKPOT].admits(table.jackpot.stake):
        raise _fail(source, "the jackpot's fixed stake is outside its limits")
    # A Casino Hold'em ante is paid by the player's final hand whenever the player is not
    # beaten (a dealer who does not qualify pays it on any hand), so every category needs a line.
    missing = [line for line in CATEGORY_LINES if line not in table.spots[Spot.ANTE]]
    if game is Game.CASINO_HOLDEM and missing:
        raise _fail(source, f"a Casino Hold'em ante table must pay every hand; it lacks {missing}")
    return table


def _limits(source: str, limits: Mapping[Spot, Any], spots: set[Spot]) -> dict[Spot, StakeLimit]:
    staked = spots - set(PLAY_WAGERS)
    if set(limits) != staked:
        raise _fail(source, f"limits must cover exactly the spots players stake: {sorted(staked)}")
    out = {}
    for spot, limit in limits.items():
        if not isinstance(limit, dict) or set(limit) != {"min", "max"}:
            raise _fail(source, f"limits.{spot} needs min and max")
        low = _positive_int(source, f"limits.{spot}.min", limit["min"])
        high = _positive_int(source, f"limits.{spot}.max", limit["max"])
        if low > high:
            raise _fail(source, f"limits.{spot}: min {low} is above max {high}")
        out[spot] = StakeLimit(low, high)
    return out


def content_hash(raw: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of a pay table document."""
    canonical = json.dumps(raw, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def _file_name(paytable_id: str, version: int) -> str:
    return f"{paytable_id.replace('/', '--')}--v{version}.json"


@cache
def _catalogue() -> Mapping[str, Mapping[int, PayTable]]:
    found: dict[str, dict[int, PayTable]] = {}
    for entry in resources.files("holdem.paytables").iterdir():
        if not entry.name.endswith(".json"):
            continue
        table = parse_paytable(json.loads(entry.read_text(encoding="utf-8")), entry.name)
        if entry.name != _file_name(table.id, table.version):
            raise _fail(entry.name, f"file name must be {_file_name(table.id, table.version)}")
        found.setdefault(table.id, {})[table.version] = table
    return found


def paytable_ids() -> list[str]:
    """Every pay table id the package ships."""
    return sorted(_catalogue())


def short_name(paytable_id: str) -> str:
    """A pay table's short name, e.g. ``"classic"`` for ``casino-holdem/classic``."""
    return paytable_id.rsplit("/", 1)[-1]


def resolve_paytable(name: str) -> str:
    """A pay table id from its id or short name (``classic``, ``royal-20``, ``standard``...)."""
    if name in paytable_ids():
        return name
    matches = [pid for pid in paytable_ids() if short_name(pid) == name]
    if len(matches) != 1:
        raise PayTableError(f"unknown pay table {name!r}; known: {paytable_ids()}")
    return matches[0]


def load_paytable(paytable_id: str, version: int | None = None) -> PayTable:
    """A shipped pay table: the given version, or the newest."""
    versions = _catalogue().get(paytable_id)
    if not versions:
        raise PayTableError(f"unknown pay table {paytable_id!r}; known: {paytable_ids()}")
    if version is None:
        return versions[max(versions)]
    if version not in versions:
        raise PayTableError(f"pay table {paytable_id!r} has no version {version}")
    return versions[version]
