"""Replay of a generated feed of 1,000 rounds against an independent reference settlement.

The generator deals both games on all four pay tables: shared hands with many players,
several boxes, random decisions (timeouts included), voids, rounds left open, out-of-order
events, redeliveries and faults of every kind. It keeps what really happened at each table,
and the reference below settles that with nothing of ``holdem``: its own hand evaluator (the
best of the 21 five-card subsets) and the rules of docs/rules.md written out again. Every result
line croupier writes must be the reference's, and every fault must be rejected on its line.
"""

from __future__ import annotations

import io
import json
import random
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest
from croupier_feeds import CH_CLASSIC, CH_PROGRESSIVE, CH_ROYAL, THP, RoundFeed, line

from contract.settlement import SettlementResult
from croupier.cli import main
from croupier.ledger import open_ledger
from croupier.settlement.replay import ReplaySummary, replay
from croupier.settlement.results import message_id

# -- the rules, written out from docs/rules.md ---------------------------------------------------

RANKS, SUITS = "23456789TJQKA", "cdhs"
DECK = [r + s for r in RANKS for s in SUITS]
NAMES = (
    "high_card", "pair", "two_pair", "three_of_a_kind", "straight",
    "flush", "full_house", "four_of_a_kind", "straight_flush", "royal_flush",
)  # fmt: skip
CLASSIC_ANTE = {"royal_flush": 100, "straight_flush": 20, "four_of_a_kind": 10,
                "full_house": 3, "flush": 2}  # fmt: skip
ROYAL20_ANTE = CLASSIC_ANTE | {"royal_flush": 20}
CLASSIC_AA = {"royal_flush": 100, "straight_flush": 50, "four_of_a_kind": 40, "full_house": 30,
              "flush": 20, "straight": 7, "three_of_a_kind": 7, "two_pair": 7,
              "pair_of_aces": 7}  # fmt: skip
ROYAL20_AA = dict.fromkeys(CLASSIC_AA, 7)
ANTE_TABLE = {
    CH_CLASSIC[1]: CLASSIC_ANTE,
    CH_PROGRESSIVE[1]: CLASSIC_ANTE,
    CH_ROYAL[1]: ROYAL20_ANTE,
}
AA_TABLE = {CH_CLASSIC[1]: CLASSIC_AA, CH_PROGRESSIVE[1]: CLASSIC_AA, CH_ROYAL[1]: ROYAL20_AA}
JACKPOT_FIXED = {"four_of_a_kind": 500, "full_house": 100, "flush": 50}
JACKPOT_METER = {"royal_flush": 100, "straight_flush": 10}
# The progressive table's own settings (its pay table file): stake, meter share, seed.
JACKPOT_STAKE, METER_SHARE, METER_SEED = 100, 20, 5_000_000

Hand = tuple[int, ...]


def _five(cards: Sequence[str]) -> Hand:
    """(category, ranks in order of importance) of five cards."""
    ranks = sorted((RANKS.index(c[0]) + 2 for c in cards), reverse=True)
    groups = sorted(Counter(ranks).items(), key=lambda rc: (rc[1], rc[0]), reverse=True)
    flush = len({c[1] for c in cards}) == 1
    distinct = sorted(set(ranks), reverse=True)
    high = None
    if len(distinct) == 5 and distinct[0] - distinct[4] == 4:
        high = distinct[0]
    elif distinct == [14, 5, 4, 3, 2]:
        high = 5
    shape = [n for _, n in groups]
    by_group = [r for r, _ in groups]
    if high and flush:
        return (9 if high == 14 else 8, high)
    if shape[0] == 4:
        return (7, *by_group)
    if shape[:2] == [3, 2]:
        return (6, *by_group)
    if flush:
        return (5, *ranks)
    if high:
        return (4, high)
    return ({3: 3, 2: 2 if shape[1] == 2 else 1, 1: 0}[shape[0]], *by_group)


@cache
def best(cards: frozenset[str]) -> Hand:
    """The best five-card hand among five to seven cards."""
    return max(_five(five) for five in combinations(sorted(cards), 5))


