"""Prometheus metrics: what was consumed, rejected, settled, wagered and returned.

Hold is ``wagered - returned``; RTP is ``returned / wagered``. Both are derived in PromQL
(deploy/prometheus/rules.yml) from the counters below, per game, pay table, spot and
currency, and compared with the theoretical RTP of each pay table's PAR sheet.
"""

from __future__ import annotations

import platform
from collections.abc import Iterable, Mapping
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
)
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from croupier import croupier_version
from holdem import load_paytable, paytable_ids
from holdem.odds.par import ParDataError, load_par


class Metrics:
    """The service's metrics, on a registry of their own (tests get a fresh one each)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
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
        self.latency = Histogram(
            "croupier_settlement_latency_seconds",
            "From a round.completed delivery to the commit of its settlement",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10),
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
        self.refused = Counter(
            "croupier_results_refused",
            "Outbox messages the relay refused: not exactly what a signed, chained settlement says",
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
        self.oldest_held_event = Gauge(
            "croupier_oldest_held_event_seconds",
            "How long the longest-held event has waited (0 when none)",
            registry=r,
        )
        self.theoretical_rtp = Gauge(
            "croupier_theoretical_rtp",
            "RTP of the main game under best strategy, from the pay table's PAR sheet",
            ["game", "paytable"],
            registry=r,
        )

        add_process_metrics(r)

    def publish_theoretical_rtp(self) -> None:
        """Set each pay table's theoretical RTP from its stored PAR sheet (when there is one)."""
        for paytable_id in paytable_ids():
            table = load_paytable(paytable_id)
            try:
                sheet = load_par(table)
            except ParDataError:
                continue
            self.theoretical_rtp.labels(str(table.game), table.id).set(float(sheet.base.rtp()))

    def observe_closed(self, facts: Iterable[Mapping[str, Any]], status: str) -> None:
        """Count a settled or voided round's wagers and returns."""
        for data in facts:
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
                self.wagered.labels(*labels).inc(staked)
                self.returned.labels(*labels).inc(returned)


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
