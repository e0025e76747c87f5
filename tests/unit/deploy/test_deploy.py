"""deploy/: the compose file, Prometheus rules and the Grafana dashboard agree with the code.

Every metric a rule or a panel reads must be one croupier.metrics.Metrics exports (or a
recording rule of rules.yml), with the labels it really has; promtool checks the
Prometheus config and rules and runs the rule unit tests in deploy/prometheus/tests.yml
and tests-24h.yml.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import Metric

from contract.feed import MAX_BODY_BYTES
from croupier import bus
from croupier.bus.amqp import AmqpBus
from croupier.bus.topology import TOPOLOGY, partition_queue, rabbitmq_definitions, routed_topology
from croupier.config import DEFAULT_HTTP_PORT, Settings
from croupier.ledger.partitions import DEFAULT_PARTITIONS
from croupier.metrics import Metrics
from holdem import Spot

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"
PROMETHEUS = DEPLOY / "prometheus"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "croupier.json"
PROMTOOL_MISSING = (
    "promtool is not installed; it comes with Debian's prometheus package: "
    "apt-get update && apt-get install -y prometheus"
)

# Labels Prometheus adds to every scraped series, and the bucket bound of histograms.
TARGET_LABELS = {"job", "instance"}
_SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "gauge": ("",),
    "info": ("_info",),
}
_METRIC = re.compile(r"\b(croupier[_:][A-Za-z0-9_:]*|up)\b")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_SELECTOR = re.compile(r"\b(croupier_[A-Za-z0-9_]*)\s*\{([^}]*)\}")
_MATCHER = re.compile(r'(\w+)\s*(?:=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')


def _load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _exported() -> dict[str, set[str]]:
    """Every series name the service exports, with the labels it carries."""
    metrics = Metrics()
    wrappers = [
        w for v in vars(metrics).values() for w in (v.values() if isinstance(v, dict) else [v])
    ]
    labels = {
        wrapper._name: set(wrapper._labelnames)
        for wrapper in wrappers
        if hasattr(wrapper, "_labelnames")
    }
    names: dict[str, set[str]] = {}
    family: Metric
    for family in metrics.registry.collect():
        # Collectors (process, platform, build info) have no wrapper: their samples say.
        found = {name for sample in family.samples for name in sample.labels} - {"le"}
        for suffix in _SUFFIXES[family.type]:
            extra = {"le"} if suffix == "_bucket" else set()
            names[family.name + suffix] = labels.get(family.name, found) | TARGET_LABELS | extra
    return names


EXPORTED = _exported()
#: The serve instances of compose.yaml, in partitioned mode.
INSTANCES = ("croupier-1", "croupier-2", "croupier-3")
#: Nothing lost, nothing stuck: each fires in a rule test and stays quiet in another.
RELIABILITY_ALERTS = (
    "EventsHeld",
    "RoundsTimingOut",
    "RoundsOpenPastTimeout",
    "ResultsSetAside",
    "BrokerDeadLettered",
    "RelayNotActive",
    "PartitionUnowned",
)


def _rules() -> list[dict[str, Any]]:
    doc = _load_yaml(PROMETHEUS / "rules.yml")
    return [rule for group in doc["groups"] for rule in group["rules"]]


def _recorded() -> set[str]:
    return {rule["record"] for rule in _rules() if "record" in rule}


def _panels() -> Iterator[dict[str, Any]]:
    def walk(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for panel in panels:
            yield panel
            yield from walk(panel.get("panels", []))

    yield from walk(json.loads(DASHBOARD.read_text(encoding="utf-8"))["panels"])


def _dashboard_exprs() -> list[str]:
    doc = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    exprs = [t["expr"] for p in _panels() for t in p.get("targets", [])]
    for variable in doc["templating"]["list"]:
        query = variable["query"]
        exprs.append(query["query"] if isinstance(query, dict) else query)
    return exprs


def _metric_names(expr: str) -> set[str]:
    return set(_METRIC.findall(_STRING.sub('""', expr)))


def _check_expr(expr: str, recorded: set[str]) -> list[str]:
    """What is wrong with one PromQL expression: unknown metrics or labels."""
    problems = []
    names = _metric_names(expr)
    raw = {n for n in names if ":" not in n and n != "up"}
    for name in sorted(names):
        if ":" in name and name not in recorded:
            problems.append(f"{name}: no such recording rule in rules.yml")
        elif ":" not in name and name != "up" and name not in EXPORTED:
            problems.append(f"{name}: croupier.metrics.Metrics exports no such series")
    for name, matchers in _SELECTOR.findall(expr):
        for label, value in _MATCHER.findall(matchers):
            if name in EXPORTED and label not in EXPORTED[name]:
                problems.append(f"{name} has no label {label!r}")
            if label == "spot" and "$" not in value:
                unknown = set(value.split("|")) - {s.value for s in Spot}
                if unknown:
                    problems.append(f"{name}: no spot {sorted(unknown)}")
    if raw and raw <= EXPORTED.keys():
        known = set().union(*(EXPORTED[n] for n in raw))
        for group in _GROUPING.findall(expr):
            for label in filter(None, (part.strip() for part in group.split(","))):
                if label not in known:
                    problems.append(f"grouping by {label!r}, which none of {sorted(raw)} has")
    return problems


# tests-24h.yml steps every 5m rather than every minute; the 24h windows cost most of the time.
RULE_TEST_FILES = ("tests.yml", "tests-24h.yml")


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail(PROMTOOL_MISSING, pytrace=False)
    return subprocess.run(
        [promtool, *args], cwd=PROMETHEUS, capture_output=True, text=True, timeout=300
    )


# ------------------------------------------------------------------------------ compose


def test_compose_names_every_service_with_its_image() -> None:
    services = _load_yaml(DEPLOY / "compose.yaml")["services"]
    assert set(services) >= {"postgres", "rabbitmq", *INSTANCES, "prometheus", "grafana", "studio"}
    assert "croupier" not in services, "a single-mode instance beside the partitioned ones"
    assert services["postgres"]["image"].startswith("postgres:15")
    assert services["rabbitmq"]["image"].startswith("rabbitmq:3.13-management")
    assert services[INSTANCES[0]]["build"]["dockerfile"] == "deploy/Dockerfile"
    for name in INSTANCES:
        assert services[name]["image"] == "croupier:local", name
        assert services[name]["command"] == ["serve"], name
    built = [name for name, service in services.items() if "build" in service]
    assert built == [INSTANCES[0]], "one image, built once, run by every Croupier service"
    assert services["studio"]["profiles"] == ["studio"]
    assert services["studio"]["command"][0] == "simulate"
    assert "--amqp" in services["studio"]["command"]


def test_compose_runs_three_instances_in_partitioned_mode() -> None:
    """The same partitioned settings for all three, each told apart: its own hostname (the
    instance id starts with it) and its own host port for /metrics; Prometheus scrapes each."""
    services = _load_yaml(DEPLOY / "compose.yaml")["services"]
    instances = [services[name] for name in INSTANCES]
    environments = [instance["environment"] for instance in instances]
    assert all(env == environments[0] for env in environments)
    env = environments[0]
    for name in ("CROUPIER_PARTITIONED", "CROUPIER_PARTITION_TERM"):
        assert name.removeprefix("CROUPIER_").lower() in Settings.model_fields, name
    chosen = Settings(
        partitioned=env["CROUPIER_PARTITIONED"], partition_term=env["CROUPIER_PARTITION_TERM"]
    )
    assert chosen.partitioned is True
    # PartitionUnowned is set at twice the term the stack runs with.
    alert = next(r for r in _rules() if r.get("alert") == "PartitionUnowned")
    assert f"> {2 * chosen.partition_term:g}" in alert["expr"]
    hostnames = [instance["hostname"] for instance in instances]
    assert hostnames == list(INSTANCES), "distinct hostnames: distinct instance ids"
    published = [p.split(":")[-2] for instance in instances for p in instance["ports"]]
    assert len(set(published)) == len(INSTANCES)
    assert all(p.endswith(f":{DEFAULT_HTTP_PORT}") for i in instances for p in i["ports"])
    for instance in instances:
        assert instance["depends_on"] == {
            "setup": {"condition": "service_completed_successfully"},
            "postgres": {"condition": "service_healthy"},
            "rabbitmq": {"condition": "service_healthy"},
        }
        assert instance["stop_grace_period"] == "15s"
    scraped = _load_yaml(PROMETHEUS / "prometheus.yml")["scrape_configs"]
    croupier = next(job for job in scraped if job["job_name"] == "croupier")
    targets = [t for config in croupier["static_configs"] for t in config["targets"]]
    assert targets == [f"{name}:{DEFAULT_HTTP_PORT}" for name in hostnames]


def test_compose_makes_the_signing_key_once_and_migrates_before_any_instance() -> None:
    """serve never migrates and will not run without its signing key: the one-shot setup
    makes the key on the first run only (keygen refuses to overwrite one) and migrates;
    every instance reads the key from the same volume, read-only."""
    services = _load_yaml(DEPLOY / "compose.yaml")["services"]
    setup = services["setup"]
    assert setup["image"] == "croupier:local"
    assert setup["entrypoint"] == ["sh", "-ec"]
    (script,) = setup["command"]
    steps = [line.strip() for line in script.strip().splitlines()]
    key = services[INSTANCES[0]]["environment"]["CROUPIER_LEDGER_SIGNING_KEY"]
    folder = key.rsplit("/", 1)[0]
    assert key == f"{folder}/ledger-signing.key"
    assert steps == [f"test -f {key} || croupier keygen --out {folder}", "croupier migrate"]
    (volume,) = setup["volumes"]
    name, mounted = volume.split()[0].split(":")
    assert folder.startswith(mounted + "/")
    assert "ledger_signing_key" in Settings.model_fields
    for instance in INSTANCES:
        assert services[instance]["volumes"] == [f"{name}:{mounted}:ro"], instance
    assert name in _load_yaml(DEPLOY / "compose.yaml")["volumes"]
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert f"chown croupier:croupier {mounted}" in dockerfile, "the volume takes the image's owner"


def test_compose_wires_the_environment_the_code_reads() -> None:
    services = _load_yaml(DEPLOY / "compose.yaml")["services"]
    env = services[INSTANCES[0]]["environment"]
    config = (
        Path(__file__).resolve().parents[3] / "services/croupier/croupier/config.py"
    ).read_text()
    for name in ("CROUPIER_DATABASE_URL", "CROUPIER_AMQP_URL", "CROUPIER_HTTP_PORT"):
        assert name in config, f"{name} is no longer read by croupier.config"
        assert name in env, f"compose does not set {name}"
    assert env["CROUPIER_DATABASE_URL"].startswith("postgresql://")
    assert "@postgres:5432/" in env["CROUPIER_DATABASE_URL"]
    assert env["CROUPIER_AMQP_URL"].startswith("amqp://")
    assert "@rabbitmq:5672/" in env["CROUPIER_AMQP_URL"]
    assert int(env["CROUPIER_HTTP_PORT"]) == DEFAULT_HTTP_PORT == 9464
    assert any(
        p.endswith(f"{DEFAULT_HTTP_PORT}:{DEFAULT_HTTP_PORT}")
        for p in services[INSTANCES[0]]["ports"]
    )


def test_compose_runs_the_projector_and_the_read_only_web_service_apart() -> None:
    services = _load_yaml(DEPLOY / "compose.yaml")["services"]
    assert services["projector"]["command"] == ["project", "--follow", "--metrics-port", "9465"]
    scraped = _load_yaml(PROMETHEUS / "prometheus.yml")["scrape_configs"]
    assert {"targets": ["projector:9465"]} in [c for j in scraped for c in j["static_configs"]]
    assert services["web"]["command"] == ["web"]
    env = services["web"]["environment"]
    for name in ("CROUPIER_WEB_PORT", "CROUPIER_PLAYER_TOKEN_SECRET", "CROUPIER_DATABASE_URL"):
        assert name in env, name
        assert name.removeprefix("CROUPIER_").lower() in Settings.model_fields, name
    assert any(p.endswith(f":{env['CROUPIER_WEB_PORT']}") for p in services["web"]["ports"])
    assert "/healthz" in " ".join(services["web"]["healthcheck"]["test"])


def test_compose_starts_things_in_order_of_health() -> None:
    services = _load_yaml(DEPLOY / "compose.yaml")["services"]
    for name in INSTANCES:
        assert services[name]["depends_on"] == {
            "setup": {"condition": "service_completed_successfully"},
            "postgres": {"condition": "service_healthy"},
            "rabbitmq": {"condition": "service_healthy"},
        }
    assert services["setup"]["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    assert services["setup"]["restart"] == "no"
    assert services["studio"]["depends_on"][INSTANCES[0]]["condition"] == "service_healthy"
    assert services["projector"]["depends_on"][INSTANCES[0]]["condition"] == "service_healthy"
    assert services["grafana"]["depends_on"]["prometheus"]["condition"] == "service_healthy"
    for name in ("postgres", "rabbitmq", "prometheus", "grafana"):
        assert services[name]["healthcheck"]["test"], name


def test_dockerfile_runs_serve_as_a_non_root_user_with_a_healthcheck() -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert dockerfile.startswith("#") and "FROM python:3.11-slim" in dockerfile
    assert "pip install ." in dockerfile
    user = re.findall(r"^USER\s+(\S+)", dockerfile, re.M)
    assert user and user[-1] not in {"root", "0"}
    assert re.search(r"^HEALTHCHECK .*\n?.*/healthz", dockerfile, re.M)
    assert f"EXPOSE {DEFAULT_HTTP_PORT}" in dockerfile


def test_rabbitmq_definitions_declare_the_routed_topology_as_the_service_does() -> None:
    """The stack runs partitioned: the broker is seeded with the routed topology for the
    default partition count, entry for entry what the service declares (an exchange declared
    again with other arguments would stop it), and never the single feed queue (a vhost
    carries one mode), followed by the stand-in wallet queue."""
    definitions = json.loads((DEPLOY / "rabbitmq" / "definitions.json").read_text())
    routed = rabbitmq_definitions(routed_topology(DEFAULT_PARTITIONS), "/")
    for kind in ("exchanges", "queues", "bindings"):
        assert definitions[kind][: len(routed[kind])] == routed[kind], kind
    queues = {q["name"]: q for q in definitions["queues"]}
    assert bus.FEED_QUEUE not in queues, "the single-consumer queue beside the routed ones"
    assert {partition_queue(p, DEFAULT_PARTITIONS) for p in range(DEFAULT_PARTITIONS)} <= set(
        queues
    )
    assert not {b["destination"] for b in definitions["bindings"]} & {
        partition_queue(p, DEFAULT_PARTITIONS) for p in range(DEFAULT_PARTITIONS)
    }, "tables are bound by the router, not seeded"
    # Beyond the topology: only the stand-in wallet queue, bound to the results.
    extra_queues = definitions["queues"][len(routed["queues"]) :]
    assert [q["name"] for q in extra_queues] == ["wallets.settlements"]
    extra = definitions["bindings"][len(routed["bindings"]) :]
    assert [(b["source"], b["destination"]) for b in extra] == [
        (bus.SETTLEMENTS_EXCHANGE, "wallets.settlements")
    ]
    assert len(definitions["exchanges"]) == len(routed["exchanges"])
    vhosts = {e["vhost"] for k in ("exchanges", "queues", "bindings") for e in definitions[k]}
    assert vhosts == {"/"}
    users = {u["name"] for u in definitions["users"]}
    services = _load_yaml(DEPLOY / "compose.yaml")["services"]
    for name in INSTANCES:
        amqp = services[name]["environment"]["CROUPIER_AMQP_URL"]
        assert amqp.split("//", 1)[1].split(":", 1)[0] in users
    everything = {
        (p["user"], p["vhost"], p["configure"], p["write"], p["read"])
        for p in definitions["permissions"]
    }
    assert ("croupier", "/", ".*", ".*", ".*") in everything, "the router binds tables"


def test_the_printed_routed_definitions_are_the_seeded_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`croupier topology routed` prints what deploy/rabbitmq/definitions.json seeds."""
    from floor.cli import main

    args = ["topology", "routed", "--partitions", str(DEFAULT_PARTITIONS)]
    assert main(args) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == rabbitmq_definitions(routed_topology(DEFAULT_PARTITIONS), "/")
    assert main(["topology", "single", "--vhost", "prod"]) == 0
    single = json.loads(capsys.readouterr().out)
    assert single == rabbitmq_definitions(TOPOLOGY, "prod")
    assert single["queues"][0]["name"] == bus.FEED_QUEUE


