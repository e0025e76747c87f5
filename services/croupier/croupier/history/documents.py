"""Players' documents of a closed round, folded on plain data: what the rounds projection writes.

:func:`player_documents` folds a round's facts, up to and including the one that closes it,
into msgspec structs that mirror :mod:`croupier.history.models` field for field, cuts them
per player and encodes them. The texts are byte for byte what the models give:

- each player's recall is ``for_viewer(recall(...), Viewer(player_id)).model_dump_json()``
  (:mod:`croupier.history.recall` stays the definition, and staff recall folds with it);
- each player's row in a currency is the ``PlayerRound`` the rounds projection describes,
  ``model_dump_json()``, and ``wagers`` is ``json.dumps`` of its results, compact.

Why a second fold: building the models fact by fact (validating each field), copying them
per player and encoding them took about 60 us of CPU per ledger fact, most of a rebuild's
time; on plain structs it is a fraction of that. msgspec writes strings, integers and nulls
as pydantic does (the same escapes, non-ASCII kept as UTF-8), and the structs keep the
models' field order, so the texts are the same; ``tests/unit/history/test_documents.py``
compares them over rounds of every kind, hostile texts included.

Only what a player may see is folded: held and rejected facts, postings and the jackpot
meter are not in any player's cut (see :mod:`croupier.history.recall` for who sees what),
but every fact handed in is named by the verification's digest.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

import msgspec

from croupier.history.cuts import shares
from croupier.history.recall import (
    PLAYER_HOW,
    box_order,
    event_summary,
    facts_digest,
    paytable_of,
    why_paid,
)
from croupier.ledger import RecordedEvent
from croupier.settlement.round import ACCEPTED, SETTLED, VOIDED
from holdem import Action, Stage
from holdem.schedule import play_spot

__all__ = ["PlayerRow", "RoundDocuments", "player_documents"]


class _Struct(msgspec.Struct, gc=False):
    """Every field is written, defaults too, in declaration order (as pydantic does)."""


class _PayTableRef(_Struct):
    id: str
    version: int
    hash: str


class _Wager(_Struct):
    bet_id: str
    player_id: str
    box: str
    spot: str
    amount: int
    currency: str
    placed_by: str


class _Decision(_Struct):
    ante_bet_id: str
    player_id: str
    box: str
    stage: str
    action: str
    bet_id: str | None
    amount: int | None


class _Box(_Struct):
    box: str
    cards: list[str]
    hand: str | None


class _Cards(_Struct):
    dealer: list[str]
    dealer_hand: str | None
    board: list[str]
    burns: list[str]
    boxes: list[_Box]


class _Result(_Struct):
    bet_id: str
    player_id: str
    box: str
    spot: str
    stake: int
    returned: int
    net: int
    outcome: str
    line: str | None
    currency: str
    why: str


class _Total(_Struct):
    player_id: str
    currency: str
    stake: int
    returned: int
    net: int


class _Entry(_Struct):
    """A timeline entry as a player's cut shows it: nothing that counts or times the facts."""

    position: None
    version: None
    fact: str
    event_type: str | None
    seq: None
    occurred_at: str | None
    recorded_at: None
    summary: str
    player_id: str | None
    bet_id: str | None
    box: str | None
    target: str | None
    cards: list[str] | None
    spot: str | None
    stage: str | None
    action: str | None
    amount: int | None
    currency: str | None
    code: str | None
    reason: str | None
    hash: None
    prev_hash: None


class _Verification(_Struct):
    stream: str
    positions: list[int]
    hashes: list[str]
    head_position: int
    head_hash: str
    facts_sha256: str
    how: str


class _Recall(_Struct):
    """A player's cut of :class:`~croupier.history.models.RoundRecall`."""

    table_id: str
    round_id: str
    game: str | None
    paytable: _PayTableRef | None
    status: str
    opened_at: str | None
    closed_at: str | None
    closed_position: int | None
    void_reason: str | None
    cards: _Cards
    wagers: list[_Wager]
    decisions: list[_Decision]
    results: list[_Result]
    totals: list[_Total]
    jackpot: list[Any]
    postings: list[Any]
    timeline: list[msgspec.Raw]
    verification: msgspec.Raw


