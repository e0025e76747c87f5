"""The day's hold from the ledger: per table, pay table and currency, to the unit.

Read from the ``round_hold`` read model (:mod:`croupier.projection.wagers`), one row per
closed round and currency, itself checked against each round's house posting:

- ``wagered``: the stakes of settled rounds (voided rounds' stakes are not turnover);
- ``returned``: what settled rounds paid back to players (jackpot awards included);
- ``refunded``: the stakes voided rounds gave back;
- ``contributed``, ``awarded``, ``reseeded``: the progressive meter's movements;
- ``hold``: the house's posting, ``wagered - returned - contributed + awarded - reseeded``
  (the meter pays awards; contributions are a liability, not the house's).

A day is a UTC calendar day of the settlement's ledger time. A round dealt on one day and
settled on the next counts on the day it settled; the report also gives the same figures by
game time (the completing or voiding feed event's ``occurred_at``) whenever the two differ
for any round of the day.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import date
from typing import Any, Final, Literal

from croupier.projection import Session

Basis = Literal["settled_day", "game_day"]
MONEY: Final = ("wagered", "returned", "refunded", "contributed", "awarded", "reseeded", "hold")


@dataclass(frozen=True, slots=True)
class HoldLine:
    """One table, pay table and currency (or a currency's total when ``table_id`` is ``*``)."""

    table_id: str
    paytable: str
    currency: str
    rounds: int
    voided: int
    wagered: int
    returned: int
    refunded: int
    contributed: int
    awarded: int
    reseeded: int
    hold: int

    @property
    def hold_percent(self) -> str:
        """Hold over wagered, two decimals, computed in integers."""
        if not self.wagered:
            return "-"
        basis_points = abs(self.hold) * 10_000 // self.wagered
        sign = "-" if self.hold < 0 else ""
        return f"{sign}{basis_points // 100}.{basis_points % 100:02d}%"

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "hold_percent": self.hold_percent}


def _query(basis: Basis) -> str:
    assert basis in ("settled_day", "game_day")
    sums = ", ".join(f"sum({column})" for column in MONEY)
    return f"""
        SELECT table_id, paytable, currency,
               sum(CASE WHEN status = 'settled' THEN 1 ELSE 0 END),
               sum(CASE WHEN status = 'voided' THEN 1 ELSE 0 END), {sums}
        FROM round_hold WHERE {basis} = ?
        GROUP BY table_id, paytable, currency ORDER BY currency, table_id, paytable
    """


async def hold_lines(session: Session, day: date, basis: Basis) -> list[HoldLine]:
    """The day's lines by settlement day or game day (a day has at most tables x pay tables)."""
    rows = await session.fetch(_query(basis), (day.isoformat(),))
    lines = [HoldLine(*row[:3], *(int(value) for value in row[3:])) for row in rows]
    for line in lines:
        assert line.hold == (
            line.wagered - line.returned - line.contributed + line.awarded - line.reseeded
        ), f"hold of {line.table_id} {line.currency} does not add up"
    return lines


def totals(lines: list[HoldLine]) -> list[HoldLine]:
    """One line per currency summing ``lines``."""
    out: dict[str, list[int]] = {}
    for line in lines:
        sums = out.setdefault(line.currency, [0] * 9)
        values = (line.rounds, line.voided, *(getattr(line, column) for column in MONEY))
        for i, value in enumerate(values):
            sums[i] += value
    return [HoldLine("*", "*", currency, *sums) for currency, sums in sorted(out.items())]


async def differing_rounds(session: Session, day: date) -> int:
    """Rounds of the day (either way) whose game day is not their settlement day."""
    rows = await session.fetch(
        "SELECT count(*) FROM round_hold WHERE (settled_day = ? OR game_day = ?) "
        "AND settled_day <> game_day",
        (day.isoformat(), day.isoformat()),
    )
    return int(rows[0][0])