def _rabbitmq_conf() -> dict[str, str]:
    """deploy/rabbitmq/croupier.conf as the broker reads it: ``key = value`` lines."""
    settings = {}
    for row in (DEPLOY / "rabbitmq" / "croupier.conf").read_text().splitlines():
        key, equals, value = row.split("#", 1)[0].partition("=")
        if equals:
            settings[key.strip()] = value.strip()
    return settings


def test_rabbitmq_refuses_messages_over_the_size_croupier_is_built_for() -> None:
    mounts = _load_yaml(DEPLOY / "compose.yaml")["services"]["rabbitmq"]["volumes"]
    assert "./rabbitmq/croupier.conf:/etc/rabbitmq/conf.d/20-croupier.conf:ro" in mounts
    assert int(_rabbitmq_conf()["max_message_size"]) == bus.MAX_MESSAGE_BYTES
    # The contract's maximum fits, with room: a little over it is recorded as too_large.
    assert MAX_BODY_BYTES == bus.KEPT_BYTES < bus.MAX_MESSAGE_BYTES
    # What serve holds of the feed at once stays small whatever the broker delivers.
    assert AmqpBus("amqp://").prefetch * bus.KEPT_BYTES <= 32 * 2**20
    assert bus.MAX_BATCH_BYTES <= 2 * 2**20


