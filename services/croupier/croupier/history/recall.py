"""Round recall: a round read back from its own ledger stream, as each viewer may see it.

:func:`recall` folds the recorded facts of ``round:<table>:<round>`` into one
:class:`~croupier.history.models.RoundRecall`; :func:`for_viewer` cuts it down to what the
viewer may see. Nothing here reads anything but the facts handed in, so what a dispute is
answered with is exactly what the ledger holds (``croupier verify`` vouches for the chain).

Who sees what:
- a player: only a round they have a wager in; only their own wagers, decisions, results
  and boxes (the dealer, the board and the burns are everyone's); no other player's id or
  amount, so no postings and no jackpot meter (its contributions sum other players'
  stakes), no rejected or held events, no hashes; and nothing that counts or times what
  others did: timeline entries keep no position, stream version, feed ``seq`` or
  recording time (their gaps would show how many others bet and called, and when), and
  the verification names the facts the cut was folded from by one digest
  (``facts_sha256``) and the settlement's position and hash, not fact by fact;
- staff: everything accepted; the grant ``rejections`` adds held and rejected events with
  their reasons, the grant ``hashes`` adds every fact's position hashes and how to check
  them with ``croupier verify``.

Every recall carries the ledger positions and hashes of the facts it was folded from
(:class:`~croupier.history.models.Verification`; a player's as the digest above), so what
a page shows can be re-derived from the ledger and compared (``croupier verify
--read-models``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Final

from croupier.history.cuts import shares
from croupier.history.models import (
    Box,
    Cards,
    Decision,
    MeterMovement,
    PayTableRef,
    Posting,
    Result,
    RoundRecall,
    Timeline,
    Total,
    Verification,
    Wager,
)
from croupier.history.viewer import Grant, Viewer
from croupier.ledger import RecordedEvent
from croupier.settlement.round import ACCEPTED, HELD, REJECTED, SETTLED, VOIDED
from holdem import Action, PayTable, PayTableError, Spot, Stage, load_paytable
from holdem.schedule import play_spot

_OUTCOME_WORDS: Final = {
    "win": "won",
    "lose": "lost",
    "push": "push, stake returned",
    "fold": "folded, stake lost",
    "refund": "refunded",
}
_LINE_WORDS: Final = {
    "win": "beats the dealer's hand",
    "dealer_does_not_qualify": "the dealer does not qualify",
    "below_straight": "below a straight",
}
_SPOT_WORDS: Final = {
    "ante": "Ante",
    "aa_bonus": "AA Bonus",
    "jackpot": "Jackpot",
    "plus": "Plus",
    "call": "Call",
    "flop_bet": "Flop bet",
    "turn_bet": "Turn bet",
}


def recall(table_id: str, round_id: str, facts: Sequence[RecordedEvent]) -> RoundRecall | None:
    """The whole round as recorded (``None`` when the stream is empty)."""
    if not facts:
        return None
    fold = _Fold(table_id, round_id)
    for fact in facts:
        assert fact.stream == f"round:{table_id}:{round_id}", "a fact of another stream"
        fold.add(fact)
    return fold.finish(facts)


def participants(round_: RoundRecall) -> set[str]:
    """Every player with a wager in the round."""
    return {w.player_id for w in round_.wagers if w.player_id is not None}


def for_viewer(round_: RoundRecall, viewer: Viewer) -> RoundRecall | None:
    """What ``viewer`` may see of the round; ``None`` when they may not see it at all."""
    if viewer.player_id is None:
        return _for_staff(round_, viewer.grants)
    if viewer.player_id not in participants(round_):
        return None
    return _Cuts(round_).cut(viewer.player_id)


class _Cuts:
    """A round indexed by player: every wager, decision, result, total, box and fact of the
    timeline under the players who may see it."""

    def __init__(self, round_: RoundRecall) -> None:
        self.round = round_
        cut = shares(
            round_.wagers,
            round_.decisions,
            round_.results,
            round_.totals,
            (
                (e.player_id, e.bet_id, e.box) if e.fact in (ACCEPTED, SETTLED, VOIDED) else None
                for e in round_.timeline
            ),
        )
        self.players = cut.players
        self.public = cut.public
        self.stripped: dict[int, Timeline] = {}
        self.cards: dict[frozenset[str], Cards] = {}
        self.verification = _for_player(round_.verification)

    def _entry(self, index: int) -> Timeline:
        entry = self.stripped.get(index)
        if entry is None:
            entry = self.round.timeline[index].model_copy(update=_UNCOUNTED)
            self.stripped[index] = entry
        return entry

    def _cards(self, boxes: set[str]) -> Cards:
        """The cards with only ``boxes``' hole cards (players on the same boxes share one)."""
        key = frozenset(boxes)
        cards = self.cards.get(key)
        if cards is None:
            every = self.round.cards
            cards = every.model_copy(update={"boxes": [b for b in every.boxes if b.box in key]})
            self.cards[key] = cards
        return cards

    def cut(self, player_id: str) -> RoundRecall:
        mine = self.players[player_id]
        return self.round.model_copy(
            update={
                "wagers": mine.wagers,
                "decisions": mine.decisions,
                "results": mine.results,
                "totals": mine.totals,
                "cards": self._cards(mine.boxes),
                "jackpot": [],
                "postings": [],
                "timeline": [self._entry(i) for i in sorted(self.public + mine.timeline)],
                "verification": self.verification,
            }
        )


