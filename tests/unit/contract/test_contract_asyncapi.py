"""contracts/asyncapi.yaml parses, its references resolve, and it names the agreed topology."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from contract.feed import EventType
from croupier.bus import FEED_QUEUE
from croupier.bus.topology import (
    ROUTED_EXCHANGE,
    TOPOLOGY,
    UNROUTED_QUEUE,
    partition_queue,
    routed_topology,
    table_binding,
)
from croupier.ledger.partitions import DEFAULT_PARTITIONS, MAX_PARTITIONS

CONTRACTS = Path(__file__).resolve().parents[3] / "contracts"
DOCUMENT = CONTRACTS / "asyncapi.yaml"


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    loaded = yaml.safe_load(DOCUMENT.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def refs(node: Any) -> Iterator[str]:
    """Every $ref value in the document."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            else:
                yield from refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from refs(item)


def resolve(document: Any, pointer: str) -> Any:
    """Follow a JSON pointer ('/a/b') through ``document``."""
    node = document
    for part in filter(None, pointer.split("/")):
        part = part.replace("~1", "/").replace("~0", "~")
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def test_document_is_asyncapi_3(doc: dict[str, Any]) -> None:
    assert doc["asyncapi"] == "3.0.0"
    assert {"info", "channels", "operations", "components"} <= set(doc)


def test_every_ref_resolves(doc: dict[str, Any]) -> None:
    found = list(refs(doc))
    assert found
    for ref in found:
        target, _, pointer = ref.partition("#")
        if not target:
            resolve(doc, pointer)
            continue
        path = (DOCUMENT.parent / target).resolve()
        assert path.is_file(), f"{ref} points at a missing file"
        if pointer:
            resolve(yaml.safe_load(path.read_text(encoding="utf-8")), pointer)


def test_every_feed_event_has_a_message(doc: dict[str, Any]) -> None:
    messages = doc["components"]["messages"]
    by_name = {message["name"]: message for message in messages.values()}
    for event_type in EventType:
        schema_ref = by_name[str(event_type)]["payload"]["schema"]["$ref"]
        assert schema_ref == f"./feed/{event_type}.schema.json"
    settlement = by_name["settlement.result"]["payload"]["schema"]["$ref"]
    assert settlement == "./settlement/settlement-result.schema.json"


def test_exchanges_and_queue(doc: dict[str, Any]) -> None:
    channels = doc["channels"]
    feed = channels["studioFeed"]["bindings"]["amqp"]["exchange"]
    assert (feed["name"], feed["type"], feed["durable"]) == ("studio.feed", "topic", True)
    assert channels["studioFeed"]["address"] == "{table_id}.{event_type}"
    out = channels["settlements"]["bindings"]["amqp"]["exchange"]
    assert (out["name"], out["type"], out["durable"]) == ("croupier.settlements", "topic", True)
    assert channels["settlements"]["address"] == "{currency}.{player_id}"
    queue = channels["croupierFeed"]
    assert queue["bindings"]["amqp"]["queue"]["durable"] is True
    arguments = queue["x-amqp-queue-arguments"]
    assert arguments["x-queue-type"] == "quorum"
    assert arguments["x-dead-letter-exchange"] == "croupier.dead-letter"
    assert arguments["x-delivery-limit"] >= 1
    assert {"exchange": "studio.feed", "routingKey": "#"} in queue["x-amqp-bound-to"]


def test_operations(doc: dict[str, Any]) -> None:
    operations = doc["operations"]
    assert operations["receiveFeed"]["action"] == "receive"
    assert operations["receiveFeed"]["channel"]["$ref"] == "#/channels/croupierFeed"
    send = operations["sendSettlementResult"]
    assert send["action"] == "send"
    assert send["bindings"]["amqp"]["deliveryMode"] == 2
    trait = doc["components"]["messageTraits"]["feedEvent"]
    assert trait["x-amqp-properties"]["message_id"] == "$message.payload#/event_id"
    assert trait["contentType"] == "application/json"


