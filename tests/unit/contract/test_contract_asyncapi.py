"""contracts/asyncapi.yaml parses, its references resolve, and it names the agreed topology."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from contract.feed import EventType
from croupier.bus import FEED_QUEUE
from croupier.bus.topology import TOPOLOGY

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
