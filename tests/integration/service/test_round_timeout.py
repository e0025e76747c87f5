"""A round the studio leaves open is voided by ``croupier serve`` after
CROUPIER_ROUND_TIMEOUT: the wallet gets the refunds, the studio's late events are rejected
with a code, and nothing is left open."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from croupier_feeds import RoundFeed, line
from service_harness import (
    Wallet,
    eventually,
    http_get,
    ledger_events,
    metric,
    prepare_broker,
    serve_process,
)

from croupier.cli import main
from croupier.settlement.results import message_id
from croupier.settlement.round import REJECTED, VOIDED, stream_name
from studio.feed import FeedMessage
from studio.publisher import publish

pytestmark = pytest.mark.integration


def _messages(events: list[dict[str, object]]) -> list[FeedMessage]:
    return [
        FeedMessage(
            f"{e['table_id']}.{e['event_type']}", line(e).encode(), str(e["event_id"]), e, "t-late"
        )
        for e in events
    ]


async def test_serve_voids_a_round_left_open_past_the_round_timeout(
    amqp_vhost: str,
    postgres_database: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("CROUPIER_ROUND_TIMEOUT", "2")
    feed = RoundFeed(table_id="t-late", round_id="r1")
    first = [feed.opened(), feed.bet("a1"), feed.bet("x1", "aa_bonus", amount=500)]
    rest = [feed.hole("As Ad"), feed.cards("dealer", "9c 9d"), feed.cards("board", "Ah 7c 2d")]
    await prepare_broker(amqp_vhost)
    wallet = Wallet(amqp_vhost)
    with serve_process(postgres_database, amqp_vhost, tmp_path / "serve.log") as served:
        await served.ready()
        assert await publish(_messages(first), amqp_vhost) == len(first)
        refund = message_id("t-late", "r1", "p1", "EUR")
        await wallet.wait_for([refund], timeout=60)
        assert await publish(_messages(rest), amqp_vhost) == len(rest)

        async def rejected_late() -> bool:
            facts = [e for e in await ledger_events(postgres_database) if e.type == REJECTED]
            return len(facts) == len(rest)

        await eventually(rejected_late, 60, "the late events rejected")
        _, text = await http_get(served.port, "/metrics")
        assert metric(text, "croupier_rounds_timed_out_total") == 1

    (result,) = [r.body for r in wallet.received]
    assert {b["bet_id"]: (b["stake"], b["returned"], b["outcome"]) for b in result["bets"]} == {
        "a1": (100, 100, "refund"),
        "x1": (500, 500, "refund"),
    }
    events = await ledger_events(postgres_database)
    stream = [e for e in events if e.stream == stream_name("t-late", "r1")]
    (void,) = [e for e in stream if e.type == VOIDED]
    assert void.data["code"] == "round_timeout"
    assert {e.data["code"] for e in stream if e.type == REJECTED} == {"after_timeout"}
    listing = ["rounds", "--open", "--ledger", postgres_database, "--json"]
    assert await asyncio.to_thread(main, listing) == 0
    assert json.loads(capsys.readouterr().out)["open"] == 0