#: What a player's timeline entries leave out: where each fact sits and when it was recorded.
_UNCOUNTED: Final[dict[str, Any]] = dict.fromkeys(
    ("position", "version", "seq", "recorded_at", "hash", "prev_hash")
)


#: How a player's cut says it can be checked (its verification's ``how``).
PLAYER_HOW: Final = (
    "This round is settled in the ledger at position {position}. To have it checked, give "
    "support the round ID and this reference: {reference}. From the ledger itself, support "
    "can then prove that this page shows exactly what was recorded, and that nothing up to "
    "the settlement was changed since."
)
_SUPPORT_HOW: Final = (
    "The round's facts up to position {position} hash to facts_sha256; its reference is "
    "{reference}. Run: croupier verify --read-models (every player's page of it shows what "
    "the ledger holds), and croupier verify --anchor {reference} (no row up to it was "
    "changed). The compliance role sees each fact's hash."
)


def _for_player(found: Verification | None) -> Verification | None:
    return _summary(found, PLAYER_HOW)


def _summary(found: Verification | None, how: str) -> Verification | None:
    """``found`` without the facts one by one: their digest and the last one's reference."""
    if found is None:
        return None
    reference = f"{found.head_position}:{found.head_hash}"
    return found.model_copy(
        update={
            "positions": [],
            "hashes": [],
            "how": how.format(position=found.head_position, reference=reference),
        }
    )


def _for_staff(round_: RoundRecall, grants: frozenset[Grant]) -> RoundRecall:
    timeline = round_.timeline
    if Grant.REJECTIONS not in grants:
        timeline = [t for t in timeline if t.fact not in (HELD, REJECTED)]
    if Grant.HASHES not in grants:
        timeline = [t.model_copy(update={"hash": None, "prev_hash": None}) for t in timeline]
    update: dict[str, Any] = {"timeline": timeline}
    if Grant.HASHES not in grants:
        update["verification"] = _summary(round_.verification, _SUPPORT_HOW)
    return round_.model_copy(update=update)


def why(spot: str, outcome: str, line: str | None, pays: int | None) -> str:
    """What a result means in words: ``"Ante won: Flush pays 2 to 1"``."""
    head = f"{_SPOT_WORDS.get(spot, spot)} {_OUTCOME_WORDS.get(outcome, outcome)}"
    if not line:
        return head
    named = _LINE_WORDS.get(line) or line.replace("_", " ").capitalize()
    if outcome == "win" and pays is not None:
        comma = "," if line in _LINE_WORDS else ""
        return f"{head}: {named}{comma} pays {pays} to 1"
    if outcome == "win" and spot == "jackpot":
        return f"{head}: {named}, a share of the jackpot meter"
    return f"{head}: {named}"


