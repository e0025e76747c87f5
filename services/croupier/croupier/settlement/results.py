"""Wallet results: what a closing fact (``round.settled`` or ``round.voided``) pays each
player, shaped as the settlement contract's messages (``contract.settlement``,
docs/feed.md "Output: settlement results") and put in the outbox.

The same shaping serves the settler (writing the outbox), the relay and ``verify``
(re-deriving what a chained fact put there, :func:`outbox_rule`) and the wagers read model.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator, Mapping
from typing import Any, Final, cast

from contract.canonical import Encoded, canonical_json, quote, read_json
from croupier.bus import SETTLEMENTS_EXCHANGE
from croupier.ledger import OutboxMessage
from croupier.ledger.audit import Expected
from croupier.settlement.facts import closing
from croupier.settlement.round import SETTLED, VOIDED

_RESULT_NAMESPACE: Final = uuid.UUID("5f0c1c1e-6a4d-4f51-9d7e-4b8f0e0d2a61")
_NAMESPACE_BYTES: Final = _RESULT_NAMESPACE.bytes

#: A settlement result as the JSON body wallets receive (a valid ``SettlementResult``).
ResultBody = dict[str, Any]


def message_id(table_id: str, round_id: str, player_id: str, currency: str) -> str:
    """The stable id of a player's settlement result: wallets deduplicate on it.

    ``str(uuid.uuid5(namespace, "table/round/player/currency"))``, written out directly: a
    UUID object per result costs more than the digest.
    """
    name = f"{table_id}/{round_id}/{player_id}/{currency}".encode()
    digest = bytearray(hashlib.sha1(_NAMESPACE_BYTES + name, usedforsecurity=False).digest())
    digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
    digest[8] = (digest[8] & 0x3F) | 0x80  # the RFC 4122 variant
    text = digest[:16].hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def settlement_results(closed: Mapping[str, Any], position: int) -> list[ResultBody]:
    """One result per player and currency from a ``round.settled`` or ``round.voided`` fact."""
    return [{**body, "ledger_position": position} for body in result_bodies(closed)]


def result_bodies(closed: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The JSON bodies of :func:`settlement_results`, without ``ledger_position``.

    Plain dicts, built without re-validation: the fact was produced by the rules core,
    which already guarantees each line's outcome and amount, and the totals are summed
    right here.
    """
    data = closing(closed)
    event = data["event"]
    table_id, round_id = event["table_id"], event["round_id"]
    by_owner: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for line in data["results"]:
        bet = {
            "bet_id": line["bet_id"],
            "spot": line["spot"],
            "stake": line["stake"],
            "returned": line["returned"],
            "outcome": line["outcome"],
        }
        by_owner.setdefault((line["player_id"], line["currency"]), []).append(bet)
    return [
        _result_body(
            table_id,
            round_id,
            player,
            currency,
            bets,
            sum(bet["stake"] for bet in bets),
            sum(bet["returned"] for bet in bets),
        )
        for (player, currency), bets in by_owner.items()
    ]


def result_messages(fact_type: str, data: Mapping[str, Any], key: str) -> list[OutboxMessage]:
    """The outbox messages a closing fact (``key``) calls for: one result per player."""
    if fact_type not in (SETTLED, VOIDED):
        return []
    return [_message(body, key) for body in result_bodies(data)]


def _result_body(
    table_id: str,
    round_id: str,
    player: str,
    currency: str,
    bets: list[dict[str, Any]],
    stake_total: int,
    returned_total: int,
) -> dict[str, Any]:
    """One player's result in one currency, in the contract's field order."""
    return {
        "message_id": message_id(table_id, round_id, player, currency),
        "table_id": table_id,
        "round_id": round_id,
        "player_id": player,
        "currency": currency,
        "bets": bets,
        "stake_total": stake_total,
        "returned_total": returned_total,
    }


def decided_result_messages(
    fact_type: str, data: Mapping[str, Any], key: str
) -> list[OutboxMessage]:
    """:func:`result_messages` of a closing fact the Round has just decided, each body
    :class:`~contract.canonical.Encoded` with its canonical text, written once from its
    parts (the Round's results hold integers and text, never a float); the bodies are
    :func:`result_bodies`' and each text is their ``canonical_json``, byte for byte (held
    to it by tests/unit/croupier/test_settle_by_kind.py)."""
    return [m for chunk in decided_result_chunks(fact_type, data, key, 1 << 62) for m in chunk]


