"""Prometheus metrics: what was consumed, rejected, settled, wagered and returned.

Money counters (minor units, per game, pay table, spot and currency) count settled rounds
only: a voided round's refunds go to ``croupier_refunded_minor_units`` and never inflate
turnover. Jackpot stakes feed the meter, not the house: the meter's movements are counted
apart (contributed, awarded, reseeded), so the house's hold is
``wagered - returned - (contributed - awarded + reseeded)`` (deploy/prometheus/rules.yml).

Every label set a pay table can have is exported from start-up, at zero, for the currencies
configured: a series that first appears at its first increment hides that increment from
``increase()``, and hold over a period would come out short.

The integrity counters (:meth:`Metrics.observe_integrity`) are incremented by the process
that projects them (``croupier project``), once per committed batch, so they add up across
instances; the since-start totals are gauges read from the read model. The play residual's
variance over a window is ``play_variance + play_covariance_positive -
play_covariance_negative``: the boxes' covariance is counted in two parts that never go down.
"""

from __future__ import annotations

import platform
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
)
from prometheus_client.core import CounterMetricFamily
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from croupier import croupier_version
from croupier.settlement.facts import closing
from holdem import Spot, load_paytable, paytable_ids
from holdem.paytable import PLAY_WAGERS

#: Currencies whose series are exported from start-up unless told otherwise.
DEFAULT_CURRENCIES = ("EUR",)
INTEGRITY_FIGURES = (
    ("rounds", "Settled rounds counted in the integrity statistics"),
    ("deal_value", "Best-play value of the cards dealt, as a return on the stakes, minor units"),
    ("deal_expected", "The deal value's exact mean under a fair deal, minor units"),
    ("deal_variance", "The deal value's exact variance under a fair deal, minor units squared"),
    ("play_returned", "What the bets returned, minor units"),
    ("play_expected", "Exact expected return of the decisions taken, minor units"),
    ("play_variance", "Exact variance of the return given the decisions, minor units squared"),
    (
        "play_covariance_positive",
        "The boxes' covariance estimated from their residuals, rounds where it is positive, "
        "minor units squared",
    ),
    (
        "play_covariance_negative",
        "Minus the boxes' covariance estimated from their residuals, rounds where it is "
        "negative, minor units squared",
    ),
)