def value(*parts: Sequence[str]) -> Hand:
    return best(frozenset(c for part in parts for c in part))


def plus_line(hole: Sequence[str]) -> int:
    ranks = sorted((RANKS.index(c[0]) + 2 for c in hole), reverse=True)
    suited = hole[0][1] == hole[1][1]
    if ranks[0] == ranks[1]:
        return 30 if ranks[0] == 14 else 10 if ranks[0] >= 11 else 3
    if ranks == [14, 13]:
        return 25 if suited else 15
    if ranks[0] == 14 and ranks[1] in (12, 11):
        return 20 if suited else 5
    return 0


# -- what happened at the tables -------------------------------------------------------------


@dataclass
class Bet:
    bet_id: str
    player: str
    box: str
    spot: str
    stake: int
    currency: str


@dataclass
class Table:
    """One round as it really went, whatever the feed made of it."""

    table_id: str
    round_id: str
    paytable: str
    bets: list[Bet] = field(default_factory=list)
    holes: dict[str, list[str]] = field(default_factory=dict)
    dealer: list[str] = field(default_factory=list)
    board: list[str] = field(default_factory=list)
    decisions: dict[tuple[str, str], str] = field(default_factory=dict)  # (ante, stage)
    plays: list[Bet] = field(default_factory=list)
    ending: str = "completed"  # or "voided", "open", "unopened", "bad_paytable"
    settle_line: int = 0


Line = tuple[str, int | None, str | None]
Emit = Callable[[dict[str, Any], str | None], dict[str, Any]]
RIGGED = [
    ["As", "Ks", "Qs", "Js", "Ts"],
    ["9h", "8h", "7h", "6h", "5h"],
    ["9c", "9d", "9h", "9s", "2d"],
    ["Kc", "Kh", "Kd", "7c", "7h"],
]  # (text, seq or None, expected rejection code)


@dataclass
class Feed:
    lines: list[str] = field(default_factory=list)
    rounds: list[Table] = field(default_factory=list)
    rejected: dict[int, tuple[str | None, str]] = field(default_factory=dict)  # line: (id, code)
    duplicates: int = 0


