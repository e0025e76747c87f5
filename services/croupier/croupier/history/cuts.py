"""Who may see what of a round: the one rule behind every player's cut, whether folded for a
viewer (:mod:`croupier.history.recall`) or written by the projector
(:mod:`croupier.history.documents`).

A player's share of a round is their wagers, the decisions on their own antes, the results
of their bets and their totals. A timeline entry goes only to whom it concerns: one about a
player to that player; one about a bet to the bet's owner; one about a box to the players
with a wager on it. Even then a player never sees an entry that names another player,
another player's bet, or a box they have no wager on. An entry about none of these is
public. Both cuts take the rounds' own types; the rule does not change with them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar


class _Wager(Protocol):
    @property
    def bet_id(self) -> str: ...
    @property
    def player_id(self) -> str: ...
    @property
    def box(self) -> str: ...
    @property
    def spot(self) -> str: ...


class _Decision(Protocol):
    @property
    def ante_bet_id(self) -> str: ...


class _Result(Protocol):
    @property
    def bet_id(self) -> str: ...


class _Total(Protocol):
    @property
    def player_id(self) -> str: ...


W = TypeVar("W", bound=_Wager)
D = TypeVar("D", bound=_Decision)
R = TypeVar("R", bound=_Result)
T = TypeVar("T", bound=_Total)

#: A timeline entry as the rule reads it: the player, bet and box it is about (each None
#: when it names none); None for an entry no player is shown.
About = tuple[str | None, str | None, str | None] | None


@dataclass(slots=True)
class Share(Generic[W, D, R, T]):
    """One player's share of a round; ``timeline`` holds indexes into the round's timeline."""

    wagers: list[W] = field(default_factory=list)
    bets: set[str] = field(default_factory=set)
    antes: set[str] = field(default_factory=set)
    boxes: set[str] = field(default_factory=set)
    decisions: list[D] = field(default_factory=list)
    results: list[R] = field(default_factory=list)
    totals: list[T] = field(default_factory=list)
    timeline: list[int] = field(default_factory=list)

    def add_wager(self, wager: W) -> None:
        self.wagers.append(wager)
        self.bets.add(wager.bet_id)
        self.boxes.add(wager.box)
        if wager.spot == "ante":
            self.antes.add(wager.bet_id)


@dataclass(slots=True)
class Shares(Generic[W, D, R, T]):
    """Every player's share of a round, and the timeline's public entries."""

    players: dict[str, Share[W, D, R, T]]
    public: list[int]


def shares(
    wagers: Iterable[W],
    decisions: Iterable[D],
    results: Iterable[R],
    totals: Iterable[T],
    timeline: Iterable[About],
) -> Shares[W, D, R, T]:
    """The round cut into its players' shares by the rule above."""
    players: dict[str, Share[W, D, R, T]] = {}
    owner: dict[str, str] = {}
    for wager in wagers:
        owner[wager.bet_id] = wager.player_id
        mine = players.get(wager.player_id)
        if mine is None:
            mine = players[wager.player_id] = Share()
        mine.add_wager(wager)
    for decision in decisions:
        ante = owner.get(decision.ante_bet_id)
        if ante is not None and decision.ante_bet_id in players[ante].antes:
            players[ante].decisions.append(decision)
    for result in results:
        if result.bet_id in owner:
            players[owner[result.bet_id]].results.append(result)
    for total in totals:
        if total.player_id in players:
            players[total.player_id].totals.append(total)
    return Shares(players, _share_timeline(timeline, players, owner))


def _share_timeline(
    timeline: Iterable[About], players: Mapping[str, Share[W, D, R, T]], owner: Mapping[str, str]
) -> list[int]:
    """Give each entry to the players it concerns; the indexes of the public ones."""
    on_box: dict[str, list[str]] = {}
    for seated, mine in players.items():
        for seat in mine.boxes:
            on_box.setdefault(seat, []).append(seated)
    public: list[int] = []
    for index, about in enumerate(timeline):
        if about is None:
            continue
        player_id, bet_id, box = about
        if player_id is not None:
            who = [player_id] if player_id in players else []
        elif bet_id is not None:
            who = [owner[bet_id]] if bet_id in owner else []
        elif box is not None:
            who = on_box.get(box, [])
        else:
            public.append(index)
            continue
        for me in who:
            mine = players[me]
            if _visible(me, about, mine.bets, mine.boxes):
                mine.timeline.append(index)
    return public


def _visible(
    me: str, about: tuple[str | None, str | None, str | None], bets: set[str], boxes: set[str]
) -> bool:
    player_id, bet_id, box = about
    if player_id is not None and player_id != me:
        return False
    if box is not None and box not in boxes:
        return False  # another player's box: its cards are theirs
    return bet_id is None or bet_id in bets