def test_the_document_states_the_topology_the_service_declares(doc: dict[str, Any]) -> None:
    exchanges = {
        channel["bindings"]["amqp"]["exchange"]["name"]: channel["bindings"]["amqp"]["exchange"]
        for channel in doc["channels"].values()
        if channel.get("bindings", {}).get("amqp", {}).get("is") == "routingKey"
    }
    for exchange in TOPOLOGY.exchanges:
        assert (exchanges[exchange.name]["type"], exchanges[exchange.name]["durable"]) == (
            exchange.type,
            True,
        )
    queue = doc["channels"]["croupierFeed"]
    assert queue["x-amqp-queue-arguments"] == dict(TOPOLOGY.queue(FEED_QUEUE).arguments)
    assert queue["x-amqp-bound-to"] == [
        {"exchange": b.exchange, "routingKey": b.routing_key} for b in TOPOLOGY.bound_to(FEED_QUEUE)
    ]
    descriptions = " ".join(c.get("description", "") for c in doc["channels"].values())
    for other in TOPOLOGY.queues:
        assert f"`{other.name}`" in descriptions or other.name == FEED_QUEUE


def _exchange_channels(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        channel["bindings"]["amqp"]["exchange"]["name"]: channel
        for channel in doc["channels"].values()
        if channel.get("bindings", {}).get("amqp", {}).get("is") == "routingKey"
    }


def _queue_channels(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        channel["bindings"]["amqp"]["queue"]["name"]: channel
        for channel in doc["channels"].values()
        if channel.get("bindings", {}).get("amqp", {}).get("is") == "queue"
    }


def test_the_document_states_the_routed_topology_the_service_declares(
    doc: dict[str, Any],
) -> None:
    routed = routed_topology(DEFAULT_PARTITIONS)
    exchanges = _exchange_channels(doc)
    for exchange in routed.exchanges:
        stated = exchanges[exchange.name]
        amqp = stated["bindings"]["amqp"]["exchange"]
        assert (amqp["type"], amqp["durable"]) == (exchange.type, True), exchange.name
        assert stated.get("x-amqp-exchange-arguments", {}) == dict(exchange.arguments)
    for binding in routed.exchange_bindings:
        bound = {"exchange": binding.source, "routingKey": binding.routing_key}
        assert bound in exchanges[binding.destination]["x-amqp-bound-to"]
    queues = _queue_channels(doc)
    # The unrouted queue and the dead-letter queues by name; every partition's queue by the
    # address template, with the arguments and the binding the router makes per table.
    unrouted = queues[UNROUTED_QUEUE]
    assert unrouted["x-amqp-queue-arguments"] == dict(routed.queue(UNROUTED_QUEUE).arguments)
    assert unrouted["x-amqp-bound-to"] == [
        {"exchange": b.exchange, "routingKey": b.routing_key}
        for b in routed.bound_to(UNROUTED_QUEUE)
    ]
    channel = doc["channels"]["partitionFeed"]
    template = channel["address"]
    assert channel["bindings"]["amqp"]["queue"]["name"] == template
    named = [template.format(partition=str(p).zfill(2)) for p in range(DEFAULT_PARTITIONS)]
    partitions = [q for q in routed.queues if q.name.startswith(template.split("{")[0])]
    assert named == [q.name for q in partitions]
    for queue in partitions:
        assert channel["x-amqp-queue-arguments"] == dict(queue.arguments), queue.name
        assert not routed.bound_to(queue.name), "the router binds tables, not the topology"
    assert channel["x-amqp-bound-to"] == [
        {"exchange": ROUTED_EXCHANGE, "routingKey": table_binding("{table_id}")}
    ]
    widest = partition_queue(MAX_PARTITIONS - 1, MAX_PARTITIONS)
    assert widest.endswith("p4095") and partition_queue(7, MAX_PARTITIONS).endswith("p0007")
    assert "`p0007` of 4096" in channel["parameters"]["partition"]["description"]
    descriptions = " ".join(c.get("description", "") for c in doc["channels"].values())
    for queue in routed.queues:
        assert queue.name in queues or queue in partitions or f"`{queue.name}`" in descriptions
    assert f"`{partition_queue(DEFAULT_PARTITIONS - 1, DEFAULT_PARTITIONS)}`" in descriptions
    assert "sha256(table_id)[:8]" in channel_text(doc, ROUTED_EXCHANGE)


def channel_text(doc: dict[str, Any], exchange: str) -> str:
    """The description of the channel of ``exchange``."""
    return str(_exchange_channels(doc)[exchange]["description"])


def test_the_routed_operations(doc: dict[str, Any]) -> None:
    operations = doc["operations"]
    assert operations["receivePartitionFeed"]["channel"]["$ref"] == "#/channels/partitionFeed"
    assert operations["routeNewTables"]["channel"]["$ref"] == "#/channels/unroutedFeed"
    for name in ("receivePartitionFeed", "routeNewTables"):
        assert operations[name]["action"] == "receive"
        assert operations[name]["bindings"]["amqp"]["ack"] is True
