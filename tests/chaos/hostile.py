"""A seeded corpus of hostile feed messages: every kind of bad input the service must refuse.

Each kind is a small function that writes one to a few messages on a round of its own (table
``<prefix>-evil``), so that no kind can touch the studio's valid rounds: sizes, encodings,
nesting, NUL and control characters, lengths, wrong types, missing and unknown fields, bad
enums, impossible numbers, sequence gaps (seq 2**70), rounds never opened, rule breaks, and
rounds that settle with hostile identifiers (which must still be stored, routed and
published). The valid feed's own duplicates and reorderings are added by :func:`interleave`.

A message's ``fault`` is its kind. :func:`corpus` gives every kind once (seeded: the random
parts, such as sizes and which field, come from ``random.Random(seed)``).
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from croupier_feeds import CH_CLASSIC, THP, RoundFeed

from studio.feed import FeedMessage

Event = dict[str, Any]
FIELDS: Final = ("event_id", "event_type", "schema_version", "table_id", "round_id", "seq")
FIELDS_ALL: Final = (*FIELDS, "occurred_at", "payload")


@dataclass
class Context:
    """What a kind writes with: fresh rounds on the hostile table, and the seeded RNG."""

    prefix: str
    rng: random.Random
    made: int = 0

    @property
    def table(self) -> str:
        return f"{self.prefix}-evil"

    def round(self, name: str) -> RoundFeed:
        self.made += 1
        safe = "".join(c if c.isalnum() else "-" for c in name)[:80]
        return RoundFeed(table_id=self.table, round_id=f"{safe}-{self.made}")


Kind = Callable[[Context], list[bytes]]
KINDS: dict[str, Kind] = {}


def kind(name: str) -> Callable[[Kind], Kind]:
    def register(fn: Kind) -> Kind:
        assert name not in KINDS, name
        KINDS[name] = fn
        return fn

    return register


def encode(event: Any) -> bytes:
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode()


def opened(ctx: Context, name: str) -> tuple[RoundFeed, Event]:
    feed = ctx.round(name)
    return feed, feed.opened(CH_CLASSIC)


def full_round(
    feed: RoundFeed, *, player: str = "p1", game: tuple[str, str] = CH_CLASSIC
) -> list[Event]:
    """A complete, valid Casino Hold'em round of one player who calls."""
    return [
        feed.opened(game),
        feed.bet("a1", player=player),
        feed.hole("As Kd"),
        feed.cards("dealer", "9c 9d"),
        feed.cards("board", "Ah 7c 2d"),
        feed.decide("a1", "flop", "call", "c1", 200),
        feed.cards("board", "Ks 4h"),
        feed.completed(),
    ]


# -- raw bytes: not JSON, not UTF-8, not an object ------------------------------------------

_RAW: Final = {
    "empty body": b"",
    "whitespace only": b" \t\r\n ",
    "json null": b"null",
    "json true": b"true",
    "json number": b"42",
    "json string": b'"round.opened"',
    "json array": b"[1,2,3]",
    "json empty object": b"{}",
    "unclosed object": b'{"event_id":',
    "lone closing brace": b"}",
    "single quotes": b"{'event_id': 'x'}",
    "trailing comma": b'{"event_type":"round.opened",}',
    "comments in json": b'{/* c */"event_type":"round.opened"}',
    "invalid utf-8 bytes": b'{"event_id":"\xff\xfe\xfd"}',
    "overlong utf-8": b'{"event_id":"\xc0\xaf"}',
    "raw nul byte": b"\x00",
    "nul bytes only": b"\x00" * 64,
    "binary garbage": bytes(range(256)),
    "nan literal": b'{"seq":NaN}',
    "infinity literal": b'{"seq":Infinity}',
    "huge exponent": b'{"seq":1e999999}',
    "integer of 5000 digits": b'{"seq":' + b"9" * 5000 + b"}",
    "integer of 100000 digits": b'{"seq":' + b"7" * 100_000 + b"}",
    "nested arrays 100000 deep": b"[" * 100_000 + b"]" * 100_000,
    "nested objects 100000 deep": b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
    "nested arrays unclosed": b"[" * 200_000,
    "lone surrogate escape": b'{"event_id":"\\ud800"}',
    "xml body": b"<event><seq>1</seq></event>",
}