class _Fold:
    """Accumulates one round's facts in position order."""

    def __init__(self, table_id: str, round_id: str) -> None:
        self.table_id = table_id
        self.round_id = round_id
        self.game: str | None = None
        self.paytable: PayTableRef | None = None
        self.status = "open"
        self.opened_at: str | None = None
        self.closed_at: str | None = None
        self.closed_position: int | None = None
        self.void_reason: str | None = None
        self.wagers: list[Wager] = []
        self.bets: dict[str, Wager] = {}
        self.decisions: list[Decision] = []
        self.hole: dict[str, list[str]] = {}
        self.dealer: list[str] = []
        self.board: list[str] = []
        self.burns: list[str] = []
        self.hands: dict[str, str] = {}
        self.results: list[Result] = []
        self.jackpot: list[MeterMovement] = []
        self.postings: list[Posting] = []
        self.timeline: list[Timeline] = []

    def add(self, fact: RecordedEvent) -> None:
        event: Mapping[str, Any] = fact.data.get("event") or {}
        if fact.type == ACCEPTED:
            about = self._accept(event, fact)
        elif fact.type in (SETTLED, VOIDED):
            about = self._close(event, fact)
        elif event:
            about = _About(event_summary(event))
        else:
            about = _About("a message the feed contract refused, in its place in the round")
        self.timeline.append(
            Timeline(
                position=fact.position,
                version=fact.version,
                fact=fact.type,
                event_type=event.get("event_type"),
                seq=event.get("seq", fact.data.get("seq")),
                occurred_at=event.get("occurred_at"),
                recorded_at=fact.recorded_at.isoformat(),
                summary=about.summary,
                player_id=about.player_id,
                bet_id=about.bet_id,
                box=about.box,
                **about.detail,
                code=fact.data.get("code"),
                reason=fact.data.get("reason"),
                hash=fact.hash,
                prev_hash=fact.prev_hash,
            )
        )

    def _accept(self, event: Mapping[str, Any], fact: RecordedEvent) -> _About:
        kind, payload = event.get("event_type"), event.get("payload") or {}
        if kind == "round.opened":
            self.game = payload["game"]
            self.paytable = PayTableRef.model_validate(fact.data["paytable"])
            self.opened_at = event["occurred_at"]
        elif kind == "bet.placed":
            wager = Wager(**{k: payload[k] for k in Wager.placed_fields()}, placed_by="bet")
            self._add_wager(wager)
            detail = {"spot": wager.spot, "amount": wager.amount, "currency": wager.currency}
            summary = f"{wager.spot} {wager.amount}"
            return _About(summary, wager.player_id, wager.bet_id, wager.box, detail)
        elif kind == "cards.dealt":
            self._deal(payload)
            detail = {"target": payload["target"], "cards": list(payload["cards"])}
            return _About(event_summary(event), box=payload.get("box"), detail=detail)
        elif kind == "decision.made":
            return self._decide(payload)
        return _About(event_summary(event))

    def _add_wager(self, wager: Wager) -> None:
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

    def _decide(self, payload: Mapping[str, Any]) -> _About:
        ante = self.bets.get(payload["ante_bet_id"])
        assert ante is not None, "an accepted decision names an accepted ante"
        decision = Decision(
            ante_bet_id=ante.bet_id,
            player_id=ante.player_id,
            box=ante.box,
            stage=payload["stage"],
            action=payload["action"],
            bet_id=payload.get("bet_id"),
            amount=payload.get("amount"),
        )
        self.decisions.append(decision)
        if decision.bet_id is not None and decision.amount is not None:
            spot = play_spot(Stage(decision.stage), Action(decision.action))
            assert spot is not None, "an accepted call or bet makes a play wager"
            self._add_wager(
                Wager(
                    bet_id=decision.bet_id,
                    player_id=ante.player_id,
                    box=ante.box,
                    spot=str(spot),
                    amount=decision.amount,
                    currency=ante.currency,
                    placed_by="decision",
                )
            )
        summary = f"{decision.stage} {decision.action}"
        if decision.amount is not None:
            summary += f" {decision.amount}"
        detail = {
            "stage": decision.stage,
            "action": decision.action,
            "amount": decision.amount,
            "currency": ante.currency,
        }
        return _About(summary, ante.player_id, ante.bet_id, ante.box, detail)

    def _close(self, event: Mapping[str, Any], fact: RecordedEvent) -> _About:
        data = fact.data
        self.status = "settled" if fact.type == SETTLED else "voided"
        self.closed_at = event.get("occurred_at")
        self.closed_position = fact.position
        self.paytable = self.paytable or PayTableRef.model_validate(data["paytable"])
        self.hands = dict(data.get("hands") or {})
        self.void_reason = data.get("reason") if fact.type == VOIDED else None
        table = paytable_of(self.paytable.id, self.paytable.version)
        self.results = [
            Result(
                bet_id=r["bet_id"],
                player_id=r["player_id"],
                box=r["box"],
                spot=r["spot"],
                stake=r["stake"],
                returned=r["returned"],
                net=r["returned"] - r["stake"],
                outcome=r["outcome"],
                line=r.get("line"),
                currency=r["currency"],
                why=why_paid(table, r["spot"], r["outcome"], r.get("line")),
            )
            for r in data["results"]
        ]
        self.jackpot = [MeterMovement.model_validate(m) for m in data.get("jackpot") or []]
        self.postings = [Posting.model_validate(p) for p in data.get("postings") or []]
        return _About(
            "round settled" if fact.type == SETTLED else f"round voided: {self.void_reason}"
        )

    def finish(self, facts: Sequence[RecordedEvent]) -> RoundRecall:
        boxes = sorted(self.hole.items(), key=lambda item: box_order(item[0]))
        return RoundRecall(
            table_id=self.table_id,
            round_id=self.round_id,
            game=self.game,
            paytable=self.paytable,
            status=self.status,
            opened_at=self.opened_at,
            closed_at=self.closed_at,
            closed_position=self.closed_position,
            void_reason=self.void_reason,
            cards=Cards(
                dealer=self.dealer,
                dealer_hand=self.hands.get("dealer"),
                board=self.board,
                burns=self.burns,
                boxes=[Box(box=b, cards=c, hand=self.hands.get(b)) for b, c in boxes],
            ),
            wagers=self.wagers,
            decisions=self.decisions,
            results=self.results,
            totals=_totals(self.results),
            jackpot=self.jackpot,
            postings=self.postings,
            timeline=self.timeline,
            verification=_verification(self.table_id, self.round_id, facts),
        )