class Generator:
    """A seeded stream of rounds, written as feed lines."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.n = 0

    def feed(self, rounds: int) -> Feed:
        out = Feed()
        pending: list[tuple[Table, list[Line]]] = []
        for _ in range(rounds):
            pending.append(self.round())
            if len(pending) == 2 or self.rng.random() < 0.6:
                self._write(out, pending)
                pending = []
        self._write(out, pending)
        return out

    def _write(self, out: Feed, rounds: list[tuple[Table, list[Line]]]) -> None:
        """Write the rounds, interleaving two when there are two (order within each kept)."""
        queues = [list(lines) for _, lines in rounds]
        owners: list[int] = []
        while any(queues):
            choices = [i for i, q in enumerate(queues) if q]
            owners.append(self.rng.choice(choices))
            queues[owners[-1]].pop(0)
        cursor = [0] * len(rounds)
        for owner in owners:
            table, lines = rounds[owner]
            text, seq, code = lines[cursor[owner]]
            cursor[owner] += 1
            out.lines.append(text)
            number = len(out.lines)
            if code == "duplicate":
                out.duplicates += 1
            elif code is not None:
                event_id = _event_id(text)
                out.rejected[number] = (event_id, code)
            if seq is not None:
                table.settle_line = max(table.settle_line, number)
        out.rounds += [table for table, _ in rounds]

    def round(self) -> tuple[Table, list[Line]]:
        rng = self.rng
        self.n += 1
        game = rng.choice([CH_CLASSIC, CH_ROYAL, CH_PROGRESSIVE, CH_PROGRESSIVE, THP, THP])
        table_id = {CH_CLASSIC: "chc-1", CH_ROYAL: "chr-1", THP: "thp-1"}.get(
            game, rng.choice(["chp-1", "chp-2"])
        )
        f = RoundFeed(table_id=table_id, round_id=f"r{self.n:05d}")
        t = Table(table_id, f.round_id, game[1])
        lines: list[Line] = []
        faults = rng.random() < 0.25

        def emit(event: dict[str, Any], code: str | None = None) -> dict[str, Any]:
            lines.append((line(event), event["seq"], code))
            return event

        def extra(text: str, code: str) -> None:
            lines.append((text, None, code))

        ending = rng.choices(
            ["completed", "voided", "open", "unopened", "bad_paytable"], [90, 5, 2, 1.5, 1.5]
        )[0]
        t.ending = ending
        if ending == "bad_paytable":
            emit(f.opened((game[0], game[1] + "-x")), "unknown_paytable")
        elif ending == "unopened":
            f.opened()  # its seq 1 never reaches the feed
        else:
            emit(f.opened(game))
        code = "never_opened" if ending in ("unopened", "bad_paytable") else None

        thp = game is THP
        shared = rng.random() < 0.5
        boxes = ["main"] if shared else [f"b{i}" for i in range(1, rng.randint(2, 4))]
        crowd = 200 if rng.random() < 0.01 else rng.choice([1, 2, 3, 5, 8, 20])
        k = 0
        for box in boxes:
            for _ in range(crowd if shared else rng.randint(1, 2)):
                k += 1
                player, currency = f"p{k}", rng.choice(["EUR"] * 9 + ["USD"])
                ante = rng.choice([100, 150, 500, 1000, 2500, rng.randint(100, 1_000_000)])
                t.bets.append(Bet(f"a{k}", player, box, "ante", ante, currency))
                emit(f.bet(f"a{k}", "ante", ante, player, box, currency), code)
                side = "plus" if thp else rng.choice(["aa_bonus", "jackpot"])
                if side == "jackpot" and game is not CH_PROGRESSIVE:
                    side = "aa_bonus"
                if rng.random() < 0.5:
                    stake = JACKPOT_STAKE if side == "jackpot" else rng.randint(100, 100_000)
                    t.bets.append(Bet(f"s{k}", player, box, side, stake, currency))
                    emit(f.bet(f"s{k}", side, stake, player, box, currency), code)
                if game is CH_PROGRESSIVE and side != "jackpot" and rng.random() < 0.3:
                    t.bets.append(Bet(f"j{k}", player, box, "jackpot", JACKPOT_STAKE, currency))
                    emit(f.bet(f"j{k}", "jackpot", JACKPOT_STAKE, player, box, currency), code)
        if faults and code is None:
            emit(f.bet("big", "ante", 1_000_001, "pz", boxes[0]), "stake_limits")
            first = next(text for text, seq, _ in lines if '"bet.placed"' in text)
            changed = json.loads(first)
            changed["payload"]["amount"] += 1
            extra(line(changed), "reused_event_id")

        # Box one sometimes gets a jackpot hand on hole + flop (random deals almost never do).
        five = rng.choice(RIGGED) if game is CH_PROGRESSIVE and rng.random() < 0.1 else []
        deck = [card for card in DECK if card not in five]
        rng.shuffle(deck)
        if rng.random() < 0.2:
            emit(f.cards("burn", deck.pop()), code)
        for i, box in enumerate(boxes):
            t.holes[box] = five[:2] if five and i == 0 else [deck.pop(), deck.pop()]
        t.dealer = [deck.pop(), deck.pop()]
        t.board = (five[2:] or [deck.pop() for _ in range(3)]) + [deck.pop(), deck.pop()]
        for box in boxes:
            emit(f.hole(" ".join(t.holes[box]), box), code)
        if faults and code is None:
            emit(f.bet("late", "ante", 100, "py", boxes[0]), "betting_closed")
        emit(f.cards("dealer", " ".join(t.dealer)), code)

        antes = [b for b in t.bets if b.spot == "ante"]
        stages = (
            [("preflop", 0), ("flop", 3), ("turn", 4)] if thp else [("flop", 3)]
        )  # stage, board cards before it
        shown = 0
        voided_at = rng.choice([s for s, _ in stages]) if ending == "voided" else None
        for stage, before in stages:
            if before > shown:
                emit(f.cards("board", " ".join(t.board[shown:before])), code)
                shown = before
            if stage == voided_at:
                emit(f.voided("dealer misdeal"), code)
                return t, self._shuffled(lines, faults)
            if faults and code is None and stage == "flop":
                emit(f.completed(), "cards_missing")
                emit(f.cards("burn", t.board[0]), "duplicate_card")
            for placed in antes:
                self._decide(f, t, placed, stage, emit, code, faults)
        emit(f.cards("board", " ".join(t.board[shown:])), code)
        if ending == "open":
            return t, self._shuffled(lines, faults)
        emit(f.completed(), code)
        if faults and code is None:
            text = rng.choice([text for text, seq, _ in lines if seq is not None])
            extra(text, "duplicate")
            extra('{"event_id": "not-json', "not_json")
            bad = f.make("cards.dealt", {"target": "board", "cards": ["Ax"]}, seq=99)
            extra(line(bad), "contract")
        return t, self._shuffled(lines, faults)

    def _decide(
        self,
        f: RoundFeed,
        t: Table,
        ante: Bet,
        stage: str,
        emit: Emit,
        code: str | None,
        faults: bool,
    ) -> None:
        rng = self.rng
        thp = t.paytable == THP[1]
        earlier = [t.decisions.get((ante.bet_id, s)) for s in ("preflop", "flop")]
        if "fold" in earlier or (thp and stage != "preflop" and earlier[0] != "call"):
            return
        options = {
            "preflop": ["call", "call", "call", "fold", None],
            "flop": ["bet", "check", "fold", None] if thp else ["call", "call", "fold", None],
            "turn": ["bet", "bet", "check", "fold", None],
        }[stage]
        action = rng.choice(options)
        if faults and code is None and action in ("call", "bet"):
            emit(f.decide(ante.bet_id, stage, action, "wrong", ante.stake * 3), "wrong_wager_size")
        if action is None:
            return
        if action in ("call", "bet"):
            spot = {"call": "call", "flop": "flop_bet", "turn": "turn_bet"}[
                "call" if action == "call" else stage
            ]
            play = Bet(f"{spot}-{ante.bet_id}", ante.player, ante.box, spot, 0, ante.currency)
            play.stake = ante.stake * (2 if action == "call" else 1)
            emit(f.decide(ante.bet_id, stage, action, play.bet_id, play.stake), code)
            t.plays.append(play)
        else:
            emit(f.decide(ante.bet_id, stage, action), code)
        t.decisions[(ante.bet_id, stage)] = action

    def _shuffled(self, lines: list[Line], faults: bool) -> list[Line]:
        """Some rounds' events arrive out of seq order (never those with faults)."""
        if faults or self.rng.random() > 0.15:
            return lines
        lines = lines[:]
        for _ in range(self.rng.randint(1, 3)):
            i = self.rng.randrange(len(lines) - 1)
            lines[i], lines[i + 1] = lines[i + 1], lines[i]
        return lines