def _raw(body: bytes) -> Kind:
    return lambda ctx: [body]


for _name, _body in _RAW.items():
    kind(_name)(_raw(_body))


@kind("truncated valid event")
def _truncated(ctx: Context) -> list[bytes]:
    _, event = opened(ctx, "truncated")
    body = encode(event)
    return [body[: ctx.rng.randrange(1, len(body) - 1)]]


@kind("trailing garbage after event")
def _trailing(ctx: Context) -> list[bytes]:
    return [encode(opened(ctx, "trailing")[1]) + b"garbage"]


@kind("two events in one body")
def _two(ctx: Context) -> list[bytes]:
    feed, event = opened(ctx, "two")
    return [encode(event) + b"\n" + encode(feed.bet("a1"))]


@kind("utf-8 bom")
def _bom(ctx: Context) -> list[bytes]:
    return [b"\xef\xbb\xbf" + encode(opened(ctx, "bom")[1])]


@kind("utf-16 encoded event")
def _utf16(ctx: Context) -> list[bytes]:
    return [json.dumps(opened(ctx, "utf16")[1]).encode("utf-16")]


@kind("utf-32 encoded event")
def _utf32(ctx: Context) -> list[bytes]:
    return [json.dumps(opened(ctx, "utf32")[1]).encode("utf-32")]


@kind("latin-1 encoded event")
def _latin1(ctx: Context) -> list[bytes]:
    event = opened(ctx, "latin1")[1]
    event["payload"]["paytable"] = "casino-holdem/clässic"
    return [json.dumps(event, ensure_ascii=False).encode("latin-1")]


@kind("duplicate keys in event")
def _duplicate_keys(ctx: Context) -> list[bytes]:
    body = encode(opened(ctx, "dupkeys")[1])
    return [body[:-1] + b',"event_type":"round.voided"}']


@kind("body of 1 MiB")
def _one_mib(ctx: Context) -> list[bytes]:
    event = opened(ctx, "1mib")[1]
    event["payload"]["note"] = "x" * (1 << 20)
    return [encode(event)]


@kind("body of 8 MiB")
def _eight_mib(ctx: Context) -> list[bytes]:
    return [b'{"pad":"' + b"y" * (8 << 20) + b'"}']


@kind("array of 100000 cards")
def _many_cards(ctx: Context) -> list[bytes]:
    feed, event = opened(ctx, "manycards")
    deal = feed.cards("board", "Ah")
    deal["payload"]["cards"] = ["Ah"] * 100_000
    return [encode(event), encode(deal)]


# -- the envelope: missing, null, wrong types, bad values ------------------------------------

for _field in FIELDS_ALL:

    def _missing(ctx: Context, field: str = _field) -> list[bytes]:
        event = opened(ctx, f"missing-{field}")[1]
        del event[field]
        return [encode(event)]

    def _null(ctx: Context, field: str = _field) -> list[bytes]:
        event = opened(ctx, f"null-{field}")[1]
        event[field] = None
        return [encode(event)]

    def _list(ctx: Context, field: str = _field) -> list[bytes]:
        event = opened(ctx, f"list-{field}")[1]
        event[field] = [event[field]]
        return [encode(event)]

    kind(f"missing {_field}")(_missing)
    kind(f"null {_field}")(_null)
    kind(f"{_field} wrapped in a list")(_list)


def _envelope(field: str, value: Any) -> Kind:
    def write(ctx: Context) -> list[bytes]:
        event = opened(ctx, f"{field}")[1]
        event[field] = value
        return [encode(event)]

    return write