@dataclass(frozen=True, slots=True)
class _About:
    """What a fact's timeline entry says, and whose wager it is about."""

    summary: str
    player_id: str | None = None
    bet_id: str | None = None
    box: str | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)  # the Timeline's typed fields


def event_summary(event: Mapping[str, Any]) -> str:
    """A timeline entry's words for a feed event that says nothing more particular."""
    kind, payload = event.get("event_type"), event.get("payload") or {}
    if kind == "round.opened":
        return f"round opened: {payload.get('game')}, pay table {payload.get('paytable')}"
    if kind == "cards.dealt":
        where = f"box {payload.get('box')}" if payload.get("target") == "player" else ""
        return f"{payload.get('target')} {where} {' '.join(payload.get('cards') or [])}".replace(
            "  ", " "
        )
    if kind == "round.completed":
        return "round completed"
    if kind == "round.voided":
        return f"round voided: {payload.get('reason')}"
    return str(kind or "event")


def box_order(box: str) -> tuple[int, str]:
    """Boxes in seat order: numbered ones by number, then any others by name."""
    return (int(box), box) if box.isdigit() else (10**9, box)


@lru_cache(maxsize=64)
def paytable_of(paytable_id: str, version: int) -> PayTable | None:
    """The pay table a round recorded (``None`` if this build does not ship it)."""
    try:
        return load_paytable(paytable_id, version)
    except PayTableError:
        return None


def why_paid(table: PayTable | None, spot: str, outcome: str, line: str | None) -> str:
    """:func:`why`, with what the line pays on ``table``."""
    pays = None
    if table is not None and line and spot in _SPOTS:
        pays = table.pays(Spot(spot), line)
    return why(spot, outcome, line, pays)


_SPOTS: Final = frozenset(str(spot) for spot in Spot)


def _totals(results: Sequence[Result]) -> list[Total]:
    sums: dict[tuple[str, str], tuple[int, int]] = {}
    for r in results:
        stake, returned = sums.get((r.player_id, r.currency), (0, 0))
        sums[(r.player_id, r.currency)] = (stake + r.stake, returned + r.returned)
    return [
        Total(player_id=p, currency=c, stake=s, returned=r, net=r - s)
        for (p, c), (s, r) in sorted(sums.items())
    ]


def facts_digest(positions: Sequence[int], hashes: Sequence[str]) -> str:
    """sha256 of ``position:hash`` lines, one per fact: the facts a recall was folded from."""
    lines = "".join(f"{p}:{h}\n" for p, h in zip(positions, hashes, strict=True))
    return hashlib.sha256(lines.encode()).hexdigest()


def _verification(table_id: str, round_id: str, facts: Sequence[RecordedEvent]) -> Verification:
    last = facts[-1]
    positions, hashes = [f.position for f in facts], [f.hash for f in facts]
    return Verification(
        stream=f"round:{table_id}:{round_id}",
        positions=positions,
        hashes=hashes,
        head_position=last.position,
        head_hash=last.hash,
        facts_sha256=facts_digest(positions, hashes),
        how=(
            "Each fact's hash is sha256(prev_hash + canonical row). Run "
            f"croupier verify --anchor {last.position}:{last.hash} against the ledger: it "
            "walks the whole chain and fails if any row up to this one was changed, removed "
            "or inserted. croupier verify --read-models folds every round again from these "
            "facts and names any row of the players' history that differs."
        ),
    )