# --------------------------------------------------------------------------- prometheus


def test_prometheus_scrapes_croupier_on_its_port() -> None:
    config = _load_yaml(PROMETHEUS / "prometheus.yml")
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    targets = [t for sc in jobs["croupier"]["static_configs"] for t in sc["targets"]]
    assert targets == [f"{name}:{DEFAULT_HTTP_PORT}" for name in INSTANCES]
    assert jobs["croupier"].get("metrics_path", "/metrics") == "/metrics"


def test_exported_names_include_the_suffixes_prometheus_adds() -> None:
    assert "croupier_events_consumed_total" in EXPORTED
    assert "croupier_settlement_latency_seconds_bucket" in EXPORTED
    assert "le" in EXPORTED["croupier_settlement_latency_seconds_bucket"]
    assert "croupier_outbox_backlog" in EXPORTED
    assert "croupier_events_consumed" not in EXPORTED


def test_rules_read_only_metrics_and_labels_the_service_exports() -> None:
    recorded = _recorded()
    problems = [
        f"{rule.get('record') or rule['alert']}: {p}"
        for rule in _rules()
        for p in _check_expr(rule["expr"], recorded)
    ]
    assert not problems, "\n".join(problems)


def test_the_required_recording_rules_and_alerts_exist() -> None:
    rules = _rules()
    recorded = _recorded()
    alerts = {rule["alert"]: rule for rule in rules if "alert" in rule}
    assert {
        "CroupierDown",
        "CroupierNotReady",
        "RejectionsSpike",
        "DeadLettersGrowing",
        "OutboxBacklog",
        "UnroutableResults",
        "SettlementLatencyHigh",
        "DealsNotFair",
        "PaymentsNotFair",
        "AppendLockSaturated",
        *RELIABILITY_ALERTS,
    } <= alerts.keys()
    for name, alert in alerts.items():
        annotations = alert["annotations"]
        assert annotations["summary"] and annotations["description"], name
        assert "First check" in annotations["description"], name
        assert alert["labels"]["severity"] in {"page", "ticket"}, name
    for name in ("DealsNotFair", "PaymentsNotFair"):
        expr = alerts[name]["expr"]
        assert "> 4" in expr and ">= 1000" in expr, "a stated threshold and a volume floor"
    assert "RTPDrift" not in alerts, "the naive drift is context, not an alert"
    assert "croupier_theoretical_rtp" not in " ".join(r["expr"] for r in rules)
    assert {
        "croupier:hold_minor_units:rate5m",
        "croupier:rtp:ratio1h",
        "croupier:rtp:ratio24h",
        "croupier:main_game_return_per_ante:ratio24h",
        "croupier:rtp_drift_naive:24h",
        "croupier:theoretical_rtp:par",
        *(
            f"croupier:integrity_{figure}_z:{window}"
            for figure in ("deal", "play")
            for window in ("1h", "24h", "7d", "since_start")
        ),
        "croupier:events_rejected:ratio_rate5m",
        "croupier:settlement_latency_seconds:p50_rate5m",
        "croupier:settlement_latency_seconds:p99_rate5m",
    } <= recorded