_ENVELOPE: Final[dict[str, tuple[str, Any]]] = {
    "event_id not a uuid": ("event_id", "not-a-uuid"),
    "event_id of 300 characters": ("event_id", "e" * 300),
    "event_id with nul": ("event_id", "00000000-0000-0000-0000-00000000\x000000"),
    "event_id as a number": ("event_id", 12345),
    "unknown event_type": ("event_type", "round.paused"),
    "event_type with nul": ("event_type", "round.opened\x00"),
    "event_type in upper case": ("event_type", "ROUND.OPENED"),
    "schema_version 2": ("schema_version", 2),
    "schema_version as text": ("schema_version", "1"),
    "schema_version float": ("schema_version", 1.0),
    "table_id of 300 characters": ("table_id", "t" * 300),
    "table_id of 100000 characters": ("table_id", "t" * 100_000),
    "table_id with nul": ("table_id", "evil\x00table"),
    "table_id with routing wildcards": ("table_id", "evil.#.*"),
    "table_id with emoji": ("table_id", "evil-\U0001f0cf"),
    "table_id with rtl override": ("table_id", "evil\u202etable"),
    "table_id empty": ("table_id", ""),
    "table_id whitespace": ("table_id", "   "),
    "round_id of 300 characters": ("round_id", "r" * 300),
    "round_id with nul": ("round_id", "r\x001"),
    "round_id with newline": ("round_id", "r\n1"),
    "round_id empty": ("round_id", ""),
    "seq 0": ("seq", 0),
    "seq negative": ("seq", -1),
    "seq float": ("seq", 1.5),
    "seq as text": ("seq", "1"),
    "seq true": ("seq", True),
    "seq 2**31": ("seq", 2**31),
    "seq 2**63": ("seq", 2**63),
    "seq 2**64": ("seq", 2**64),
    "seq 2**70": ("seq", 2**70),
    "seq -2**70": ("seq", -(2**70)),
    "occurred_at not a time": ("occurred_at", "yesterday"),
    "occurred_at without zone": ("occurred_at", "2024-05-01T20:15:00"),
    "occurred_at year 99999": ("occurred_at", "99999-05-01T20:15:00Z"),
    "occurred_at as a number": ("occurred_at", 1714594500),
    "occurred_at month 13": ("occurred_at", "2024-13-01T20:15:00Z"),
    "payload as a list": ("payload", []),
    "payload as text": ("payload", "{}"),
}

for _name, (_field, _value) in _ENVELOPE.items():
    kind(_name)(_envelope(_field, _value))


@kind("unknown top-level field")
def _extra(ctx: Context) -> list[bytes]:
    event = opened(ctx, "extra")[1]
    event["admin"] = True
    return [encode(event)]


# -- round.opened payloads ----------------------------------------------------------------

_OPENED: Final[dict[str, dict[str, Any]]] = {
    "unknown game": {"game": "baccarat", "paytable": "casino-holdem/classic"},
    "unknown pay table": {"game": "casino_holdem", "paytable": "casino-holdem/free-money"},
    "game and pay table disagree": {"game": "texas_holdem_plus", "paytable": CH_CLASSIC[1]},
    "pay table of 300 characters": {"game": "casino_holdem", "paytable": "p" * 300},
    "pay table with nul": {"game": "casino_holdem", "paytable": "casino-holdem/classic\x00"},
    "pay table path traversal": {"game": "casino_holdem", "paytable": "../../etc/passwd"},
    "empty opened payload": {},
}


def _opened_payload(payload: dict[str, Any]) -> Kind:
    def write(ctx: Context) -> list[bytes]:
        event = ctx.round("opened-payload").opened()
        event["payload"] = payload
        return [encode(event)]

    return write


for _name, _payload in _OPENED.items():
    kind(_name)(_opened_payload(_payload))


# -- wagers ---------------------------------------------------------------------------------

_BETS: Final[dict[str, dict[str, Any]]] = {
    "amount 0": {"amount": 0},
    "amount negative": {"amount": -100},
    "amount float": {"amount": 100.5},
    "amount as text": {"amount": "100"},
    "amount true": {"amount": True},
    "amount 2**63": {"amount": 2**63},
    "amount 2**70": {"amount": 2**70},
    "amount below the table minimum": {"amount": 1},
    "amount above the table maximum": {"amount": 10**9},
    "currency lower case": {"currency": "eur"},
    "currency of 4 letters": {"currency": "EURO"},
    "currency with nul": {"currency": "EU\x00"},
    "currency empty": {"currency": ""},
    "unknown spot": {"spot": "free_money"},
    "side bet without ante": {"spot": "aa_bonus", "bet_id": "x9"},
    "bet_id empty": {"bet_id": ""},
    "bet_id of 100000 characters": {"bet_id": "b" * 100_000},
    "player_id empty": {"player": ""},
    "player_id of 100000 characters": {"player": "p" * 100_000},
    "box unknown": {"box": "box-99"},
}


