"""The integrity read model: deal value and play residual totals per pay table, currency and day.

``integrity_totals``
    One row per game, pay table, currency and settlement day (UTC ``YYYY-MM-DD``) with the
    sums of every settled round's integrity terms (:mod:`croupier.reports.integrity`): rounds, the
    deal value, its fair mean and variance, what the bets returned, the exact expectation of
    the decisions taken, its variance, and the boxes' covariance (Texas Hold'em Plus rounds of
    several boxes) in two parts that never go down: each round's covariance when positive
    (``play_covariance_positive``) and minus it when negative (``play_covariance_negative``).
    Expectations are kept in thousandths of a minor unit and variances in minor units squared,
    as integers; a z-score over any set of days is ``(value - mean) / sqrt(variance)`` of
    their sums, the play residual's variance being ``play_variance +
    play_covariance_positive - play_covariance_negative`` (z = 0 when that is not positive).

Rows are upserted with every figure added, so the totals of a batch and the checkpoint past
it commit together (see :mod:`croupier.projection`): after a crash the projector resumes at
the checkpoint and counts nothing twice. A settlement recorded without its cards (before
settlements carried them) is counted in ``no_cards`` and nowhere else.

Once a batch is committed, the projector's process adds it to the Prometheus counters
(:meth:`croupier.metrics.Metrics.observe_integrity`) and moves the since-start gauges.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from croupier.ledger import RecordedEvent
from croupier.metrics import Metrics
from croupier.projection import Changes, Column, Projection, Session, Table
from croupier.reports.integrity import NoCards, settled_terms
from croupier.settlement.round import SETTLED
from holdem.integrity.terms import Terms

MILLI: Final = 1000
#: Figures of a row, in the order of the metrics' integrity figures.
FIGURES: Final = (
    "rounds",
    "deal_value",
    "deal_expected",
    "deal_variance",
    "play_returned",
    "play_expected",
    "play_variance",
    "play_covariance_positive",
    "play_covariance_negative",
)
_SCALED: Final = frozenset({"deal_value", "deal_expected", "play_expected"})
KEY: Final = ("game", "paytable", "currency", "day")

TOTALS: Final = Table(
    "integrity_totals",
    (
        *(Column(name, "text") for name in KEY),
        *(Column(name, "int") for name in FIGURES),
        Column("no_cards", "int"),
    ),
    key=KEY,
)


def row_of(terms: Terms) -> dict[str, int]:
    """A round's terms as the integers a row stores."""
    return {
        "rounds": terms.rounds,
        "deal_value": round(terms.deal_value * MILLI),
        "deal_expected": round(terms.deal_mean * MILLI),
        "deal_variance": round(terms.deal_variance),
        "play_returned": terms.play_actual,
        "play_expected": round(terms.play_expected * MILLI),
        "play_variance": round(terms.play_variance),
        "play_covariance_positive": round(max(terms.play_covariance, 0.0)),
        "play_covariance_negative": round(max(-terms.play_covariance, 0.0)),
    }


def figures_of(row: Mapping[str, int]) -> dict[str, float]:
    """Stored integers back in minor units (and minor units squared)."""
    return {name: row[name] / MILLI if name in _SCALED else float(row[name]) for name in FIGURES}


class IntegrityProjection(Projection):
    """Integrity totals of settled rounds, by game, pay table, currency and day."""

    name = "integrity"
    version = 3
    tables = (TOTALS,)

    def __init__(self) -> None:
        self.metrics: Metrics | None = None
        self._totals: dict[tuple[str, str, str], dict[str, int]] = {}

    def apply(self, events: Sequence[RecordedEvent], changes: Changes) -> None:
        """Sum each settled round's terms into its day's row."""
        rows: dict[tuple[str, str, str, str], dict[str, int]] = {}
        for record in events:
            if record.type != SETTLED:
                continue
            day = record.recorded_at.strftime("%Y-%m-%d")
            try:
                found = [(t.game, t.paytable, t.currency, row_of(t.terms)) for t in
                         settled_terms(record.data)]  # fmt: skip
            except NoCards:
                paytable = record.data["paytable"]["id"]
                key = ("", paytable, "", day)
                rows.setdefault(key, _zero())["no_cards"] += 1
                continue
            for game, paytable, currency, row in found:
                total = rows.setdefault((game, paytable, currency, day), _zero())
                for name, value in row.items():
                    total[name] += value
        for (game, paytable, currency, day), total in rows.items():
            changes.upsert(
                TOTALS.name,
                {"game": game, "paytable": paytable, "currency": currency, "day": day, **total},
                add=(*FIGURES, "no_cards"),
            )

    def committed(self, changes: Changes) -> None:
        """Count the committed batch in the metrics (counters and since-start gauges)."""
        pending: dict[tuple[str, str, str], dict[str, int]] = {}
        for row, _ in changes.upserts.get(TOTALS.name, ()):
            if row["game"]:
                mine = pending.setdefault(
                    (row["game"], row["paytable"], row["currency"]), _figures()
                )
                for name in FIGURES:
                    mine[name] += row[name]
        for labels, row in pending.items():
            total = self._totals.setdefault(labels, _figures())
            for name in FIGURES:
                total[name] += row[name]
            if self.metrics is not None:
                self.metrics.observe_integrity(labels, figures_of(row))
                self.metrics.set_integrity_totals(labels, figures_of(total))

    async def export(self, metrics: Metrics, session: Session) -> None:
        """Count into ``metrics`` from now on; the since-start gauges start at the stored totals."""
        self.metrics = metrics
        for labels, row in (await read_totals(session)).items():
            self._totals[labels] = row
            metrics.set_integrity_totals(labels, figures_of(row))


async def read_totals(
    session: Session, days: tuple[str, str] | None = None
) -> dict[tuple[str, str, str], dict[str, int]]:
    """The stored totals per game, pay table and currency, over every day or ``days``."""
    sums = ", ".join(f"SUM({name})" for name in FIGURES)
    where, params = "WHERE game <> ''", []
    if days is not None:
        where += " AND day >= ? AND day <= ?"
        params = list(days)
    rows = await session.fetch(
        f"SELECT game, paytable, currency, {sums} FROM {TOTALS.name} {where} "
        "GROUP BY game, paytable, currency",
        params,
    )
    return {
        (str(r[0]), str(r[1]), str(r[2])): {n: int(v) for n, v in zip(FIGURES, r[3:], strict=True)}
        for r in rows
    }


def _figures() -> dict[str, int]:
    return dict.fromkeys(FIGURES, 0)


def _zero() -> dict[str, Any]:
    return dict.fromkeys((*FIGURES, "no_cards"), 0)


def projection() -> Projection:
    """The projection this module registers."""
    return IntegrityProjection()