def test_the_theoretical_rtp_constants_are_the_par_sheets() -> None:
    """The naive drift's reference is a constant of each pay table, equal to its PAR sheet."""
    from holdem import load_paytable, paytable_ids
    from holdem.odds.par import load_par

    expr = next(r["expr"] for r in _rules() if r.get("record") == "croupier:theoretical_rtp:par")
    found = re.findall(
        r'vector\(([0-9.]+)\), "game", "(\w+)", "", ""\), "paytable", "([^"]+)"', expr
    )
    stated = {paytable: float(value) for value, _, paytable in found}
    assert stated == {i: float(load_par(load_paytable(i)).base.rtp()) for i in paytable_ids()}


def test_promtool_checks_the_config() -> None:
    result = _promtool("check", "config", "prometheus.yml")
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_checks_the_rules() -> None:
    result = _promtool("check", "rules", "rules.yml")
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_runs_the_rule_unit_tests() -> None:
    result = _promtool("test", "rules", *RULE_TEST_FILES)
    assert result.returncode == 0, result.stdout + result.stderr
    tested = [t for name in RULE_TEST_FILES for t in _load_yaml(PROMETHEUS / name)["tests"]]
    alerts = {a["alertname"] for t in tested for a in t.get("alert_rule_test", [])}
    checked = (
        "RejectionsSpike",
        "OutboxBacklog",
        "UnroutableResults",
        "DealsNotFair",
        *RELIABILITY_ALERTS,
    )
    assert set(checked) <= alerts
    for name in checked:
        cases = [a for t in tested for a in t.get("alert_rule_test", []) if a["alertname"] == name]
        assert any(c["exp_alerts"] for c in cases), f"no test where {name} fires"
        assert any(not c["exp_alerts"] for c in cases), f"no test where {name} stays quiet"


