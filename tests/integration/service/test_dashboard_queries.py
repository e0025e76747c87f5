"""Every dashboard query against a real Prometheus scraping the running service and projector.

The service settles a studio feed with voids, rejected events and progressive jackpots from
RabbitMQ into PostgreSQL; ``croupier project --follow --metrics-port`` follows the ledger and
exports the integrity figures. Debian's ``prometheus`` scrapes both every second and evaluates
``deploy/prometheus/rules.yml`` (group intervals shortened to a second). Every query of every
panel of the dashboard must answer without error and with data: a panel a compliance officer
reads must never be empty.

Before the first round, the hold series (wagered, returned and refunded per game, pay table,
spot and currency) and the integrity series are already scraped at zero for every pay table
the service knows: a label set that appeared only at its first increment would lose that
increment to ``increase()``, and the Prometheus hold of a period would not reconcile with the
ledger.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from service_harness import (
    Wallet,
    eventually,
    expected_results,
    played_tables,
    prepare_broker,
    serving,
)

from croupier.ledger import open_ledger
from holdem import Game, Spot, load_paytable, paytable_ids
from studio.config import Faults, StudioConfig, parse_table_specs
from studio.feed import FeedMessage, simulate
from studio.publisher import publish

pytestmark = pytest.mark.integration

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "croupier.json"
PROMETHEUS_MISSING = (
    "prometheus is not installed; it comes with Debian's prometheus package: "
    "apt-get update && apt-get install -y prometheus"
)
TABLES = ("classic:shared=8", "royal-20:boxes=4", "progressive:shared=8", "standard:boxes=3")


def _feed() -> list[FeedMessage]:
    config = StudioConfig(
        tables=parse_table_specs(list(TABLES), prefix="obs"),
        rounds=60,
        seed=5,
        side_bet_rate=0.6,
        faults=Faults(void=0.05, wrong_call=0.05, late_bet=0.05),
    )
    return list(simulate(config))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _rules_every_second(target: Path) -> None:
    """The deploy rules with every group evaluated each second."""
    doc = yaml.safe_load((DEPLOY / "prometheus" / "rules.yml").read_text(encoding="utf-8"))
    for group in doc["groups"]:
        group["interval"] = "1s"
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = "1s"
    target.write_text(yaml.safe_dump(doc), encoding="utf-8")


@contextmanager
def _prometheus(tmp: Path, service_port: int, projector_port: int) -> Iterator[int]:
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail(PROMETHEUS_MISSING, pytrace=False)
    _rules_every_second(tmp / "rules.yml")
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(tmp / "rules.yml")],
        "scrape_configs": [
            {
                "job_name": "croupier",
                "static_configs": [{"targets": [f"127.0.0.1:{service_port}"]}],
            },
            {
                "job_name": "croupier-projector",
                "static_configs": [{"targets": [f"127.0.0.1:{projector_port}"]}],
            },
        ],
    }
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    port = _free_port()
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={tmp / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=(tmp / "prometheus.log").open("wb"),
    )
    try:
        yield port
    finally:
        process.terminate()
        process.wait(timeout=120)  # a loaded host may take its time to finish a batch


@contextmanager
def _projector(ledger_url: str, port: int, tmp: Path) -> Iterator[None]:
    command = [sys.executable, "-m", "croupier.cli", "project", "--follow"]
    process = subprocess.Popen(
        [*command, "--ledger", ledger_url, "--metrics-port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=(tmp / "projector.log").open("wb"),
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        yield
    finally:
        process.terminate()
        process.wait(timeout=120)  # a loaded host may take its time to finish a batch


def _query(port: int, expr: str) -> dict[str, Any]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            answer: dict[str, Any] = json.load(response)
    except urllib.error.HTTPError as error:
        answer = json.load(error)
    except OSError as error:
        return {"status": "error", "error": str(error)}
    return answer


def _panel_queries() -> list[tuple[str, str]]:
    doc = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    out = []
    for panel in doc["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"]
            for variable in ("$game", "$paytable", "$currency"):
                expr = expr.replace(variable, ".*")
            out.append((panel["title"], expr))
    return out


def _hold_labels() -> set[tuple[str, str, str, str]]:
    """Every (game, pay table, spot, currency) a hold series exists for: every spot a pay
    table offers and every play wager of its game, in euros (the configured currency)."""
    plays = {
        Game.CASINO_HOLDEM: (Spot.ANTE, Spot.CALL),
        Game.TEXAS_HOLDEM_PLUS: (Spot.ANTE, Spot.CALL, Spot.FLOP_BET, Spot.TURN_BET),
    }
    out = set()
    for name in paytable_ids():
        table = load_paytable(name)
        for spot in {s for s in Spot if table.offers(s)} | set(plays[table.game]):
            out.add((str(table.game), table.id, str(spot), "EUR"))
    return out


def _scraped(port: int, metric: str, labels: tuple[str, ...]) -> dict[tuple[str, ...], float]:
    answer = _query(port, metric)
    if answer.get("status") != "success":
        return {}
    return {
        tuple(r["metric"].get(name, "") for name in labels): float(r["value"][1])
        for r in answer["data"]["result"]
    }


def _missing_from_start(port: int) -> list[str]:
    """Hold and integrity series that a scrape before any round does not show at zero."""
    problems = []
    hold = _hold_labels()
    for metric in ("wagered", "returned", "refunded"):
        name = f"croupier_{metric}_minor_units_total"
        got = _scraped(port, name, ("game", "paytable", "spot", "currency"))
        problems += [f"{name}{labels}: absent" for labels in sorted(hold - got.keys())]
        problems += [f"{name}{k}: {v} before any round" for k, v in got.items() if v]
    tables = {(game, paytable, currency) for game, paytable, _, currency in hold}
    name = "croupier_integrity_rounds_total"
    got = _scraped(port, name, ("game", "paytable", "currency"))
    problems += [f"{name}{labels}: absent" for labels in sorted(tables - got.keys())]
    return problems


def _problems(port: int) -> list[str]:
    problems = []
    for title, expr in _panel_queries():
        answer = _query(port, expr)
        if answer.get("status") != "success":
            problems.append(f"{title}: {expr}: error {answer.get('error')}")
        elif not answer["data"]["result"]:
            problems.append(f"{title}: {expr}: empty")
    return problems


@pytest.mark.long
async def test_every_dashboard_query_answers_with_data(
    amqp_vhost: str, postgres_database: str, tmp_path: Path
) -> None:
    messages = _feed()
    expected = expected_results(played_tables(messages))
    await prepare_broker(amqp_vhost)
    wallet = Wallet(amqp_vhost)
    projector_port = _free_port()
    async with open_ledger(postgres_database) as ledger:
        await ledger.migrate()
        async with serving(ledger, amqp_vhost) as service:
            assert service.http_port
            with (
                _projector(postgres_database, projector_port, tmp_path),
                _prometheus(tmp_path, service.http_port, projector_port) as port,
            ):
                before: list[str] = []

                async def from_start() -> bool:
                    before[:] = await asyncio.to_thread(_missing_from_start, port)
                    return not before

                try:
                    await eventually(from_start, 60, "hold series from start-up", every=1)
                except AssertionError:
                    raise AssertionError("\n".join(before)) from None
                assert await publish(messages, amqp_vhost) == len(messages)
                await wallet.wait_for(expected, timeout=180)
                last: list[str] = []

                async def answered() -> bool:
                    last[:] = await asyncio.to_thread(_problems, port)
                    return not last

                started = time.monotonic()
                try:
                    await eventually(answered, 180, "every panel answering", every=2)
                except AssertionError:
                    logs = {
                        name: (tmp_path / name).read_text(errors="replace")[-2000:]
                        for name in ("projector.log", "prometheus.log")
                    }
                    raise AssertionError(
                        "panels without data after "
                        f"{time.monotonic() - started:.0f}s:\n" + "\n".join(last) + f"\n{logs}"
                    ) from None
