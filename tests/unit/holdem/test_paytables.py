"""Pay tables (docs/rules.md, "Pay tables" and "Stake limits").

The expected tables are written out here from docs/rules.md, independently of the JSON files,
so a changed data file cannot change what the tests expect.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Mapping
from importlib import resources
from typing import Any

import pytest

from holdem.paytable import (
    CATEGORY_LINES,
    Game,
    PayTableError,
    Spot,
    StakeLimit,
    content_hash,
    load_paytable,
    parse_paytable,
    paytable_ids,
)

CLASSIC_ANTE = {
    "royal_flush": 100,
    "straight_flush": 20,
    "four_of_a_kind": 10,
    "full_house": 3,
    "flush": 2,
    "straight": 1,
    "three_of_a_kind": 1,
    "two_pair": 1,
    "pair": 1,
    "high_card": 1,
}
ROYAL_20_ANTE = CLASSIC_ANTE | {"royal_flush": 20}
CLASSIC_AA = {
    "royal_flush": 100,
    "straight_flush": 50,
    "four_of_a_kind": 40,
    "full_house": 30,
    "flush": 20,
    "straight": 7,
    "three_of_a_kind": 7,
    "two_pair": 7,
    "pair_of_aces": 7,
}
FLAT_AA = dict.fromkeys(CLASSIC_AA, 7)
JACKPOT_FIXED = {"four_of_a_kind": 500, "full_house": 100, "flush": 50}
THP_ANTE = dict.fromkeys(
    ("royal_flush", "straight_flush", "four_of_a_kind", "full_house", "flush", "straight"), 1
)
PLUS = {
    "pair_of_aces": 30,
    "ace_king_suited": 25,
    "ace_queen_or_jack_suited": 20,
    "ace_king_offsuit": 15,
    "pair_of_jacks_to_kings": 10,
    "ace_queen_or_jack_offsuit": 5,
    "pair_of_twos_to_tens": 3,
}
WIN = {"win": 1}

EXPECTED: dict[str, tuple[Game, dict[Spot, dict[str, int]]]] = {
    "casino-holdem/classic": (
        Game.CASINO_HOLDEM,
        {Spot.ANTE: CLASSIC_ANTE, Spot.CALL: WIN, Spot.AA_BONUS: CLASSIC_AA},
    ),
    "casino-holdem/royal-20": (
        Game.CASINO_HOLDEM,
        {Spot.ANTE: ROYAL_20_ANTE, Spot.CALL: WIN, Spot.AA_BONUS: FLAT_AA},
    ),
    "casino-holdem/progressive": (
        Game.CASINO_HOLDEM,
        {
            Spot.ANTE: CLASSIC_ANTE,
            Spot.CALL: WIN,
            Spot.AA_BONUS: CLASSIC_AA,
            Spot.JACKPOT: JACKPOT_FIXED,
        },
    ),
    "texas-holdem-plus/standard": (
        Game.TEXAS_HOLDEM_PLUS,
        {
            Spot.ANTE: THP_ANTE,
            Spot.CALL: WIN,
            Spot.FLOP_BET: WIN,
            Spot.TURN_BET: WIN,
            Spot.PLUS: PLUS,
        },
    ),
}
ANTE_LIMIT = StakeLimit(100, 1_000_000)
SIDE_LIMIT = StakeLimit(100, 100_000)
EXPECTED_LIMITS = {
    "casino-holdem/classic": {Spot.ANTE: ANTE_LIMIT, Spot.AA_BONUS: SIDE_LIMIT},
    "casino-holdem/royal-20": {Spot.ANTE: ANTE_LIMIT, Spot.AA_BONUS: SIDE_LIMIT},
    "casino-holdem/progressive": {
        Spot.ANTE: ANTE_LIMIT,
        Spot.AA_BONUS: SIDE_LIMIT,
        Spot.JACKPOT: StakeLimit(100, 100),
    },
    "texas-holdem-plus/standard": {Spot.ANTE: ANTE_LIMIT, Spot.PLUS: SIDE_LIMIT},
}


# --- the shipped tables ---------------------------------------------------------------------


def test_every_table_ships() -> None:
    assert paytable_ids() == sorted(EXPECTED)


@pytest.mark.parametrize("paytable_id", sorted(EXPECTED))
def test_multipliers_are_those_of_the_rules(paytable_id: str) -> None:
    game, spots = EXPECTED[paytable_id]
    table = load_paytable(paytable_id)
    assert table.id == paytable_id
    assert table.version == 1
    assert table.game is game
    assert {spot: dict(lines) for spot, lines in table.spots.items()} == spots
    for spot, lines in spots.items():
        assert table.offers(spot)
        for line, multiplier in lines.items():
            assert table.pays(spot, line) == multiplier


@pytest.mark.parametrize("paytable_id", sorted(EXPECTED))
def test_limits_are_those_of_the_rules(paytable_id: str) -> None:
    table = load_paytable(paytable_id)
    assert dict(table.limits) == EXPECTED_LIMITS[paytable_id]
    # Play wagers are multiples of the ante: they carry no limits of their own.
    for spot in (Spot.CALL, Spot.FLOP_BET, Spot.TURN_BET):
        assert table.limit(spot) is None


@pytest.mark.parametrize(
    ("paytable_id", "spot", "line"),
    [
        ("casino-holdem/classic", Spot.AA_BONUS, "pair"),  # pair of kings loses
        ("casino-holdem/classic", Spot.AA_BONUS, "high_card"),
        ("casino-holdem/progressive", Spot.JACKPOT, "straight"),
        ("casino-holdem/progressive", Spot.JACKPOT, "royal_flush"),  # a meter line, not odds
        ("texas-holdem-plus/standard", Spot.ANTE, "three_of_a_kind"),  # the ante pushes
        ("texas-holdem-plus/standard", Spot.ANTE, "high_card"),
        ("casino-holdem/classic", Spot.PLUS, "pair_of_aces"),  # not offered at all
    ],
)
def test_lines_that_pay_nothing(paytable_id: str, spot: Spot, line: str) -> None:
    assert load_paytable(paytable_id).pays(spot, line) is None


def test_spots_a_table_does_not_offer() -> None:
    assert not load_paytable("casino-holdem/classic").offers(Spot.JACKPOT)
    assert not load_paytable("casino-holdem/classic").offers(Spot.PLUS)
    assert not load_paytable("texas-holdem-plus/standard").offers(Spot.AA_BONUS)


def test_the_progressive_jackpot() -> None:
    jackpot = load_paytable("casino-holdem/progressive").jackpot
    assert jackpot is not None
    assert jackpot.stake == 100
    assert jackpot.meter_share_percent == 20
    assert jackpot.seed == 5_000_000
    assert dict(jackpot.meter_percent) == {"royal_flush": 100, "straight_flush": 10}
    assert [jackpot.contribution(s) for s in (0, 4, 5, 100, 104, 999)] == [0, 0, 1, 20, 20, 199]
    for paytable_id in sorted(set(EXPECTED) - {"casino-holdem/progressive"}):
        assert load_paytable(paytable_id).jackpot is None


def test_load_picks_the_newest_or_the_given_version() -> None:
    newest = load_paytable("casino-holdem/classic")
    assert load_paytable("casino-holdem/classic", 1) is newest


@pytest.mark.parametrize(
    ("paytable_id", "version", "message"),
    [
        ("casino-holdem/nope", None, "unknown pay table 'casino-holdem/nope'; known: ["),
        ("", None, "unknown pay table ''"),
        ("casino-holdem/classic", 2, "pay table 'casino-holdem/classic' has no version 2"),
        ("texas-holdem-plus/standard", 0, "has no version 0"),
    ],
)
def test_unknown_tables_and_versions(paytable_id: str, version: int | None, message: str) -> None:
    with pytest.raises(PayTableError, match=re.escape(message)):
        load_paytable(paytable_id, version)


# --- content hash ----------------------------------------------------------------------------


def _shipped(paytable_id: str) -> dict[str, Any]:
    name = paytable_id.replace("/", "--") + "--v1.json"
    document = resources.files("holdem.paytables").joinpath(name).read_text(encoding="utf-8")
    loaded: dict[str, Any] = json.loads(document)
    return loaded


@pytest.mark.parametrize("paytable_id", sorted(EXPECTED))
def test_content_hash_is_that_of_the_document(paytable_id: str) -> None:
    raw = _shipped(paytable_id)
    table = load_paytable(paytable_id)
    assert table.content_hash.startswith("sha256:")
    assert len(table.content_hash) == len("sha256:") + 64
    assert table.content_hash == content_hash(raw) == parse_paytable(raw).content_hash


def test_content_hash_ignores_key_order_and_layout() -> None:
    raw = _shipped("casino-holdem/progressive")
    reordered = json.loads(json.dumps(raw, sort_keys=True, indent=7))
    reordered = dict(reversed(list(reordered.items())))
    assert content_hash(reordered) == content_hash(raw)


def test_content_hashes_differ_between_tables() -> None:
    hashes = {load_paytable(paytable_id).content_hash for paytable_id in EXPECTED}
    assert len(hashes) == len(EXPECTED)


@pytest.mark.parametrize(
    "change",
    [
        lambda raw: raw["spots"]["ante"].update(royal_flush=99),
        lambda raw: raw["spots"]["aa_bonus"].update(pair_of_aces=8),
        lambda raw: raw["limits"]["ante"].update(max=999_999),
        lambda raw: raw.update(title=raw["title"] + "."),
        lambda raw: raw.update(sources=[*raw["sources"], "seed 009"]),
        lambda raw: raw.update(version=2),
    ],
    ids=["ante line", "aa line", "limit", "title", "sources", "version"],
)
def test_content_hash_changes_with_content(change: Callable[[dict[str, Any]], None]) -> None:
    raw = _shipped("casino-holdem/classic")
    before = parse_paytable(raw).content_hash
    changed = copy.deepcopy(raw)
    change(changed)
    assert parse_paytable(changed).content_hash != before
    assert parse_paytable(raw).content_hash == before  # the original is untouched


# --- validation ------------------------------------------------------------------------------


def _broken(paytable_id: str, change: Callable[[dict[str, Any]], object]) -> dict[str, Any]:
    raw = copy.deepcopy(_shipped(paytable_id))
    change(raw)
    return raw


def _del(*keys: str) -> Callable[[dict[str, Any]], object]:
    def change(raw: dict[str, Any]) -> None:
        target = raw
        for key in keys[:-1]:
            target = target[key]
        del target[keys[-1]]

    return change


def _set(value: Any, *keys: str) -> Callable[[dict[str, Any]], object]:
    def change(raw: dict[str, Any]) -> None:
        target = raw
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value

    return change


CLASSIC = "casino-holdem/classic"
PROGRESSIVE = "casino-holdem/progressive"
THP = "texas-holdem-plus/standard"

BAD_DOCUMENTS: list[tuple[str, str, Callable[[dict[str, Any]], object], str]] = [
    # (case, table it starts from, the change, what the error says)
    ("unknown game", CLASSIC, _set("baccarat", "game"), "'baccarat' is not a valid Game"),
    ("unknown spot", CLASSIC, _set({"win": 1}, "spots", "tie"), "'tie' is not a valid Spot"),
    (
        "unknown line",
        CLASSIC,
        _set(5, "spots", "aa_bonus", "pair_of_kings"),
        "spots.aa_bonus has unknown lines ['pair_of_kings']",
    ),
    (
        "line of another spot",
        THP,
        _set(2, "spots", "plus", "flush"),
        "spots.plus has unknown lines ['flush']",
    ),
    (
        "zero multiplier",
        CLASSIC,
        _set(0, "spots", "ante", "flush"),
        "spots.ante.flush must be a positive integer, got 0",
    ),
    (
        "negative multiplier",
        CLASSIC,
        _set(-7, "spots", "aa_bonus", "pair_of_aces"),
        "spots.aa_bonus.pair_of_aces must be a positive integer, got -7",
    ),
    (
        "float multiplier",
        CLASSIC,
        _set(2.5, "spots", "ante", "flush"),
        "spots.ante.flush must be a positive integer, got 2.5",
    ),
    (
        "integral float multiplier",
        THP,
        _set(30.0, "spots", "plus", "pair_of_aces"),
        "spots.plus.pair_of_aces must be a positive integer, got 30.0",
    ),
    (
        "boolean multiplier",
        CLASSIC,
        _set(True, "spots", "call", "win"),
        "spots.call.win must be a positive integer, got True",
    ),
    (
        "text multiplier",
        CLASSIC,
        _set("3", "spots", "ante", "full_house"),
        "spots.ante.full_house must be a positive integer, got '3'",
    ),
    ("empty spot", CLASSIC, _set({}, "spots", "aa_bonus"), "spots.aa_bonus must map pay lines"),
    ("spot not a map", CLASSIC, _set([7], "spots", "aa_bonus"), "spots.aa_bonus must map pay"),
    ("missing ante", CLASSIC, _del("spots", "ante"), "casino_holdem needs spots"),
    ("missing call", CLASSIC, _del("spots", "call"), "casino_holdem needs spots"),
    ("missing turn bet", THP, _del("spots", "turn_bet"), "texas_holdem_plus needs spots"),
    (
        "spot of the other game",
        CLASSIC,
        _set({"pair_of_aces": 30}, "spots", "plus"),
        "casino_holdem needs spots",
    ),
    (
        "jackpot spot without section",
        PROGRESSIVE,
        _del("jackpot"),
        "a jackpot spot and a jackpot section go together",
    ),
    (
        "jackpot section without spot",
        PROGRESSIVE,
        _del("spots", "jackpot"),
        "a jackpot spot and a jackpot section go together",
    ),
    (
        "jackpot section incomplete",
        PROGRESSIVE,
        _del("jackpot", "seed"),
        "jackpot needs exactly stake, meter_share_percent, seed, meter_percent",
    ),
    (
        "jackpot share over 100",
        PROGRESSIVE,
        _set(101, "jackpot", "meter_share_percent"),
        "jackpot.meter_share_percent must be 0..100, got 101",
    ),
    (
        "jackpot meter line at odds",
        PROGRESSIVE,
        _set({"flush": 5}, "jackpot", "meter_percent"),
        "jackpot.meter_percent pays only royal_flush and straight_flush",
    ),
    (
        "jackpot meter line over 100%",
        PROGRESSIVE,
        _set({"royal_flush": 150}, "jackpot", "meter_percent"),
        "jackpot.meter_percent lines are at most 100",
    ),
    (
        "jackpot seed zero",
        PROGRESSIVE,
        _set(0, "jackpot", "seed"),
        "jackpot.seed must be a positive integer, got 0",
    ),
    (
        "jackpot stake outside its limits",
        PROGRESSIVE,
        _set(200, "jackpot", "stake"),
        "the jackpot's fixed stake is outside its limits",
    ),
    (
        "jackpot odds on a meter line",
        PROGRESSIVE,
        _set(1000, "spots", "jackpot", "royal_flush"),
        "spots.jackpot has unknown lines ['royal_flush']",
    ),
    (
        "min above max",
        CLASSIC,
        _set({"min": 500, "max": 100}, "limits", "ante"),
        "limits.ante: min 500 is above max 100",
    ),
    (
        "zero min",
        CLASSIC,
        _set({"min": 0, "max": 100}, "limits", "aa_bonus"),
        "limits.aa_bonus.min must be a positive integer, got 0",
    ),
    (
        "float limit",
        THP,
        _set({"min": 100, "max": 1e6}, "limits", "ante"),
        "limits.ante.max must be a positive integer, got 1000000.0",
    ),
    ("limit without max", CLASSIC, _set({"min": 100}, "limits", "ante"), "limits.ante needs min"),
    (
        "limit missing for a spot",
        CLASSIC,
        _del("limits", "aa_bonus"),
        "limits must cover exactly the spots players stake",
    ),
    (
        "limit for a play wager",
        CLASSIC,
        _set({"min": 200, "max": 2_000_000}, "limits", "call"),
        "limits must cover exactly the spots players stake",
    ),
    ("missing id", CLASSIC, _del("id"), "needs the fields"),
    ("missing limits", CLASSIC, _del("limits"), "needs the fields"),
    ("unknown field", CLASSIC, _set("x", "currency"), "needs the fields"),
    ("version zero", CLASSIC, _set(0, "version"), "version must be a positive integer, got 0"),
    ("version as text", CLASSIC, _set("1", "version"), "version must be a positive integer"),
    (
        "ante missing a category",
        CLASSIC,
        _del("spots", "ante", "high_card"),
        "a Casino Hold'em ante table must pay every hand; it lacks ['high_card']",
    ),
    (
        "ante of straight or better only",
        CLASSIC,
        _set(dict(THP_ANTE), "spots", "ante"),
        "it lacks ['three_of_a_kind', 'two_pair', 'pair', 'high_card']",
    ),
]


@pytest.mark.parametrize(
    ("start", "change", "message"),
    [case[1:] for case in BAD_DOCUMENTS],
    ids=[case[0] for case in BAD_DOCUMENTS],
)
def test_bad_documents_are_rejected_with_a_reason(
    start: str, change: Callable[[dict[str, Any]], object], message: str
) -> None:
    raw = _broken(start, change)
    with pytest.raises(PayTableError, match=re.escape(message)) as caught:
        parse_paytable(raw, "broken.json")
    assert str(caught.value).startswith("pay table broken.json: ")


def test_an_ante_table_that_pays_straight_or_better_only_is_fine_for_texas_holdem_plus() -> None:
    # The ante of Texas Hold'em Plus pushes below a straight: its lines are not complete.
    table = parse_paytable(_shipped(THP))
    assert set(table.spots[Spot.ANTE]) < set(CATEGORY_LINES)


def test_a_valid_document_needs_no_jackpot_and_no_side_bet() -> None:
    raw = _broken(CLASSIC, _del("spots", "aa_bonus"))
    del raw["limits"]["aa_bonus"]
    table = parse_paytable(raw)
    assert not table.offers(Spot.AA_BONUS)
    assert set(table.spots) == {Spot.ANTE, Spot.CALL}


def test_parsed_tables_are_read_only() -> None:
    table = load_paytable(CLASSIC)
    spots: Mapping[Spot, Mapping[str, int]] = table.spots
    with pytest.raises(TypeError):
        spots[Spot.ANTE]["royal_flush"] = 1000  # type: ignore[index]
    with pytest.raises(TypeError):
        table.spots[Spot.PLUS] = {}  # type: ignore[index]