def _event_id(text: str) -> str | None:
    try:
        data = json.loads(text)
    except ValueError:
        return None
    event_id = data.get("event_id") if isinstance(data, dict) else None
    return event_id if isinstance(event_id, str) else None


# -- the reference settlement ---------------------------------------------------------------

Result = dict[str, tuple[str, int, int, str]]  # bet_id -> (spot, stake, returned, outcome)


def _paid(bet: Bet, multiplier: int) -> tuple[str, int, int, str]:
    return (bet.spot, bet.stake, bet.stake * (1 + multiplier), "win")


def _status(bet: Bet, outcome: str) -> tuple[str, int, int, str]:
    back = {"lose": 0, "fold": 0, "push": bet.stake, "refund": bet.stake}[outcome]
    return (bet.spot, bet.stake, back, outcome)


def reference(t: Table, meters: dict[str, int]) -> Result:
    """Every bet's result, by docs/rules.md; moves ``meters`` (per currency) like the table's."""
    every = [*t.bets, *t.plays]
    if t.ending == "voided":
        return {b.bet_id: _status(b, "refund") for b in every}
    if t.paytable == THP[1]:
        return _thp(t, every)
    return _ch(t, every, meters)


def _ch(t: Table, every: list[Bet], meters: dict[str, int]) -> Result:
    dealer = value(t.dealer, t.board)
    qualifies = dealer[0] >= 2 or (dealer[0] == 1 and dealer[1] >= 4)
    ante_of = {(b.player, b.box): b for b in t.bets if b.spot == "ante"}
    out: Result = {}
    meter_winners: dict[tuple[str, str], list[Bet]] = {}
    for bet in every:
        ante = ante_of[(bet.player, bet.box)]
        if t.decisions.get((ante.bet_id, "flop")) != "call":
            out[bet.bet_id] = _status(bet, "fold")
            continue
        hole = t.holes[bet.box]
        hand, five = value(hole, t.board), value(hole, t.board[:3])
        if bet.spot in ("ante", "call"):
            if qualifies and dealer > hand:
                out[bet.bet_id] = _status(bet, "lose")
            elif qualifies and dealer == hand:
                out[bet.bet_id] = _status(bet, "push")
            elif bet.spot == "call":
                out[bet.bet_id] = _paid(bet, 1) if qualifies else _status(bet, "push")
            else:
                out[bet.bet_id] = _paid(bet, ANTE_TABLE[t.paytable].get(NAMES[hand[0]], 1))
        elif bet.spot == "aa_bonus":
            name = NAMES[five[0]] if five[0] >= 2 else None
            if five[0] == 1 and five[1] == 14:
                name = "pair_of_aces"
            pays = AA_TABLE[t.paytable].get(name or "")
            out[bet.bet_id] = _paid(bet, pays) if pays else _status(bet, "lose")
        elif NAMES[five[0]] in JACKPOT_METER:
            meter_winners.setdefault((bet.currency, NAMES[five[0]]), []).append(bet)
        else:
            pays = JACKPOT_FIXED.get(NAMES[five[0]])
            out[bet.bet_id] = _paid(bet, pays) if pays else _status(bet, "lose")
    for currency in sorted({b.currency for b in every if b.spot == "jackpot"}):
        stakes = sum(b.stake for b in every if b.spot == "jackpot" and b.currency == currency)
        level = meters.get(currency, METER_SEED) + stakes * METER_SHARE // 100
        for name, percent in JACKPOT_METER.items():
            winners = meter_winners.get((currency, name), [])
            if not winners:
                continue
            share = level * percent // 100 // len(winners)
            for bet in winners:
                out[bet.bet_id] = (bet.spot, bet.stake, bet.stake + share, "win")
            level = max(level - share * len(winners), METER_SEED)
        meters[currency] = level
    return out


