"""What the studio plays: its tables, players, strategy and the faults it injects."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime

from holdem import paytable_ids
from holdem.paytable import PayTableError, resolve_paytable, short_name

MAX_BOXES = 7
MAX_SHARED_PLAYERS = 100_000
DEFAULT_START = datetime(2024, 5, 1, 20, 0, tzinfo=UTC)
_TABLE_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class ConfigError(ValueError):
    """A studio configuration that cannot be played."""


@dataclass(frozen=True)
class TableSpec:
    """One table: its id, pay table and seating.

    ``boxes`` None: one shared live hand (box ``"main"``) that ``players`` players bet on.
    ``boxes`` 1..7: that many boxes, each played in a round by one of ``players`` players
    (fewer players than boxes puts some players on several boxes).
    """

    table_id: str
    paytable: str
    players: int = 50
    boxes: int | None = None
    currency: str = "EUR"

    def __post_init__(self) -> None:
        if not _TABLE_ID.match(self.table_id):
            raise ConfigError(f"table id {self.table_id!r}: 1-64 characters of A-Z a-z 0-9 _ -")
        if self.paytable not in paytable_ids():
            raise ConfigError(f"unknown pay table {self.paytable!r}; known: {paytable_ids()}")
        if not 1 <= self.players <= MAX_SHARED_PLAYERS:
            raise ConfigError(f"players must be 1..{MAX_SHARED_PLAYERS}, got {self.players}")
        if self.boxes is not None and not 1 <= self.boxes <= MAX_BOXES:
            raise ConfigError(f"boxes must be 1..{MAX_BOXES}, got {self.boxes}")


@dataclass(frozen=True)
class Faults:
    """Per-round rates (0..1) of each fault the studio injects; all 0 by default.

    Each kind is its own option, so a test can ask for exactly one.
    """

    void: float = 0.0
    """``round.voided`` (a misdeal) part-way through the round."""
    duplicate_card: float = 0.0
    """A card read twice: a card already dealt in the round is dealt again."""
    bad_card: float = 0.0
    """A scanner read that is no card, such as ``"1x"``."""
    missing_cards: float = 0.0
    """``round.completed`` before the river is dealt."""
    redelivery: float = 0.0
    """One event of the round sent a second time, later (same event_id, same content)."""
    out_of_order: float = 0.0
    """Two adjacent events of the round sent in swapped order."""
    wrong_call: float = 0.0
    """A call whose amount is not 2x its ante."""
    late_bet: float = 0.0
    """A ``bet.placed`` after betting closed (after the first ``cards.dealt``)."""
    malformed: float = 0.0
    """A torn line (not JSON) before one event of the round, which is then sent whole."""

    def __post_init__(self) -> None:
        for kind, rate in self.rates().items():
            if not 0.0 <= rate <= 1.0:
                raise ConfigError(f"{kind} fault rate must be within 0..1, got {rate}")

    @classmethod
    def kinds(cls) -> tuple[str, ...]:
        """Every fault kind, as a field name."""
        return tuple(f.name for f in fields(cls))

    def rates(self) -> dict[str, float]:
        """Each kind's rate."""
        return {kind: getattr(self, kind) for kind in self.kinds()}

    @classmethod
    def only(cls, kind: str, rate: float = 1.0) -> Faults:
        """Exactly one kind of fault, at ``rate``."""
        if kind not in cls.kinds():
            raise ConfigError(f"unknown fault {kind!r}; known: {', '.join(cls.kinds())}")
        return cls(**{kind: rate})


@dataclass(frozen=True)
class GameFaults:
    """Per-round probabilities (0..1) of biased cards (:mod:`studio.gamefaults`); 0: a fair shoe."""

    deal_bias: float = 0.0
    completion_bias: float = 0.0

    def __post_init__(self) -> None:
        for name in ("deal_bias", "completion_bias"):
            rate = getattr(self, name)
            if not 0.0 <= rate <= 1.0:
                raise ConfigError(f"{name} rate must be within 0..1, got {rate}")

    @property
    def any(self) -> bool:
        """Whether any game fault is on."""
        return bool(self.deal_bias or self.completion_bias)


@dataclass(frozen=True)
class StudioConfig:
    """A simulation: ``rounds`` rounds in all, shared out over ``tables`` in turn.

    The same config (``seed`` included) always yields the same feed, byte for byte.
    """

    tables: tuple[TableSpec, ...]
    rounds: int = 100
    seed: int = 0
    strategy: str = "simple"
    timeout_rate: float = 0.0
    side_bet_rate: float = 0.3
    faults: Faults = field(default_factory=Faults)
    game_faults: GameFaults = field(default_factory=GameFaults)
    start: datetime = DEFAULT_START

    def __post_init__(self) -> None:
        if not self.tables:
            raise ConfigError("a studio needs at least one table")
        ids = [table.table_id for table in self.tables]
        if len(set(ids)) != len(ids):
            raise ConfigError(f"table ids must be distinct: {ids}")
        if self.rounds < 0:
            raise ConfigError(f"rounds must be >= 0, got {self.rounds}")
        for name in ("timeout_rate", "side_bet_rate"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"{name} must be within 0..1, got {getattr(self, name)}")
        if self.start.tzinfo is None:
            raise ConfigError("start must be a timezone-aware datetime")

    def rounds_of(self, index: int) -> int:
        """How many rounds the table at ``index`` plays."""
        share, extra = divmod(self.rounds, len(self.tables))
        return share + (1 if index < extra else 0)


def every_paytable(players: int = 50, boxes: int | None = None) -> tuple[TableSpec, ...]:
    """One table per shipped pay table, ids like ``studio-1-classic``."""
    return tuple(
        TableSpec(f"studio-{i}-{short_name(pid)}", pid, players=players, boxes=boxes)
        for i, pid in enumerate(paytable_ids(), start=1)
    )


def parse_table_specs(
    specs: list[str], players: int = 50, boxes: int | None = None, prefix: str = "studio"
) -> tuple[TableSpec, ...]:
    """Tables from command-line specs ``PAYTABLE[*COUNT][:shared=N|:boxes=N]``.

    ``PAYTABLE`` is an id or short name; ``players`` and ``boxes`` are the defaults for specs
    that do not say. Ids run ``<prefix>-1-classic``, ``<prefix>-2-classic``, ...
    """
    tables: list[TableSpec] = []
    for spec in specs:
        match = re.fullmatch(r"([\w/-]+?)(?:\*(\d+))?(?::(shared|boxes)=(\d+))?", spec)
        if not match:
            raise ConfigError(f"table spec {spec!r}: expected PAYTABLE[*COUNT][:shared=N|:boxes=N]")
        name, count, mode, size = match.groups()
        try:
            paytable = resolve_paytable(name)
        except PayTableError as error:
            raise ConfigError(str(error)) from None
        seats_players, seats_boxes = players, boxes
        if mode == "shared":
            seats_players, seats_boxes = int(size), None
        elif mode == "boxes":
            seats_boxes = int(size)
        for _ in range(int(count or 1)):
            table_id = f"{prefix}-{len(tables) + 1}-{short_name(paytable)}"
            tables.append(TableSpec(table_id, paytable, seats_players, seats_boxes))
    return tuple(tables)