def _bet(values: dict[str, Any]) -> Kind:
    def write(ctx: Context) -> list[bytes]:
        feed, event = opened(ctx, "bet")
        bet = feed.bet(
            values.get("bet_id", "a1"),
            spot=values.get("spot", "ante"),
            amount=values.get("amount", 100),
            player=values.get("player", "p1"),
            box=values.get("box", "main"),
            currency=values.get("currency", "EUR"),
        )
        return [encode(event), encode(bet)]

    return write


for _name, _values in _BETS.items():
    kind(_name)(_bet(_values))


@kind("bet_id used twice in a round")
def _bet_twice(ctx: Context) -> list[bytes]:
    feed, event = opened(ctx, "bettwice")
    return [encode(e) for e in (event, feed.bet("a1"), feed.bet("a1", player="p2"))]


@kind("bet after the cards")
def _late_bet(ctx: Context) -> list[bytes]:
    feed, event = opened(ctx, "latebet")
    events = [event, feed.bet("a1"), feed.hole("As Kd"), feed.bet("a2", player="p2")]
    return [encode(e) for e in events]


# -- cards and decisions --------------------------------------------------------------------

_CARDS: Final[dict[str, tuple[str, list[Any]]]] = {
    "card that is no card": ("player", ["Zz", "Kd"]),
    "card in lower case": ("player", ["as", "kd"]),
    "card ten as 10": ("player", ["10h", "Kd"]),
    "card as a number": ("player", [14, 13]),
    "same card twice in a deal": ("player", ["As", "As"]),
    "three hole cards": ("player", ["As", "Kd", "Qh"]),
    "empty card list": ("player", []),
    "six board cards": ("board", ["2c", "3c", "4c", "5c", "6c", "7c"]),
    "unknown card target": ("croupier", ["As", "Kd"]),
    "card with nul": ("player", ["A\x00", "Kd"]),
}


def _cards(target: str, cards: list[Any]) -> Kind:
    def write(ctx: Context) -> list[bytes]:
        feed, event = opened(ctx, "cards")
        deal = feed.cards(target, "As Kd", box="main" if target == "player" else None)
        deal["payload"]["cards"] = cards
        return [encode(e) for e in (event, feed.bet("a1"), deal)]

    return write


for _name, (_target, _cards_list) in _CARDS.items():
    kind(_name)(_cards(_target, _cards_list))


@kind("dealer dealt twice")
def _dealer_twice(ctx: Context) -> list[bytes]:
    feed, event = opened(ctx, "dealertwice")
    deals = [feed.cards("dealer", "9c 9d"), feed.cards("dealer", "8c 8d")]
    return [encode(e) for e in (event, feed.bet("a1"), *deals)]


def _decision(stage: str, action: str, ante: str, amount: int | None) -> Kind:
    def write(ctx: Context) -> list[bytes]:
        feed, event = opened(ctx, "decision")
        events = [event, feed.bet("a1"), feed.hole("As Kd"), feed.cards("dealer", "9c 9d")]
        events += [feed.cards("board", "Ah 7c 2d")]
        bet_id = "c1" if amount is not None else None
        events.append(feed.decide(ante, stage, action, bet_id, amount))
        return [encode(e) for e in events]

    return write


_DECISIONS: Final[dict[str, tuple[str, str, str, int | None]]] = {
    "decision for an unknown ante": ("flop", "call", "nope", 200),
    "call not twice the ante": ("flop", "call", "a1", 150),
    "call of 2**70": ("flop", "call", "a1", 2**70),
    "unknown action": ("flop", "double", "a1", None),
    "unknown stage": ("river-2", "call", "a1", 200),
    "decision at the wrong stage": ("turn", "call", "a1", 200),
}