def _thp(t: Table, every: list[Bet]) -> Result:
    house = value(t.dealer, t.board)
    ante_of = {(b.player, b.box): b for b in t.bets if b.spot == "ante"}
    out: Result = {}
    for bet in every:
        ante = ante_of[(bet.player, bet.box)]
        decided = [t.decisions.get((ante.bet_id, s)) for s in ("preflop", "flop", "turn")]
        hand = value(t.holes[bet.box], t.board)
        if bet.spot == "plus":
            pays = plus_line(t.holes[bet.box])
            out[bet.bet_id] = _paid(bet, pays) if pays else _status(bet, "lose")
        elif decided[0] != "call" or "fold" in decided:
            out[bet.bet_id] = _status(bet, "fold")
        elif hand < house:
            out[bet.bet_id] = _status(bet, "lose")
        elif hand == house or (bet.spot == "ante" and hand[0] < 4):  # a tie; a win below a straight
            out[bet.bet_id] = _status(bet, "push")
        else:
            out[bet.bet_id] = _paid(bet, 1)
    return out


def expected_results(feed: Feed) -> dict[tuple[str, str, str], Result]:
    """(round, player, currency) -> that player's bets, rounds taken in settlement order."""
    meters: dict[str, int] = {}
    out: dict[tuple[str, str, str], Result] = {}
    closing = [t for t in feed.rounds if t.ending in ("completed", "voided")]
    for t in sorted(closing, key=lambda t: t.settle_line):
        results = reference(t, meters if t.paytable == CH_PROGRESSIVE[1] else {})
        for bet in [*t.bets, *t.plays]:
            key = (t.round_id, bet.player, bet.currency)
            out.setdefault(key, {})[bet.bet_id] = results[bet.bet_id]
    return out


