"""The relay publishes a dead letter only when it is exactly the dead letter of the chained
rejection it names: bytes that are not UTF-8, a message over the contract's maximum (its
first ``KEPT_BYTES``, size and digest), and a rule rejection's delivery all pass as
written; any change is refused."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from croupier_feeds import RoundFeed, line

from croupier.bus import KEPT_BYTES, SHA256_HEADER, SIZE_HEADER
from croupier.bus.memory import MemoryBus
from croupier.ledger import Ledger, open_ledger
from croupier.metrics import Metrics
from croupier.settlement.deadletters import letter_problem
from croupier.settlement.relay import OutboxRelay
from croupier.settlement.settler import Inbound, Settler


@pytest.fixture
async def ledger(tmp_path: Path) -> AsyncIterator[Ledger]:
    async with open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}") as opened:
        await opened.migrate()
        yield opened


async def test_real_dead_letters_pass_and_changed_ones_do_not(ledger: Ledger) -> None:
    f = RoundFeed(table_id="t-dl")
    opened = f.opened()
    again = {**opened, "event_id": "0b6f1f8e-5a47-4c1e-9a4e-0000000000aa"}  # already open
    bodies = [
        b"\xff\xfe not utf-8",
        b'{"pad": "' + b"x" * (70 * 1024) + b'"}',
        line(opened).encode(),
        json.dumps(again, indent=2).encode(),
    ]
    settler = Settler(ledger, dead_letters=True)
    await settler.handle([Inbound(b, n, "t-dl.x", f"m{n}") for n, b in enumerate(bodies, 1)])
    pending = await ledger.pending_outbox()
    letters = [m for m in pending if m.exchange == "croupier.dead-letter"]
    assert len(letters) == 3
    events = await ledger.vouched(m.position for m in letters)
    for letter in letters:
        fact = events[letter.position]
        assert letter_problem(fact, letter.message_id, letter.routing_key, letter.body) is None
        for change in ({"code": "contract"}, {"reason": "fine"}, {"text": "{}"}):
            if letter.body.get("code") == change.get("code"):
                continue
            changed = {**letter.body, **change}
            changed.pop("base64" if "text" in change else "", None)
            assert letter_problem(fact, letter.message_id, letter.routing_key, changed)
    (cut_letter,) = [m for m in letters if "size" in m.body]
    fact = events[cut_letter.position]
    for change in (
        {"size": len(bodies[1]) + 1},
        {"sha256": "0" * 64},
        {"text": bodies[1][: KEPT_BYTES + 1].decode()},
        {"text": bodies[1][: KEPT_BYTES - 1].decode()},
    ):
        changed = {**cut_letter.body, **change}
        assert letter_problem(fact, cut_letter.message_id, cut_letter.routing_key, changed)
    whole = {k: v for k, v in cut_letter.body.items() if k not in ("size", "sha256")}
    assert letter_problem(fact, cut_letter.message_id, cut_letter.routing_key, whole)
    bus, metrics = MemoryBus(), Metrics()
    await OutboxRelay(ledger, bus, metrics).relay_once()
    assert len(bus.dead_letters) == 3
    assert bus.dead_letters[0].raw == b"\xff\xfe not utf-8"
    cut = bus.dead_letters[1]  # over the contract's maximum: its first bytes, size and digest
    assert cut.raw == bodies[1][:KEPT_BYTES]
    assert cut.headers is not None
    assert cut.headers[SIZE_HEADER] == str(len(bodies[1]))
    assert cut.headers[SHA256_HEADER] == hashlib.sha256(bodies[1]).hexdigest()
    assert metrics.registry.get_sample_value("croupier_results_refused_total") in (None, 0.0)