class _PlayerRound(_Struct):
    """:class:`~croupier.history.models.PlayerRound`."""

    table_id: str
    round_id: str
    game: str
    paytable_id: str
    status: str
    closed_at: str | None
    position: int
    currency: str
    stake: int
    returned: int
    net: int
    wagers: list[_Result]
    decisions: list[_Decision]
    cards: _Cards | None
    void_reason: str | None


_encode: Final = msgspec.json.Encoder().encode

_VISIBLE: Final = frozenset((ACCEPTED, SETTLED, VOIDED))


class PlayerRow(msgspec.Struct, frozen=True, gc=False):
    """A player's row of the round in one currency: money, ``wagers`` and ``document``."""

    player_id: str
    currency: str
    stake: int
    returned: int
    wagers: str
    document: str


class RoundDocuments(msgspec.Struct, frozen=True, gc=False):
    """What the rounds projection writes of a closed round's players."""

    #: (player_id, the player's recall document), in player order.
    recalls: list[tuple[str, str]]
    #: One per player and currency, in the order of the settlement's results.
    rows: list[PlayerRow]


def player_documents(
    table_id: str,
    round_id: str,
    facts: Sequence[RecordedEvent],
    *,
    game: str,
    paytable_id: str,
    status: str,
    closed_at: str | None,
) -> RoundDocuments:
    """The documents of the round ``facts`` fold to; the last fact is the one closing it.

    ``game``, ``paytable_id``, ``status`` and ``closed_at`` are the round's row as the
    projection writes it (each player's row repeats them).
    """
    fold = _Fold()
    for fact in facts:
        assert fact.stream == f"round:{table_id}:{round_id}", "a fact of another stream"
        fold.add(fact)
    last = facts[-1]
    assert fold.closed_position == last.position, "folded to its close"
    return fold.documents(
        table_id,
        round_id,
        facts,
        game=game,
        paytable_id=paytable_id,
        status=status,
        closed_at=closed_at,
    )