# ------------------------------------------------------------------------------ grafana


def test_grafana_provisioning_points_at_the_dashboard_and_datasource() -> None:
    provisioning = DEPLOY / "grafana" / "provisioning"
    datasources = _load_yaml(provisioning / "datasources" / "prometheus.yaml")["datasources"]
    assert [(d["type"], d["uid"], d["url"]) for d in datasources] == [
        ("prometheus", "prometheus", "http://prometheus:9090")
    ]
    providers = _load_yaml(provisioning / "dashboards" / "croupier.yaml")["providers"]
    compose = _load_yaml(DEPLOY / "compose.yaml")["services"]["grafana"]
    assert f"./grafana/dashboards:{providers[0]['options']['path']}:ro" in compose["volumes"]


def test_dashboard_is_valid_json_with_a_uid_and_the_rows() -> None:
    doc = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert doc["uid"] and doc["title"]
    rows = [p["title"] for p in _panels() if p["type"] == "row"]
    assert rows == [
        "Throughput",
        "Money",
        "Game integrity",
        "Quality",
        "Latency",
        "Outbox",
        "Partitions",
    ]
    ids = [p["id"] for p in _panels()]
    assert len(ids) == len(set(ids))


def test_every_panel_has_the_provisioned_datasource_and_targets() -> None:
    for panel in _panels():
        if panel["type"] in ("row", "text"):
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "prometheus"}, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["expr"].strip(), panel["title"]
            assert target.get("datasource", panel["datasource"])["uid"] == "prometheus"