# -- the tests --------------------------------------------------------------------------------

REASON_WORDS = {
    "stake_limits": "outside the table's limits",
    "reused_event_id": "already used for an event with other content",
    "betting_closed": "after betting closed",
    "cards_missing": "cards missing",
    "duplicate_card": "already dealt",
    "wrong_wager_size": "exactly",
    "unknown_paytable": "unknown pay table",
    "never_opened": "never opened",
    "contract": "",
    "not_json": "not valid JSON",
}


@dataclass
class Replayed:
    summary: ReplaySummary
    results: list[dict[str, Any]]
    rejections: list[dict[str, Any]]
    result_lines: list[str]


async def run_replay(lines: Sequence[str], tmp_path: Path, batch_size: int = 2000) -> Replayed:
    results, rejections = io.StringIO(), io.StringIO()
    tmp_path.mkdir(parents=True, exist_ok=True)
    async with open_ledger(f"sqlite:///{tmp_path / 'replay.db'}") as ledger:
        await ledger.migrate()
        summary = await replay(
            (text.encode() + b"\n" for text in lines),
            ledger,
            results,
            rejections,
            batch_size=batch_size,
        )
    return Replayed(
        summary,
        _jsonl(results.getvalue()),
        _jsonl(rejections.getvalue()),
        results.getvalue().splitlines(),
    )


def _jsonl(text: str) -> list[dict[str, Any]]:
    return [json.loads(row) for row in text.splitlines()]


@pytest.fixture(scope="module")
def generated() -> Feed:
    return Generator(seed=20240501).feed(1000)


@pytest.fixture(scope="module")
async def replayed(generated: Feed, tmp_path_factory: pytest.TempPathFactory) -> Replayed:
    return await run_replay(generated.lines, tmp_path_factory.mktemp("replay"), batch_size=500)


def _actual(results: list[dict[str, Any]]) -> Iterator[tuple[tuple[str, str, str], Result]]:
    for r in results:
        bets = {
            b["bet_id"]: (b["spot"], b["stake"], b["returned"], b["outcome"]) for b in r["bets"]
        }
        yield (r["round_id"], r["player_id"], r["currency"]), bets