class _Fold:
    """One round's facts in position order, kept as the players' cuts need them."""

    def __init__(self) -> None:
        self.game: str | None = None
        self.paytable: _PayTableRef | None = None
        self.status = "open"
        self.opened_at: str | None = None
        self.closed_at: str | None = None
        self.closed_position: int | None = None
        self.void_reason: str | None = None
        self.wagers: list[_Wager] = []
        self.bets: dict[str, _Wager] = {}
        self.decisions: list[_Decision] = []
        self.hole: dict[str, list[str]] = {}
        self.dealer: list[str] = []
        self.board: list[str] = []
        self.burns: list[str] = []
        self.hands: dict[str, str] = {}
        self.results: list[_Result] = []
        #: The entries a player may see: (text, player_id, bet_id, box).
        self.timeline: list[tuple[bytes, str | None, str | None, str | None]] = []

    def add(self, fact: RecordedEvent) -> None:
        kind = fact.type
        if kind not in _VISIBLE:
            return  # held and rejected facts change nothing a player sees
        data = fact.data
        event: Mapping[str, Any] = data.get("event") or {}
        player_id = bet_id = box = target = cards = spot = stage = action = amount = None
        currency = None
        if kind == ACCEPTED:
            event_type, payload = event.get("event_type"), event.get("payload") or {}
            summary: str | None = None
            if event_type == "round.opened":
                self.game = payload["game"]
                self.paytable = _paytable(data["paytable"])
                self.opened_at = event["occurred_at"]
            elif event_type == "bet.placed":
                wager = _Wager(
                    payload["bet_id"],
                    payload["player_id"],
                    payload["box"],
                    payload["spot"],
                    payload["amount"],
                    payload["currency"],
                    "bet",
                )
                self._add_wager(wager)
                player_id, bet_id, box = wager.player_id, wager.bet_id, wager.box
                spot, amount, currency = wager.spot, wager.amount, wager.currency
                summary = f"{wager.spot} {wager.amount}"
            elif event_type == "cards.dealt":
                self._deal(payload)
                target, cards, box = payload["target"], list(payload["cards"]), payload.get("box")
            elif event_type == "decision.made":
                decision, ante = self._decide(payload)
                player_id, bet_id, box = ante.player_id, ante.bet_id, ante.box
                stage, action, amount = decision.stage, decision.action, decision.amount
                currency = ante.currency
                summary = f"{decision.stage} {decision.action}"
                if decision.amount is not None:
                    summary += f" {decision.amount}"
            if summary is None:
                summary = event_summary(event)
        else:
            summary = self._close(event, fact)
        entry = _Entry(
            None,
            None,
            kind,
            event.get("event_type"),
            None,
            event.get("occurred_at"),
            None,
            summary,
            player_id,
            bet_id,
            box,
            target,
            cards,
            spot,
            stage,
            action,
            amount,
            currency,
            data.get("code"),
            data.get("reason"),
            None,
            None,
        )
        self.timeline.append((_encode(entry), player_id, bet_id, box))

    def _add_wager(self, wager: _Wager) -> None:
        self.wagers.append(wager)
        self.bets[wager.bet_id] = wager

    def _deal(self, payload: Mapping[str, Any]) -> None:
        target, cards = payload["target"], list(payload["cards"])
        if target == "player":
            self.hole.setdefault(payload["box"], []).extend(cards)
        elif target == "dealer":
            self.dealer += cards
        elif target == "board":
            self.board += cards
        else:
            self.burns += cards

    def _decide(self, payload: Mapping[str, Any]) -> tuple[_Decision, _Wager]:
        ante = self.bets.get(payload["ante_bet_id"])
        assert ante is not None, "an accepted decision names an accepted ante"
        decision = _Decision(
            ante.bet_id,
            ante.player_id,
            ante.box,
            payload["stage"],
            payload["action"],
            payload.get("bet_id"),
            payload.get("amount"),
        )
        self.decisions.append(decision)
        if decision.bet_id is not None and decision.amount is not None:
            spot = play_spot(Stage(decision.stage), Action(decision.action))
            assert spot is not None, "an accepted call or bet makes a play wager"
            self._add_wager(
                _Wager(
                    decision.bet_id,
                    ante.player_id,
                    ante.box,
                    str(spot),
                    decision.amount,
                    ante.currency,
                    "decision",
                )
            )
        return decision, ante

    def _close(self, event: Mapping[str, Any], fact: RecordedEvent) -> str:
        data = fact.data
        settled = fact.type == SETTLED
        self.status = "settled" if settled else "voided"
        self.closed_at = event.get("occurred_at")
        self.closed_position = fact.position
        self.paytable = self.paytable or _paytable(data["paytable"])
        self.hands = dict(data.get("hands") or {})
        self.void_reason = None if settled else data.get("reason")
        table = paytable_of(self.paytable.id, self.paytable.version)
        whys: dict[tuple[str, str, str | None], str] = {}
        results = self.results = []
        for r in data["results"]:
            spot, outcome, line = r["spot"], r["outcome"], r.get("line")
            why = whys.get((spot, outcome, line))
            if why is None:
                why = whys[(spot, outcome, line)] = why_paid(table, spot, outcome, line)
            stake, returned = r["stake"], r["returned"]
            results.append(
                _Result(
                    r["bet_id"],
                    r["player_id"],
                    r["box"],
                    spot,
                    stake,
                    returned,
                    returned - stake,
                    outcome,
                    line,
                    r["currency"],
                    why,
                )
            )
        return "round settled" if settled else f"round voided: {self.void_reason}"

    def documents(
        self,
        table_id: str,
        round_id: str,
        facts: Sequence[RecordedEvent],
        *,
        game: str,
        paytable_id: str,
        status: str,
        closed_at: str | None,
    ) -> RoundDocuments:
        round_shares = shares(
            self.wagers,
            self.decisions,
            self.results,
            _totals(self.results),
            ((player, bet, box) for _, player, bet, box in self.timeline),
        )
        players, public = round_shares.players, round_shares.public
        texts = [msgspec.Raw(text) for text, *_ in self.timeline]
        verification = msgspec.Raw(_encode(_for_player(table_id, round_id, facts)))
        boxes = sorted(self.hole.items(), key=lambda item: box_order(item[0]))
        every = [_Box(b, c, self.hands.get(b)) for b, c in boxes]
        dealer_hand = self.hands.get("dealer")
        shared_cards: dict[frozenset[str], _Cards] = {}
        recalls: list[tuple[str, str]] = []
        cut_cards: dict[str, _Cards] = {}
        for player_id in sorted(players):
            mine = players[player_id]
            key = frozenset(mine.boxes)
            cards = shared_cards.get(key)
            if cards is None:
                kept = [b for b in every if b.box in key]
                cards = shared_cards[key] = _Cards(
                    self.dealer, dealer_hand, self.board, self.burns, kept
                )
            cut_cards[player_id] = cards
            cut = _Recall(
                table_id,
                round_id,
                self.game,
                self.paytable,
                self.status,
                self.opened_at,
                self.closed_at,
                self.closed_position,
                self.void_reason,
                cards,
                mine.wagers,
                mine.decisions,
                mine.results,
                mine.totals,
                [],
                [],
                [texts[i] for i in sorted(public + mine.timeline)],
                verification,
            )
            recalls.append((player_id, _encode(cut).decode()))
        owners: dict[tuple[str, str], list[_Result]] = {}
        for result in self.results:  # the settlement's results, each with why it paid
            owners.setdefault((result.player_id, result.currency), []).append(result)
        rows: list[PlayerRow] = []
        position = self.closed_position
        assert position is not None
        for (player_id, currency), results in owners.items():
            stake = sum(r.stake for r in results)
            returned = sum(r.returned for r in results)
            assert stake >= 0 and returned >= 0, "money is never negative"
            antes = {r.bet_id for r in results if r.spot == "ante"}
            shown = players[player_id]
            document = _PlayerRound(
                table_id,
                round_id,
                game,
                paytable_id,
                status,
                closed_at,
                position,
                currency,
                stake,
                returned,
                returned - stake,
                results,
                [d for d in shown.decisions if d.ante_bet_id in antes],
                cut_cards[player_id],
                self.void_reason,
            )
            rows.append(
                PlayerRow(
                    player_id,
                    currency,
                    stake,
                    returned,
                    _wagers_text(results),
                    _encode(document).decode(),
                )
            )
        return RoundDocuments(recalls, rows)