def test_dashboard_reads_only_metrics_the_service_exports_or_rules_record() -> None:
    recorded = _recorded()
    exprs = _dashboard_exprs()
    problems = [p for expr in exprs for p in _check_expr(expr, recorded)]
    assert not problems, "\n".join(problems)
    used = set().union(*(_metric_names(e) for e in exprs))
    assert used & recorded, "the dashboard should read the recording rules"


def test_the_dashboard_speaks_to_a_compliance_officer() -> None:
    """Money titles name the unit; the integrity panels say what they mean; naive is context."""
    panels = [p for p in _panels() if p["type"] not in ("row", "text")]
    for panel in panels:
        if any("minor_units" in t["expr"] for t in panel["targets"]):
            assert "minor units" in panel["title"], panel["title"]
        for target in panel["targets"]:
            legend = target.get("legendFormat", "")
            if "paytable" in target["expr"] and "paytable" in legend:
                assert "{{game}}" in legend or "{{paytable}}" in legend
    titles = {p["title"]: p for p in panels}
    naive = [t for t, p in titles.items() if any("drift_naive" in x["expr"] for x in p["targets"])]
    assert naive and all(t.startswith("Context only") for t in naive)
    z = [
        p
        for p in panels
        if any("integrity_" in x["expr"] and "_z:" in x["expr"] for x in p["targets"])
    ]
    assert len(z) == 2 and all("z-score" in p["title"] for p in z)
    assert any(p["title"].startswith("Rounds behind") for p in panels)
    text = next(p for p in _panels() if p["type"] == "text")["options"]["content"]
    assert "from the ledger" in text and "context only" in text