def decided_result_chunks(
    fact_type: str, data: Mapping[str, Any], key: str, size: int
) -> Iterator[list[OutboxMessage]]:
    """:func:`decided_result_messages` ``size`` at a time, so a caller can let other work
    run between the chunks of a large round. The bets are grouped by player once, before
    the first chunk; each chunk's bodies are built as it is taken, each with its canonical
    text written straight from its parts (:func:`_body_text`)."""
    if fact_type not in (SETTLED, VOIDED):
        return
    closed = closing(data)
    event = closed["event"]
    table_id, round_id = event["table_id"], event["round_id"]
    ends: dict[tuple[str, str, int, int], str] = {}  # a bet's text after its bet_id
    # By player and currency: the bets, their texts, the stake total, the returned total.
    by_owner: dict[tuple[str, str], list[Any]] = {}
    for line in closed["results"]:
        spot, stake, returned = line["spot"], line["stake"], line["returned"]
        outcome, bet_id = line["outcome"], line["bet_id"]
        end = ends.get((outcome, spot, stake, returned))
        if end is None:
            end = ends[outcome, spot, stake, returned] = _bet_end(outcome, returned, spot, stake)
        owner = (line["player_id"], line["currency"])
        entry = by_owner.get(owner)
        if entry is None:
            entry = by_owner[owner] = [[], [], 0, 0]
        entry[0].append(
            {
                "bet_id": bet_id,
                "spot": spot,
                "stake": stake,
                "returned": returned,
                "outcome": outcome,
            }
        )
        quoted = quote(bet_id) if type(bet_id) is str else _json(bet_id)
        entry[1].append(f'{{"bet_id":{quoted}{end}')
        entry[2] += stake
        entry[3] += returned
    owners = list(by_owner.items())
    ids = f',"round_id":{_json(round_id)}', f',"table_id":{_json(table_id)}'
    for start in range(0, len(owners), size):
        chunk = []
        for (player, currency), (bets, texts, staked, back) in owners[start : start + size]:
            body = _result_body(table_id, round_id, player, currency, bets, staked, back)
            text = _body_text(body, texts, ids)
            chunk.append(_message(Encoded.with_text(body, text), key))
        yield chunk


def _bet_end(outcome: str, returned: int, spot: str, stake: int) -> str:
    """A bet's canonical text after its ``bet_id`` (keys in canonical order)."""
    return (
        f',"outcome":{_json(outcome)},"returned":{_json(returned)},'
        f'"spot":{_json(spot)},"stake":{_json(stake)}}}'
    )


def _body_text(body: Mapping[str, Any], bets: list[str], ids: tuple[str, str]) -> str:
    """``canonical_json(body)`` of a result body, written from its parts: the keys in
    canonical order, each value as ``canonical_json`` writes it, the bets' texts (``bets``)
    and the round's and table's members (``ids``) spliced in."""
    round_member, table_member = ids
    return (
        f'{{"bets":[{",".join(bets)}],"currency":{_json(body["currency"])},'
        f'"message_id":{_json(body["message_id"])},"player_id":{_json(body["player_id"])},'
        f'"returned_total":{_json(body["returned_total"])}{round_member},'
        f'"stake_total":{_json(body["stake_total"])}{table_member}}}'
    )


def _json(value: Any) -> str:
    """``canonical_json(value)``: text and integers (what a Round writes) directly."""
    kind = type(value)
    if kind is str:
        return quote(value)
    if kind is int:
        return str(value)
    return canonical_json(value)


def _message(body: Mapping[str, Any], key: str) -> OutboxMessage:
    # the wallets' routing key: <currency>.<player_id>
    routing_key = f"{body['currency']}.{body['player_id']}"
    return OutboxMessage(body["message_id"], SETTLEMENTS_EXCHANGE, routing_key, body, key)


def outbox_rule(fact_type: str, data: str) -> list[Expected]:
    """What a recorded fact (its type and stored JSON text) put in the outbox, exactly.

    The relay publishes only messages this re-derives from a chained fact, and ``verify``
    reports every outbox row that is not one of them, and every one of them that is missing:
    every kind of message the settler puts in the outbox must be derivable here. Each body's
    text is written from its parts (``canonical_json`` of the body, byte for byte).
    """
    if fact_type not in (SETTLED, VOIDED):
        return []
    messages = decided_result_messages(fact_type, read_json(data), "")
    return [
        Expected(m.message_id, m.exchange, m.routing_key, cast(Encoded, m.body).text)
        for m in messages
    ]