for _name, (_stage, _action, _ante, _amount) in _DECISIONS.items():
    kind(_name)(_decision(_stage, _action, _ante, _amount))


@kind("two decisions at one stage")
def _twice(ctx: Context) -> list[bytes]:
    feed, event = opened(ctx, "decidetwice")
    events = [event, feed.bet("a1"), feed.hole("As Kd"), feed.cards("dealer", "9c 9d")]
    events += [feed.cards("board", "Ah 7c 2d"), feed.decide("a1", "flop", "fold")]
    events.append(feed.decide("a1", "flop", "call", "c1", 200))
    return [encode(e) for e in events]


# -- the round's course ----------------------------------------------------------------------


@kind("completed with cards missing")
def _early_completion(ctx: Context) -> list[bytes]:
    feed, event = opened(ctx, "early")
    return [encode(e) for e in (event, feed.bet("a1"), feed.completed())]


@kind("voided twice")
def _voided_twice(ctx: Context) -> list[bytes]:
    feed, event = opened(ctx, "voidtwice")
    return [encode(e) for e in (event, feed.bet("a1"), feed.voided(), feed.voided())]


@kind("void without a reason")
def _void_no_reason(ctx: Context) -> list[bytes]:
    feed, event = opened(ctx, "voidreason")
    return [encode(e) for e in (event, feed.bet("a1"), feed.voided(reason=""))]


@kind("round opened twice")
def _opened_twice(ctx: Context) -> list[bytes]:
    feed, event = opened(ctx, "openedtwice")
    again = feed.opened(THP, seq=1)
    return [encode(event), encode(again)]


@kind("event_id reused with other content")
def _reused_id(ctx: Context) -> list[bytes]:
    feed, event = opened(ctx, "reused")
    bet = feed.bet("a1")
    other = {**bet, "seq": 3, "payload": {**bet["payload"], "amount": 500}}
    return [encode(e) for e in (event, bet, other)]


@kind("event for a round never opened")
def _never_opened(ctx: Context) -> list[bytes]:
    feed = ctx.round("neveropened")
    feed.next_seq = 2
    return [encode(feed.bet("a1"))]


@kind("sequence gap then nothing")
def _gap(ctx: Context) -> list[bytes]:
    feed, event = opened(ctx, "gap")
    feed.next_seq = 5
    return [encode(event), encode(feed.bet("a1"))]


@kind("seq 2**70 on an open round")
def _seq_huge(ctx: Context) -> list[bytes]:
    feed, event = opened(ctx, "seqhuge")
    return [encode(event), encode(feed.bet("a1", seq=2**70))]


@kind("events of a round in reverse")
def _reverse(ctx: Context) -> list[bytes]:
    return [encode(e) for e in reversed(full_round(ctx.round("reverse")))]


@kind("a settled round replayed whole")
def _replayed(ctx: Context) -> list[bytes]:
    events = [encode(e) for e in full_round(ctx.round("replayed"))]
    return events + events


# -- rounds that settle with hostile identifiers -------------------------------------------

_SETTLING: Final[dict[str, str]] = {
    "settles with a player_id of 300 bytes": "p" * 300,
    "settles with a player_id with nul": "p\x001",
    "settles with a player_id with routing wildcards": "p.#.*",
    "settles with an emoji player_id": "player-\U0001f3b2",
    "settles with a player_id with newline": "p\n1",
}


def _settling(player: str) -> Kind:
    return lambda ctx: [encode(e) for e in full_round(ctx.round("settles"), player=player)]


for _name, _player in _SETTLING.items():
    kind(_name)(_settling(_player))


@kind("settles with a NUL in bet_id")
def _bet_id_nul(ctx: Context) -> list[bytes]:
    # Not on the progressive table: its meter is shared with the valid rounds.
    events = full_round(ctx.round("betnul"))
    for event in events:
        payload = event["payload"]
        for key in ("bet_id", "ante_bet_id"):
            if key in payload:
                payload[key] = f"{payload[key]}\x00"
    return [encode(e) for e in events]


