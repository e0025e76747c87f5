"""A round settled by kinds of seat writes exactly what settling it bet by bet writes, and
the wallet results written straight to text are the canonical text of their bodies.

``Round._settle_by_kind`` settles each kind of seat once (``holdem.kinds``) and gives every
seat its kind's results; ``Round._settle_per_bet`` puts every wager through
``holdem.settle``. The ledger's content idempotency and hash chain depend on the fact's
text, so the two must agree byte for byte: on the studio's rounds of every pay table
(shared hands and boxes), and on rounds drawn at random with several currencies, stakes,
side bets, folds, timeouts and Texas Hold'em Plus decisions interleaved across players.
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any

import pytest
from croupier_feeds import CH_CLASSIC, CH_PROGRESSIVE, THP, RoundFeed, parsed

import holdem
from contract.canonical import Encoded, canonical_json
from contract.events import read_event
from croupier.ledger.encoding import data_text
from croupier.settlement.results import decided_result_messages, result_bodies
from croupier.settlement.round import SETTLED, VOIDED, Round
from studio import StudioConfig, simulate
from studio.config import every_paytable

METER = 5_000_000


def meters(table: holdem.PayTable, currency: str) -> int:
    return METER


def texts(events: list[Any], by_kind: bool, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The type, key and text of every fact the events of one round lead to, and of the
    wallet results each closing fact puts in the outbox."""
    with monkeypatch.context() as patch:
        if not by_kind:
            patch.setattr(Round, "_settle_by_kind", lambda *args: None)
        first = events[0]
        state = Round(first.table_id, first.round_id)
        facts = [fact for event in events for fact in state.receive(event, meters)]
    out = []
    for fact in facts:
        out.append(f"{fact.type} {fact.key} {data_text(fact.data)}")
        messages = decided_result_messages(fact.type, fact.data, fact.key)
        if fact.type in (SETTLED, VOIDED):
            assert [dict(m.body) for m in messages] == result_bodies(fact.data)
        for message in messages:
            assert isinstance(message.body, Encoded)
            assert message.body.text == canonical_json(dict(message.body))
            out.append(f"{message.message_id} {message.routing_key} {message.body.text}")
    return out


def settled_alike(rounds: list[list[Any]], monkeypatch: pytest.MonkeyPatch) -> int:
    """Assert both ways agree on every round; the number settled by kind."""
    counted = 0
    settle_by_kind = Round._settle_by_kind

    def counting(self: Round, *args: Any) -> Any:
        nonlocal counted
        out = settle_by_kind(self, *args)
        counted += out is not None and bool(out[0])
        return out

    monkeypatch.setattr(Round, "_settle_by_kind", counting)
    for events in rounds:
        per_bet = texts(events, False, monkeypatch)
        assert any(t.startswith(f"{SETTLED} ") for t in per_bet)
        assert texts(events, True, monkeypatch) == per_bet
    return counted


