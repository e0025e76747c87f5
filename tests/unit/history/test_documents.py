"""The players' documents folded on plain data are, byte for byte, what the models give.

The reference below is the rounds projection as it was written on the models: the round
folded by :func:`recall`, cut by :func:`for_viewer` and encoded by pydantic, and each
player's row a ``PlayerRound`` with ``json.dumps`` of its results. Rounds of every kind are
compared: shared hands, boxes, jackpots, voids, a studio feed with faults (held, rejected
and redelivered events, wrong calls, late bets), and the same facts with hostile texts.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from history_rounds import boxes_round, jackpot_round, settle, shared_round, voided_round
from projection_suite import TABLES, studio_feed
from projection_suite import settle as settle_feed

from croupier.history.documents import player_documents
from croupier.history.models import PlayerRound, Result
from croupier.history.recall import for_viewer, participants, paytable_of, recall
from croupier.history.viewer import Viewer
from croupier.ledger import Ledger, RecordedEvent, open_ledger
from croupier.settlement.round import HELD, REJECTED, SETTLED, VOIDED
from studio.config import Faults, StudioConfig, parse_table_specs
from studio.feed import simulate

#: Texts that break a document put together from pieces, or escaped differently by the
#: json module, pydantic and msgspec, if any of them were written wrong.
HOSTILE = (
    '","verification":null,"x":"',
    ',"timeline":[],"verification":{}}',
    'quote " backslash \\ slash / nul \x00 bell \x07 tab \t del \x7f',
    '\u2028\u2029 \U0001f0a1 é ,"',
)


def reference(
    table_id: str, round_id: str, facts: Sequence[RecordedEvent], closing: RecordedEvent
) -> tuple[list[tuple[str, str]], list[tuple[Any, ...]]]:
    """The recalls and player rows as the models give them."""
    data = closing.data
    table = paytable_of(data["paytable"]["id"], data["paytable"]["version"])
    whole = recall(table_id, round_id, facts)
    assert whole is not None
    recalls, seen = [], {}
    for player_id in sorted(participants(whole)):
        shown = for_viewer(whole, Viewer(player_id=player_id))
        assert shown is not None
        seen[player_id] = shown
        recalls.append((player_id, shown.model_dump_json()))
    owners: dict[tuple[str, str], list[Result]] = {}
    for result in whole.results:
        owners.setdefault((result.player_id, result.currency), []).append(result)
    rows = []
    for (player_id, currency), results in owners.items():
        stake = sum(r.stake for r in results)
        returned = sum(r.returned for r in results)
        antes = {r.bet_id for r in results if r.spot == "ante"}
        shown = seen[player_id]
        document = PlayerRound(
            table_id=table_id,
            round_id=round_id,
            game=str(table.game) if table else "",
            paytable_id=data["paytable"]["id"],
            status="settled" if closing.type == SETTLED else "voided",
            closed_at=data["event"].get("occurred_at"),
            position=closing.position,
            currency=currency,
            stake=stake,
            returned=returned,
            net=returned - stake,
            wagers=results,
            decisions=[d for d in shown.decisions if d.ante_bet_id in antes],
            cards=shown.cards,
            void_reason=shown.void_reason,
        )
        wagers = json.dumps([r.model_dump() for r in results], separators=(",", ":"))
        rows.append((player_id, currency, stake, returned, wagers, document.model_dump_json()))
    return recalls, rows


def plain(
    table_id: str, round_id: str, facts: Sequence[RecordedEvent], closing: RecordedEvent
) -> tuple[list[tuple[str, str]], list[tuple[Any, ...]]]:
    data = closing.data
    table = paytable_of(data["paytable"]["id"], data["paytable"]["version"])
    found = player_documents(
        table_id,
        round_id,
        facts,
        game=str(table.game) if table else "",
        paytable_id=data["paytable"]["id"],
        status="settled" if closing.type == SETTLED else "voided",
        closed_at=data["event"].get("occurred_at"),
    )
    rows = [
        (r.player_id, r.currency, r.stake, r.returned, r.wagers, r.document) for r in found.rows
    ]
    return found.recalls, rows


def faulty_feed(seed: int) -> list[bytes]:
    """A feed with every fault the studio makes: held, rejected and malformed events."""
    faults = Faults(
        void=0.1,
        duplicate_card=0.05,
        bad_card=0.05,
        missing_cards=0.05,
        redelivery=0.1,
        out_of_order=0.2,
        wrong_call=0.1,
        late_bet=0.1,
        malformed=0.05,
    )
    config = StudioConfig(
        tables=parse_table_specs(list(TABLES), prefix=f"f{seed}"),
        rounds=30,
        seed=seed,
        side_bet_rate=0.5,
        faults=faults,
    )
    return [message.body for message in simulate(config)]


async def closed_rounds(ledger: Ledger) -> list[tuple[str, str, list[RecordedEvent]]]:
    """Each round's facts up to the one that closes it, as the projection folds them."""
    streams: dict[str, list[RecordedEvent]] = {}
    closed = []
    after = 0
    while page := await ledger.read_all(after, 1000):
        for fact in page:
            if not fact.stream.startswith("round:"):
                continue
            streams.setdefault(fact.stream, []).append(fact)
            if fact.type in (SETTLED, VOIDED):
                _, table_id, round_id = fact.stream.split(":", 2)
                closed.append((table_id, round_id, streams.pop(fact.stream)))
        after = page[-1].position
    return closed


def hostile(
    table_id: str, round_id: str, facts: list[RecordedEvent], text: str
) -> tuple[str, str, list[RecordedEvent]]:
    """The same round with ``text`` in its id, in every player's id and in its void reason."""
    players = {
        f.data["event"]["payload"]["player_id"]
        for f in facts
        if f.data.get("event", {}).get("event_type") == "bet.placed"
    }
    names = {p: f"{p}{text}" for p in players} | {round_id: f"{round_id}{text}"}

    def swap(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: swap(v) for k, v in value.items()}
        if isinstance(value, list):
            return [swap(v) for v in value]
        if isinstance(value, str):
            return names.get(value, value)
        return value

    renamed = f"{round_id}{text}"
    changed = []
    for fact in facts:
        data = swap(fact.data)
        if fact.type == VOIDED:
            data["reason"] = f"{data.get('reason')}{text}"
        changed.append(fact._replace(stream=f"round:{table_id}:{renamed}", data=data))
    return table_id, renamed, changed


async def test_the_plain_fold_gives_the_models_documents_byte_for_byte() -> None:
    async with open_ledger("sqlite:///:memory:") as ledger:
        await ledger.migrate()
        await settle(ledger, [shared_round(), boxes_round(), jackpot_round(), voided_round()])
        for seed in (5, 11, 23):
            await settle_feed(ledger, studio_feed(rounds=25, seed=seed, prefix=f"s{seed}"))
        await settle_feed(ledger, faulty_feed(31))
        rounds = await closed_rounds(ledger)
    varied = [*rounds]
    for index, text in enumerate(HOSTILE):
        varied += [hostile(t, r, f, text) for t, r, f in rounds[index::7]]
    kinds: set[str] = set()
    documents = 0
    for table_id, round_id, facts in varied:
        expected = reference(table_id, round_id, facts, facts[-1])
        assert plain(table_id, round_id, facts, facts[-1]) == expected, (table_id, round_id)
        kinds.update(f.type for f in facts)
        documents += len(expected[0]) + len(expected[1])
    assert {SETTLED, VOIDED, HELD, REJECTED} <= kinds  # every kind of fact was folded
    assert len(varied) > 150 and documents > 1_000