# -- the corpus ------------------------------------------------------------------------------


def messages(ctx: Context, name: str) -> list[FeedMessage]:
    """The messages of one kind, ready to publish (routing key on the hostile table)."""
    out = []
    for body in KINDS[name](ctx):
        event_id = _event_id(body) or str(uuid.UUID(int=ctx.rng.getrandbits(128), version=4))
        out.append(FeedMessage(f"{ctx.table}.hostile", body, event_id, None, ctx.table, name))
    return out


def _event_id(body: bytes) -> str | None:
    """The body's own event_id when it has a usable one (the studio sends it as message_id)."""
    try:
        value = json.loads(body).get("event_id")
    except (ValueError, AttributeError, RecursionError):
        return None
    if not isinstance(value, str) or not value.isprintable():
        return None
    try:
        return value if 0 < len(value.encode()) <= 255 else None
    except UnicodeEncodeError:  # a lone surrogate
        return None


def corpus(seed: int, prefix: str, kinds: Sequence[str] | None = None) -> list[FeedMessage]:
    """Every kind (or those named) once, in a seeded order; each message's fault is its kind."""
    ctx = Context(prefix, random.Random(seed))
    names = list(KINDS if kinds is None else kinds)
    ctx.rng.shuffle(names)
    return [m for name in names for m in messages(ctx, name)]


def interleave(
    valid: Sequence[FeedMessage], hostile: Sequence[FeedMessage], seed: int
) -> list[FeedMessage]:
    """The valid feed with the hostile messages spread through it, and the valid feed's own
    abuse added: some valid events sent again later (redelivered), some sent twice in a row.

    The valid messages keep their order among themselves, so a replay of the valid feed in
    that order settles what the service should.
    """
    rng = random.Random(seed)
    slots: list[list[FeedMessage]] = [[] for _ in range(len(valid) + 1)]
    for message in hostile:
        slots[rng.randrange(len(slots))].append(message)
    for index in rng.sample(range(len(valid)), k=min(len(valid), 40)):
        again = valid[index]
        later = rng.randrange(index + 1, len(slots))
        slots[later].append(FeedMessage(**{**_fields(again), "fault": "valid event sent again"}))
    out: list[FeedMessage] = list(slots[0])
    for message, extra in zip(valid, slots[1:], strict=True):
        out.append(message)
        out += extra
    return out


def _fields(message: FeedMessage) -> dict[str, Any]:
    return {
        "routing_key": message.routing_key,
        "body": message.body,
        "event_id": message.event_id,
        "event": message.event,
        "table_id": message.table_id,
        "fault": message.fault,
    }


# -- refused messages inside shared, multi-box rounds ---------------------------------------

Spoil = Callable[[Event], None]

#: Contract refusals by the stage of the round they hit: a bet (a fourth player's), a
#: decision (the third player's) or a deal (the flop, sent again correctly right after).
INSIDE: Final[dict[str, dict[str, Spoil]]] = {
    "bet": {
        "player_id of 300 bytes": lambda e: e["payload"].update(player_id="p" * 300),
        "NUL in player_id": lambda e: e["payload"].update(player_id="p4\x00"),
        "# in player_id": lambda e: e["payload"].update(player_id="p#4"),
        "* in player_id": lambda e: e["payload"].update(player_id="*"),
        "amount as text": lambda e: e["payload"].update(amount="100"),
        "unknown spot": lambda e: e["payload"].update(spot="split"),
        "unknown payload field": lambda e: e["payload"].update(tip=5),
    },
    "decision": {
        "unknown action": lambda e: e["payload"].update(action="raise"),
        "unknown stage": lambda e: e["payload"].update(stage="river"),
        "NUL in ante_bet_id": lambda e: e["payload"].update(ante_bet_id="a3\x00"),
        "bad occurred_at": lambda e: e.update(occurred_at="yesterday"),
    },
    "deal": {
        "no such card": lambda e: e["payload"].update(cards=["Ax", "7c", "2d"]),
        "unknown target": lambda e: e["payload"].update(target="table"),
        "unknown envelope field": lambda e: e.update(studio="s1"),
    },
}