@pytest.mark.parametrize("boxes", [None, 3])
def test_the_studio_rounds_of_every_pay_table(
    boxes: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = StudioConfig(tables=every_paytable(players=40, boxes=boxes), rounds=12, seed=7)
    rounds: dict[tuple[str, str], list[Any]] = defaultdict(list)
    for message in simulate(config):
        event = read_event(message.body)
        rounds[event.table_id, event.round_id].append(event)
    counted = settled_alike(list(rounds.values()), monkeypatch)
    # The jackpot tables' rounds with a jackpot wager go bet by bet; the others by kind.
    assert counted >= len(rounds) // 2


def random_round(rng: random.Random, number: int, game: tuple[str, str]) -> list[Any]:
    """A round of up to 60 seats on 1-3 boxes, in three currencies, with random stakes,
    side bets and decisions (some missing: the timeout defaults)."""
    f = RoundFeed(table_id="t1", round_id=f"r{number}")
    thp = game == THP
    f.opened(game)
    boxes = ["main", "b2", "b3"][: rng.randint(1, 3)]
    seats = []
    for seat in range(rng.randint(1, 60)):
        player, box = rng.choice(["p", "pl:x@c=+.-"]) + str(rng.randint(0, 40)), rng.choice(boxes)
        if (player, box) in {(p, b) for p, b, _, _ in seats}:
            continue
        currency, ante = rng.choice(["EUR", "USD", "GBP"]), rng.choice([100, 200, 500])
        f.bet(f"a{seat}", "ante", ante, player, box, currency)
        for side in range(rng.randint(0, 2)):
            spot = "plus" if thp else rng.choice(["aa_bonus", "aa_bonus", "jackpot"])
            if spot == "jackpot" and game != CH_PROGRESSIVE:
                continue
            f.bet(f"s{seat}.{side}", spot, rng.choice([100, 300]), player, box, currency)
        seats.append((player, box, f"a{seat}", ante))
    cards = iter(rng.sample(holdem.cards.DECK, 2 * len(boxes) + 7))
    text = holdem.card_text
    for box in boxes:
        f.hole(f"{text(next(cards))} {text(next(cards))}", box)
    f.cards("dealer", f"{text(next(cards))} {text(next(cards))}")
    stages = ["preflop", "flop", "turn"] if thp else ["flop"]
    out: set[str] = set()
    for stage in stages:
        if stage == "flop":
            f.cards("board", " ".join(text(next(cards)) for _ in range(3)))
        if stage == "turn":
            f.cards("board", text(next(cards)))
        for _, _, ante_id, ante in rng.sample(seats, len(seats)):
            if ante_id in out or rng.random() < 0.15:
                continue  # out, or no decision in time
            wager, size = ("call", 2) if stage in ("preflop", "flop") and not thp else ("", 0)
            if thp:
                wager, size = ("call", 2) if stage == "preflop" else ("bet", 1)
            action = rng.choice([wager, wager, "fold"] + (["check"] if thp and size == 1 else []))
            if action == "fold":
                out.add(ante_id)
                f.decide(ante_id, stage, "fold")
            elif action == "check":
                f.decide(ante_id, stage, "check")
            else:
                f.decide(ante_id, stage, action, f"{ante_id}.{stage}", size * ante)
    if not thp:
        f.cards("board", " ".join(text(next(cards)) for _ in range(2)))
    else:
        f.cards("board", text(next(cards)))
    f.completed()
    return [parsed(event) for event in f.events]


@pytest.mark.parametrize("game", [CH_CLASSIC, CH_PROGRESSIVE, THP])
def test_random_rounds_of_several_currencies_and_decisions(
    game: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(f"kinds-{game}")
    rounds = [random_round(rng, number, game) for number in range(150)]
    counted = settled_alike(rounds, monkeypatch)
    assert counted >= (10 if game == CH_PROGRESSIVE else 40)  # jackpot rounds: bet by bet


def test_result_texts_quote_as_canonical_json_does() -> None:
    """Written from parts, whatever the strings hold (the contract allows ASCII ids only;
    the writer does not rely on it)."""
    odd = ['q"uote', "back\\slash", "ünï©ødé", "tab\t", "\u2028", "emoji \U0001f0a1", "<>&"]
    results = [
        {
            "bet_id": f"b{n}{text}",
            "player_id": f"p{n % 3}{text}",
            "box": "main",
            "spot": "ante",
            "stake": 100 * n,
            "returned": 250 * n,
            "outcome": "win",
            "line": None,
            "currency": ["EUR", "USD"][n % 2],
        }
        for n, text in enumerate(odd)
    ]
    event = {"table_id": 't"1', "round_id": "r\\1"}
    data = {"event": event, "results": results}
    messages = decided_result_messages(SETTLED, data, "k")
    assert [dict(m.body) for m in messages] == result_bodies(data)
    for message in messages:
        assert isinstance(message.body, Encoded)
        assert message.body.text == canonical_json(dict(message.body))