def _paytable(found: Mapping[str, Any]) -> _PayTableRef:
    extra = found.keys() - {"id", "version", "hash"}
    if extra:
        raise ValueError(f"a pay table reference with unknown fields {sorted(extra)}")
    return _PayTableRef(found["id"], found["version"], found["hash"])


def _totals(results: Sequence[_Result]) -> list[_Total]:
    sums: dict[tuple[str, str], tuple[int, int]] = {}
    for r in results:
        stake, returned = sums.get((r.player_id, r.currency), (0, 0))
        sums[(r.player_id, r.currency)] = (stake + r.stake, returned + r.returned)
    return [_Total(p, c, s, r, r - s) for (p, c), (s, r) in sorted(sums.items())]


def _for_player(table_id: str, round_id: str, facts: Sequence[RecordedEvent]) -> _Verification:
    last = facts[-1]
    digest = facts_digest([f.position for f in facts], [f.hash for f in facts])
    reference = f"{last.position}:{last.hash}"
    how = PLAYER_HOW.format(position=last.position, reference=reference)
    return _Verification(
        f"round:{table_id}:{round_id}", [], [], last.position, last.hash, digest, how
    )


def _wagers_text(results: list[_Result]) -> str:
    """``json.dumps`` of the results as dicts, compact: msgspec writes the same text when it
    is printable ASCII (``json.dumps`` escapes everything else as ``\\uXXXX``)."""
    text = _encode(results).decode()
    if text.isascii() and "\x7f" not in text:
        return text
    return json.dumps([msgspec.structs.asdict(r) for r in results], separators=(",", ":"))