@dataclass(frozen=True)
class Inside:
    """Shared, multi-box rounds that each carry one refused message.

    ``served`` is what the studio sends (the refused message at its ``seq``); ``reference``
    the same rounds as the studio would have sent them without it (renumbered), for the
    independent replay; ``tables`` the tables they are dealt on.
    """

    served: list[FeedMessage]
    reference: list[FeedMessage]
    tables: frozenset[str]


def inside_rounds(prefix: str, games: Sequence[tuple[str, str]] = (CH_CLASSIC, THP)) -> Inside:
    """Every refusal of :data:`INSIDE` in a round of its own, for each of ``games``."""
    served: list[FeedMessage] = []
    reference: list[FeedMessage] = []
    tables: set[str] = set()
    made = 0
    for stage, spoils in INSIDE.items():
        for name, spoil in spoils.items():
            for game in games:
                made += 1
                table = f"{prefix}-inside{made % 4}"
                feed = RoundFeed(table_id=table, round_id=f"inside-{made}")
                events, bad = _inside_round(feed, game, stage)
                body = encode(_spoiled(events[bad], spoil))
                fault = f"refused inside a round: {stage}, {name}"
                sent = [_message(e, table) for e in events]
                sent[bad] = FeedMessage(
                    f"{table}.{events[bad]['event_type']}",
                    body,
                    events[bad]["event_id"],
                    None,
                    table,
                    fault,
                )
                served += sent
                reference += [_message(e, table) for e in _renumbered(events, bad)]
                tables.add(table)
    return Inside(served, reference, frozenset(tables))


def _inside_round(f: RoundFeed, game: tuple[str, str], stage: str) -> tuple[list[Event], int]:
    """A round of three players on two boxes (p1 and p2 share box 1): its events and the
    index of the one the refusal spoils (a deal is sent again, correctly, right after)."""
    thp = game == THP
    events = [
        f.opened(game),
        f.bet("a1", box="1"),
        f.bet("a2", amount=300, player="p2", box="1"),
        f.bet("a3", amount=200, player="p3", box="2"),
    ]
    bad: int | None = None
    if stage == "bet":
        bad = len(events)
        events.append(f.bet("a4", amount=500, player="p4", box="1"))
    events += [f.hole("As Ad", box="1"), f.hole("Kh Qh", box="2"), f.cards("dealer", "9c 9d")]
    flop_at = None
    if not thp:
        flop_at = len(events)
        events.append(f.cards("board", "Ah 7c 2d"))
    stage_name, call = ("preflop", "call") if thp else ("flop", "call")
    events += [
        f.decide("a1", stage_name, call, "c1", 200),
        f.decide("a2", stage_name, "fold"),
    ]
    if stage == "decision":
        bad = len(events)
    events.append(f.decide("a3", stage_name, call, "c3", 400))
    if thp:
        flop_at = len(events)
        events.append(f.cards("board", "Ah 7c 2d"))
    if stage == "deal":
        assert flop_at is not None
        bad = flop_at
        again = f.cards("board", "Ah 7c 2d", seq=events[flop_at]["seq"] + 1)
        for later in events[flop_at + 1 :]:
            later["seq"] += 1
        events.insert(flop_at + 1, again)
        f.next_seq += 1
    rest = [f.cards("board", "Ks"), f.cards("board", "4h")] if thp else [f.cards("board", "Ks 4h")]
    events += [*rest, f.completed()]
    assert bad is not None
    return events, bad


def _spoiled(event: Event, spoil: Spoil) -> Event:
    bad = json.loads(json.dumps(event))
    spoil(bad)
    return bad


def _renumbered(events: Sequence[Event], without: int) -> list[Event]:
    """The round as the studio would have sent it without event ``without``."""
    kept = [dict(e) for i, e in enumerate(events) if i != without]
    for seq, event in enumerate(kept, start=1):
        event["seq"] = seq
    return kept


def _message(event: Event, table: str) -> FeedMessage:
    return FeedMessage(
        f"{table}.{event['event_type']}", encode(event), event["event_id"], event, table
    )