def test_a_generated_feed_of_1000_rounds_settles_like_the_reference(
    generated: Feed, replayed: Replayed
) -> None:
    expected = expected_results(generated)

    actual = dict(_actual(replayed.results))
    assert len(actual) == len(replayed.results)  # one result per player, round and currency
    assert actual.keys() == expected.keys()
    wrong = {key: (actual[key], expected[key]) for key in expected if actual[key] != expected[key]}
    assert wrong == {}
    for text in replayed.result_lines:  # each line is the contract's own serialisation
        assert SettlementResult.model_validate_json(text).model_dump_json() == text
    for r in replayed.results:
        assert r["stake_total"] == sum(b["stake"] for b in r["bets"])
        assert r["returned_total"] == sum(b["returned"] for b in r["bets"])
        assert r["message_id"] == message_id(
            r["table_id"], r["round_id"], r["player_id"], r["currency"]
        )
    tables = {t.round_id: t.table_id for t in generated.rounds}
    assert all(r["table_id"] == tables[r["round_id"]] for r in replayed.results)
    # Results come in ledger order; a round's players share its settlement's position.
    positions = [r["ledger_position"] for r in replayed.results]
    assert positions == sorted(positions)
    by_round: dict[str, set[int]] = {}
    for r in replayed.results:
        by_round.setdefault(r["round_id"], set()).add(r["ledger_position"])
    assert all(len(p) == 1 for p in by_round.values())
    assert len(set(positions)) == len(by_round)

    # The generator produced what the test means to cover.
    endings = Counter(t.ending for t in generated.rounds)
    assert all(endings[e] > 0 for e in ("completed", "voided", "open", "unopened", "bad_paytable"))
    games = Counter(t.paytable for t in generated.rounds)
    assert len(games) == 4
    outcomes = Counter(b[3] for result in expected.values() for b in result.values())
    assert set(outcomes) == {"win", "lose", "push", "fold", "refund"}
    spots = Counter(b[0] for result in expected.values() for b in result.values())
    assert set(spots) == {"ante", "aa_bonus", "jackpot", "plus", "call", "flop_bet", "turn_bet"}
    meter_wins = [
        b for r in expected.values() for b in r.values() if b[0] == "jackpot" and b[2] > 100 * 501
    ]
    assert meter_wins, "no jackpot meter line was dealt"


def test_every_fault_is_rejected_on_its_line_and_the_summary_adds_up(
    generated: Feed, replayed: Replayed
) -> None:
    summary = replayed.summary

    got = {row["line"]: row for row in replayed.rejections}
    assert len(got) == len(replayed.rejections)
    assert got.keys() == generated.rejected.keys()
    for number, (event_id, code) in generated.rejected.items():
        assert got[number]["event_id"] == event_id, number
        assert REASON_WORDS[code] in got[number]["reason"], (number, code)
        assert got[number]["reason"]
    assert summary.rejected == Counter(code for _, code in generated.rejected.values())
    assert summary.duplicates == generated.duplicates
    assert summary.events == len(generated.lines)

    endings = Counter(t.ending for t in generated.rounds)
    assert summary.settled == endings["completed"]
    assert summary.voided == endings["voided"]
    unsettled = {
        f"round:{t.table_id}:{t.round_id}": t.ending
        for t in generated.rounds
        if t.ending in ("open", "unopened", "bad_paytable")
    }
    assert summary.open.keys() == unsettled.keys()
    for stream, ending in unsettled.items():
        assert summary.open[stream] == (
            "waiting for round.completed" if ending == "open" else "never opened"
        )

    wagered: Counter[str] = Counter()
    returned: Counter[str] = Counter()
    for key, bets in expected_results(generated).items():
        wagered[key[2]] += sum(b[1] for b in bets.values())
        returned[key[2]] += sum(b[2] for b in bets.values())
    assert summary.wagered == wagered
    assert summary.returned == returned
    text = summary.render()
    assert f"rounds settled   {summary.settled:>12,}" in text
    for currency in wagered:
        assert f"{currency}  wagered {wagered[currency]:>16,}" in text