class Metrics:
    """The service's metrics, on a registry of their own (tests get a fresh one each)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self._append_lock = _AppendLock(lambda: 0.0)  # 0 until a ledger is watched
        self.registry.register(self._append_lock)
        r = self.registry
        self.consumed = Counter(
            "croupier_events_consumed", "Feed messages consumed", ["event_type"], registry=r
        )
        self.rejected = Counter(
            "croupier_events_rejected", "Feed messages rejected, by reason", ["code"], registry=r
        )
        self.dead_lettered = Counter(
            "croupier_dead_lettered", "Messages sent to the dead-letter queue", ["code"], registry=r
        )
        self.rounds = Counter(
            "croupier_rounds_closed",
            "Rounds settled or voided",
            ["game", "paytable", "status"],
            registry=r,
        )
        labels = ["game", "paytable", "spot", "currency"]
        self.wagered = Counter(
            "croupier_wagered_minor_units", "Amount staked, in minor units", labels, registry=r
        )
        self.returned = Counter(
            "croupier_returned_minor_units",
            "Amount returned to players (stake + win), in minor units",
            labels,
            registry=r,
        )
        self.consumer_lag = Gauge(
            "croupier_consumer_lag_seconds",
            "Age of the oldest feed event not yet settled (from its occurred_at; queue wait "
            "included), 0 when the queue is empty",
            registry=r,
        )
        self.latency = Histogram(
            "croupier_settlement_latency_seconds",
            "From a round.completed delivery to the commit of its settlement (batch work only; "
            "the wait in the queue is croupier_consumer_lag_seconds)",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10),
            registry=r,
        )
        self.batch_retries = Counter(
            "croupier_batch_retries",
            "Batches settled again after an attempt failed, by reason: lost_race (a stream "
            "another writer moved on, such as a jackpot meter shared with another instance; "
            "decided again at once), ledger_unavailable, broker, head_not_signed, io, error",
            ["reason"],
            registry=r,
        )
        self.batch_size = Histogram(
            "croupier_batch_messages",
            "Feed messages per ledger transaction",
            buckets=(1, 10, 50, 100, 250, 500, 1000, 2000),
            registry=r,
        )
        self.outbox_backlog = Gauge(
            "croupier_outbox_backlog", "Settlement results not yet confirmed", registry=r
        )
        self.published = Counter(
            "croupier_results_published", "Settlement results confirmed by the broker", registry=r
        )
        self.unroutable = Counter(
            "croupier_results_unroutable",
            "Settlement results the broker could not route (set aside: counted once)",
            registry=r,
        )
        self.set_aside = Counter(
            "croupier_results_set_aside",
            "Outbox messages set aside because the broker refuses them, by kind",
            ["kind"],
            registry=r,
        )
        self.relay_active = Gauge(
            "croupier_relay_active", "1 while this instance holds the relay lease", registry=r
        )
        self.relay_lease_stalled = Gauge(
            "croupier_relay_lease_stalled",
            "1 while the relay lease is held beyond any term Croupier takes (nothing relays)",
            registry=r,
        )
        self.relay_marks_missing = Gauge(
            "croupier_relay_marks_missing",
            "Pending messages a signed head records published whose publish marks are gone "
            "(nothing relays until `croupier redrive --results --unmarked`)",
            registry=r,
        )
        self.refused = Counter(
            "croupier_results_refused",
            "Outbox messages the relay refused: not exactly what a signed, chained settlement says",
            registry=r,
        )
        # Partition ownership (croupier.settlement.partitions): exported by an instance that
        # shares the partitions; zero and absent labels otherwise.
        self.appends_fenced = Counter(
            "croupier_appends_fenced",
            "Appends refused (result fenced) because this instance did not hold the "
            "partition at the epoch it named: lost to another instance, released or expired",
            ["partition"],
            registry=r,
        )
        self.partitions_owned = Gauge(
            "croupier_partitions_owned", "Partitions this instance holds the lease of", registry=r
        )
        self.partition_handovers = Counter(
            "croupier_partition_handovers",
            "Partitions this instance took (taken), gave back (released) or found gone at a "
            "renewal (lost)",
            ["how"],
            registry=r,
        )
        for how in ("taken", "released", "lost"):
            self.partition_handovers.labels(how)
        self.partition_handover_seconds = Histogram(
            "croupier_partition_handover_seconds",
            "How long a partition this instance took had been without a valid lease (released "
            "or expired) before it took it",
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 15, 20, 30, 60),
            registry=r,
        )
        self.partition_unowned = Gauge(
            "croupier_partition_unowned_seconds",
            "The longest any partition of the ledger has been without a valid lease (free, "
            "released or expired), as this instance last read the leases; 0 when every "
            "partition is owned. A partition never owned counts from when this instance "
            "first saw it so",
            registry=r,
        )
        self.ready = Gauge("croupier_ready", "1 when the service is ready", registry=r)
        self.rounds_open = Gauge(
            "croupier_rounds_open", "Rounds open in this instance's memory", registry=r
        )
        self.events_held = Gauge(
            "croupier_events_held", "Events held for a gap in their round's seq", registry=r
        )
        self.oldest_open_round = Gauge(
            "croupier_oldest_open_round_seconds",
            "Age of the oldest open round (0 when none)",
            registry=r,
        )
        self.rounds_timed_out = Counter(
            "croupier_rounds_timed_out",
            "Rounds Croupier voided because they stayed open past the round timeout",
            registry=r,
        )
        self.oldest_held_event = Gauge(
            "croupier_oldest_held_event_seconds",
            "How long the longest-held event has waited (0 when none)",
            registry=r,
        )
        self.refunded = Counter(
            "croupier_refunded_minor_units",
            "Stakes refunded by voided rounds (not turnover), in minor units",
            labels,
            registry=r,
        )
        meter = ["game", "paytable", "currency"]
        self.jackpot_contributed = Counter(
            "croupier_jackpot_contributed_minor_units",
            "Jackpot stakes fed into the meter (owed to players, not hold), in minor units",
            meter,
            registry=r,
        )
        self.jackpot_awarded = Counter(
            "croupier_jackpot_awarded_minor_units",
            "Jackpot meter awards paid to winners, in minor units",
            meter,
            registry=r,
        )
        self.jackpot_reseeded = Counter(
            "croupier_jackpot_reseeded_minor_units",
            "What the house put into the meter to bring it back to its seed, in minor units",
            meter,
            registry=r,
        )
        self.jackpot_meter = Gauge(
            "croupier_jackpot_meter_minor_units",
            "The jackpot meter after the last settled round: the liability to players",
            meter,
            registry=r,
        )
        self.integrity = {
            name: Counter(
                f"croupier_integrity_{name}", text, ["game", "paytable", "currency"], registry=r
            )
            for name, text in INTEGRITY_FIGURES
        }
        self.integrity_total = {
            name: Gauge(
                f"croupier_integrity_{name}_since_start",
                text + ", over the whole ledger (from the read model)",
                ["game", "paytable", "currency"],
                registry=r,
            )
            for name, text in INTEGRITY_FIGURES
        }

        add_process_metrics(r)

    def initialise(self, currencies: Iterable[str] = DEFAULT_CURRENCIES) -> None:
        """Export every label set of every pay table, spot and currency at zero."""
        for paytable_id in paytable_ids():
            table = load_paytable(paytable_id)
            game = str(table.game)
            for status in ("settled", "voided"):
                self.rounds.labels(game, table.id, status)
            spots = [str(s) for s in Spot if table.offers(s) or s in PLAY_WAGERS]
            for currency in currencies:
                for spot in spots:
                    for counter in (self.wagered, self.returned, self.refunded):
                        counter.labels(game, table.id, spot, currency)
                if table.jackpot is not None:
                    for counter in (
                        self.jackpot_contributed,
                        self.jackpot_awarded,
                        self.jackpot_reseeded,
                    ):
                        counter.labels(game, table.id, currency)
                for figure in self.integrity.values():
                    figure.labels(game, table.id, currency)

    def observe_closed(self, facts: Iterable[Mapping[str, Any]], status: str) -> None:
        """Count a settled round's wagers and returns, or a voided round's refunds."""
        for data in map(closing, facts):
            table = data["paytable"]["id"]
            game = str(load_paytable(table).game)
            self.rounds.labels(game, table, status).inc()
            # Summed per label set first: a shared hand has thousands of lines, and each
            # labels() lookup takes the metric's lock.
            sums: dict[tuple[str, str, str, str], list[int]] = {}
            for line in data["results"]:
                labels = (game, table, line["spot"], line["currency"])
                total = sums.setdefault(labels, [0, 0])
                total[0] += line["stake"]
                total[1] += line["returned"]
            for labels, (staked, returned) in sums.items():
                if status == "voided":
                    self.refunded.labels(*labels).inc(returned)
                else:
                    self.wagered.labels(*labels).inc(staked)
                    self.returned.labels(*labels).inc(returned)
            for move in data.get("jackpot", ()):
                meter = (game, table, move["currency"])
                self.jackpot_contributed.labels(*meter).inc(move["contributed"])
                self.jackpot_awarded.labels(*meter).inc(move["awarded"])
                self.jackpot_reseeded.labels(*meter).inc(move["reseeded"])
                self.jackpot_meter.labels(*meter).set(move["after"])

    def observe_integrity(self, labels: tuple[str, str, str], figures: Mapping[str, float]) -> None:
        """Add one committed batch's integrity figures of a game, pay table and currency."""
        for name, value in figures.items():
            if value:
                self.integrity[name].labels(*labels).inc(value)

    def watch_append_lock(self, held: Callable[[], float]) -> None:
        """Export ``held()``, the seconds this process has held the ledger's append lock
        (``Ledger.append_lock_held``), as ``croupier_append_lock_held_seconds_total``; a
        second call replaces the first (0 until the first)."""
        self._append_lock.held = held

    def set_integrity_totals(
        self, labels: tuple[str, str, str], figures: Mapping[str, float]
    ) -> None:
        """The since-start totals of a game, pay table and currency, from the read model."""
        for name, value in figures.items():
            self.integrity_total[name].labels(*labels).set(value)


class _AppendLock(Collector):
    """The append lock's running total, read from the ledger at each scrape."""

    def __init__(self, held: Callable[[], float]) -> None:
        self.held = held

    def collect(self) -> Iterable[CounterMetricFamily]:
        yield CounterMetricFamily(
            "croupier_append_lock_held_seconds",
            "Seconds this instance held the ledger's append lock, from taking it to the end "
            "of its transaction. The lock lets one transaction append at a time: summed over "
            "the instances, its rate is the share of time the ledger's one writer is busy "
            "(at 1 the ledger, not the instances, limits settling)",
            value=self.held(),
        )


def add_process_metrics(registry: CollectorRegistry) -> None:
    """``process_*`` (CPU, memory, open files), ``python_*`` (version, GC) and
    ``croupier_build_info{version, python}`` on ``registry``."""
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    build = Info(
        "croupier_build", "Croupier's version and the Python it runs on", registry=registry
    )
    build.info({"version": croupier_version(), "python": platform.python_version()})