async def test_batch_size_does_not_change_the_results(generated: Feed, tmp_path: Path) -> None:
    head = generated.lines[:3000]
    small = await run_replay(head, tmp_path / "small", batch_size=7)
    large = await run_replay(head, tmp_path / "large", batch_size=5000)

    def unplaced(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
        key = ("round_id", "player_id", "currency")
        rows = [{k: v for k, v in r.items() if k != "ledger_position"} for r in results]
        return sorted(rows, key=lambda r: tuple(r[k] for k in key))

    assert unplaced(small.results) == unplaced(large.results)
    assert sorted(small.rejections, key=lambda r: r["line"]) == sorted(
        large.rejections, key=lambda r: r["line"]
    )
    assert small.summary == large.summary


async def test_a_failed_commit_stops_the_commits_queued_behind_it(
    generated: Feed, tmp_path: Path
) -> None:
    # A batch is decided while the one before it commits: one that fails must leave every
    # batch decided after it unwritten, as if the replay had stopped there.
    async with open_ledger(f"sqlite:///{tmp_path / 'replay.db'}") as ledger:
        await ledger.migrate()
        write = ledger._append
        written: list[int] = []

        async def failing_second(*args: Any, **kwargs: Any) -> Any:
            written.append(await ledger.last_position())
            if len(written) == 2:
                raise RuntimeError("the disk is gone")
            return await write(*args, **kwargs)

        ledger._append = failing_second  # type: ignore[method-assign]
        with pytest.raises(RuntimeError, match="the disk is gone"):
            await replay(
                (text.encode() for text in generated.lines[:1000]),
                ledger,
                io.StringIO(),
                io.StringIO(),
                batch_size=100,
            )
        first_batch_end = await ledger.last_position()

    assert len(written) == 2  # the batches decided behind the failed one never reached it
    assert written == [0, first_batch_end] and first_batch_end > 0


MALFORMED = {
    "not JSON": ("{oops", None, "not valid JSON"),
    "not an object": ("[1, 2]", None, "JSON object"),
    "unknown event type": (
        '{"event_id": "0b6f1f8e-5a47-4c1e-9a4e-000000000001", "event_type": "round.paused"}',
        "0b6f1f8e-5a47-4c1e-9a4e-000000000001",
        "round.paused",
    ),
    "empty line": ("", None, "not valid JSON"),
}


@pytest.mark.parametrize(("text", "event_id", "says"), MALFORMED.values(), ids=MALFORMED.keys())
async def test_malformed_lines_are_rejected_and_the_rest_settles(
    text: str, event_id: str | None, says: str, tmp_path: Path
) -> None:
    f = RoundFeed()
    events = [
        line(e)
        for e in (
            f.opened(),
            f.bet("a1"),
            f.hole("As Ad"),
            f.cards("dealer", "9c 9d"),
            f.cards("board", "Ah 7c 2d"),
            f.decide("a1", "flop", "call", "c1", 200),
            f.cards("board", "Ks 4h"),
            f.completed(),
        )
    ]
    feed = [events[0], text, *events[1:5], text, *events[5:]]

    replayed = await run_replay(feed, tmp_path)

    assert [(r["line"], r["event_id"]) for r in replayed.rejections] == [
        (2, event_id),
        (7, event_id),
    ]
    assert all(says in r["reason"] for r in replayed.rejections)
    code = "not_json" if says == "not valid JSON" else "contract"
    assert replayed.summary.rejected == Counter({code: 2})
    assert replayed.summary.settled == 1
    (result,) = replayed.results
    assert (result["stake_total"], result["returned_total"]) == (300, 200 + 400)


def test_the_replay_command_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    feed = Generator(seed=7).feed(40)
    path, out, rejected = tmp_path / "feed.jsonl", tmp_path / "out.jsonl", tmp_path / "rej.jsonl"
    path.write_text("".join(text + "\n" for text in feed.lines))
    ledger = f"sqlite:///{tmp_path / 'ledger' / 'cli.db'}"

    status = main(
        ["replay", str(path), "--out", str(out), "--rejections", str(rejected), "--ledger", ledger]
    )

    assert status == 0
    results = _jsonl(out.read_text())
    assert dict(_actual(results)) == expected_results(feed)
    assert {r["line"] for r in _jsonl(rejected.read_text())} == feed.rejected.keys()
    printed = capsys.readouterr().out
    endings = Counter(t.ending for t in feed.rounds)
    assert f"rounds settled   {endings['completed']:>12,}" in printed
    assert f"events read      {len(feed.lines):>12,}" in printed


def test_the_replay_command_refuses_a_missing_feed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.jsonl"
    args = [
        "replay",
        str(missing),
        "--out",
        str(tmp_path / "o"),
        "--rejections",
        str(tmp_path / "r"),
    ]
    assert main([*args, "--ledger", f"sqlite:///{tmp_path / 'l.db'}"]) == 2
    assert "argument feed: no such file" in capsys.readouterr().err
