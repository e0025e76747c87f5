"""Casino Hold'em settlement, bet by bet (docs/rules.md, "Casino Hold'em" and "Pay tables").

Every case is a round written as card text. Unless a case says otherwise the player antes
100 and calls 200, so an ante paying m:1 returns 100 * (1 + m) and a winning call 400.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from holdem_rounds import by_bet, deal, play, wager

from holdem import (
    Action,
    Decision,
    MeterMovement,
    Outcome,
    PayTable,
    Settlement,
    SettlementError,
    Spot,
    Stage,
    Wager,
    load_paytable,
    settle,
)
from holdem.paytable import CATEGORY_LINES, parse_paytable

CLASSIC = load_paytable("casino-holdem/classic")
ROYAL_20 = load_paytable("casino-holdem/royal-20")
PROGRESSIVE = load_paytable("casino-holdem/progressive")
SEED = 5_000_000  # the progressive meter's seed

WIN, LOSE, PUSH, FOLD = Outcome.WIN, Outcome.LOSE, Outcome.PUSH, Outcome.FOLD


def call(ante: str = "a", bet_id: str = "c", amount: int = 200) -> Decision:
    return play(ante, Stage.FLOP, Action.CALL, bet_id, amount)


def fold(ante: str = "a") -> Decision:
    return play(ante, Stage.FLOP, Action.FOLD)


def one_hand(
    table: PayTable,
    player: str,
    dealer: str,
    board: str,
    *side: Spot,
    decisions: Sequence[Decision] = (call(),),
    meter: int | None = None,
) -> Settlement:
    """One player in box ``main``: ante ``a`` 100, side bets named by their spot, and a call."""
    wagers = [wager("a", Spot.ANTE), *(wager(str(spot), spot) for spot in side)]
    return settle(table, deal(player, dealer, board), wagers, decisions, meter)


def check_meter(movement: MeterMovement | None) -> MeterMovement:
    assert movement is not None
    m = movement
    assert m.before + m.contributed - m.awarded + m.reseeded == m.after
    assert min(m.contributed, m.awarded, m.reseeded) >= 0
    return m


# --- the showdown: ante and call ---------------------------------------------------------------

SHOWDOWNS = [
    # (player, dealer, board, ante (outcome, returned), call (outcome, returned))
    pytest.param(
        "Qc 4d", "Qs 3c", "9s 9h Qd 5c 2h", (PUSH, 100), (PUSH, 200),
        id="seed 000: Q-4 vs Q-3 on 9-9-Q-5-2, the board's five kicks for both: push",
    ),
    pytest.param(
        "Qc 7d", "Qs 4c", "9s 9h Qd 5c 2h", (WIN, 200), (WIN, 400),
        id="seed 000: Q-7 beats Q-4 on 9-9-Q-5-2",
    ),
    pytest.param(
        "Qs 3c", "Qc 7d", "9s 9h Qd 5c 2h", (LOSE, 0), (LOSE, 0),
        id="dealer Q-7 beats player Q-3: ante and call lose",
    ),
    pytest.param(
        "Kc Kd", "7h 2c", "As Jh 8d 5c 3s", (WIN, 200), (PUSH, 200),
        id="dealer ace high does not qualify: ante paid on the player's pair, call pushes",
    ),
    pytest.param(
        "Ac Jd", "3c 3d", "Kh 9d 7c 5s 2h", (WIN, 200), (PUSH, 200),
        id="dealer pair of threes beats ace high yet does not qualify: ante paid, call pushes",
    ),
    pytest.param(
        "Tc 8d", "Qc Jc", "3s 3h Kd 9c 7h", (WIN, 200), (PUSH, 200),
        id="dealer's pair of threes from the board does not qualify, though higher",
    ),
    pytest.param(
        "3c 2d", "4c 3h", "Ah Kd 9c 7s 5h", (WIN, 200), (PUSH, 200),
        id="both play the board, dealer does not qualify: ante paid on high card",
    ),
    pytest.param(
        "Ac Jd", "4c 4d", "Kh 9d 7c 5s 2h", (LOSE, 0), (LOSE, 0),
        id="dealer exactly a pair of fours qualifies and beats ace high",
    ),
    pytest.param(
        "Kc Qd", "4c 4d", "Kh 9d 7c 5s 2h", (WIN, 200), (WIN, 400),
        id="dealer exactly a pair of fours qualifies; player's kings win ante and call",
    ),
    pytest.param(
        "Ac Jd", "3c 2d", "Kh 9d 7c 3s 2h", (LOSE, 0), (LOSE, 0),
        id="dealer two pair of threes and twos qualifies",
    ),
    pytest.param(
        "Ac 3d", "Ad 8c", "As 9h 6c 4s 2d", (LOSE, 0), (LOSE, 0),
        id="same pair, dealer's higher kicker wins",
    ),
    pytest.param(
        "Jc 2d", "3c 4h", "As Ad Ks Kd Qh", (PUSH, 100), (PUSH, 200),
        id="board two pair with a queen kicker plays for both: the hole cards never count",
    ),
    pytest.param(
        "Ac Kd", "Qh 2d", "5c 6d 7h 8s 9c", (PUSH, 100), (PUSH, 200),
        id="board straight plays for both; a straight qualifies: push",
    ),
    pytest.param(
        "Tc 3d", "Qh 2d", "5c 6d 7h 8s 9c", (WIN, 200), (WIN, 400),
        id="player's ten makes a higher straight than the board's",
    ),
    pytest.param(
        "Ah 9h", "Tc Jd", "Kh 7h 2h Qs 9c", (WIN, 300), (WIN, 400),
        id="flush beats the dealer's straight: ante 2:1, call 1:1",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("player", "dealer", "board", "ante", "call_"), SHOWDOWNS)
def test_showdown(
    player: str,
    dealer: str,
    board: str,
    ante: tuple[Outcome, int],
    call_: tuple[Outcome, int],
) -> None:
    for table in (CLASSIC, ROYAL_20, PROGRESSIVE):
        settlement = one_hand(table, player, dealer, board)
        assert by_bet(settlement) == {"a": ante, "c": call_}


def test_hands_are_described_for_the_record() -> None:
    settlement = one_hand(CLASSIC, "Qc 7d", "Qs 4c", "9s 9h Qd 5c 2h")
    assert dict(settlement.hands) == {
        "dealer": "Two Pair, Queens and Nines, Five kicker",
        "main": "Two Pair, Queens and Nines, Seven kicker",
    }


def test_a_non_qualifying_dealer_is_named_on_the_call() -> None:
    settlement = one_hand(CLASSIC, "Ac Jd", "3c 3d", "Kh 9d 7c 5s 2h")
    ante, call_ = settlement.results
    assert (ante.line, call_.line) == ("high_card", "dealer_does_not_qualify")


# --- every ante line -------------------------------------------------------------------------

ANTE_LINES = [
    # (line, player, dealer, board, returned on classic and progressive, on royal-20, call)
    ("royal_flush", "As Ks", "4c 4d", "Qs Js Ts 7d 2h", 10_100, 2_100, (WIN, 400)),
    ("straight_flush", "9s 8s", "4c 4d", "7s 6s 5s Kd 2h", 2_100, 2_100, (WIN, 400)),
    ("four_of_a_kind", "9c 9d", "4c 4d", "9h 9s Kd 7c 2h", 1_100, 1_100, (WIN, 400)),
    ("full_house", "Kc Kh", "4c 4d", "Kd 7c 7h 2s 3d", 400, 400, (WIN, 400)),
    ("flush", "Ah 9h", "4c 4d", "Kh 7h 2h 8c 3d", 300, 300, (WIN, 400)),
    ("straight", "6c 5d", "4c 4d", "7h 8s 9d Kc 2h", 200, 200, (WIN, 400)),
    ("three_of_a_kind", "Qc Qd", "4c 4d", "Qh 8s 3d Kc 2h", 200, 200, (WIN, 400)),
    ("two_pair", "Kc 8d", "4c 4d", "Kh 8s 3d Jc 2h", 200, 200, (WIN, 400)),
    ("pair", "Kc 9d", "4c 4d", "Kh 8s 3d Jc 2h", 200, 200, (WIN, 400)),
    # A high card only beats a dealer who does not qualify, so its call pushes.
    ("high_card", "Ac Qd", "7c 5d", "Kh 8s 3d Jc 2h", 200, 200, (PUSH, 200)),
]


@pytest.mark.parametrize(
    ("line", "player", "dealer", "board", "classic", "royal_20", "call_"),
    ANTE_LINES,
    ids=[case[0] for case in ANTE_LINES],
)
def test_every_ante_line(
    line: str,
    player: str,
    dealer: str,
    board: str,
    classic: int,
    royal_20: int,
    call_: tuple[Outcome, int],
) -> None:
    for table, returned in ((CLASSIC, classic), (PROGRESSIVE, classic), (ROYAL_20, royal_20)):
        settlement = one_hand(table, player, dealer, board)
        assert by_bet(settlement) == {"a": (WIN, returned), "c": call_}
        assert settlement.results[0].line == line


# --- every AA bonus line ---------------------------------------------------------------------

AA_LINES = [
    # (case, player, board, line, returned on classic and progressive, on royal-20);
    # the dealer holds 4c 4d and the player calls.
    ("royal flush", "As Ks", "Qs Js Ts 7d 2h", "royal_flush", 10_100, 800),
    ("straight flush", "9s 8s", "7s 6s 5s Kd 2h", "straight_flush", 5_100, 800),
    ("four of a kind", "9c 9d", "9h 9s Kd 7c 2h", "four_of_a_kind", 4_100, 800),
    ("full house", "Kc Kh", "Kd 7c 7h 2s 3d", "full_house", 3_100, 800),
    ("flush", "Ah 9h", "Kh 7h 2h 8c 3d", "flush", 2_100, 800),
    ("straight", "6c 5d", "7h 8s 9d Kc 2h", "straight", 800, 800),
    ("three of a kind", "Qc Qd", "Qh 8s 3d Kc 2h", "three_of_a_kind", 800, 800),
    ("two pair without aces", "Kc 8d", "Kh 8s 3d Jc 2h", "two_pair", 800, 800),
    ("two pair of threes and twos", "3c 2d", "3h 2s 9d Jc Kh", "two_pair", 800, 800),
    ("two pair with aces", "Ac 8d", "Ah 8s 3d Jc 2h", "two_pair", 800, 800),
    ("pair of aces", "Ac Kd", "Ah 8s 3d Jc 2h", "pair_of_aces", 800, 800),
    ("pair of aces on the flop", "7c 8d", "Ah As 3d Jc 2h", "pair_of_aces", 800, 800),
    ("a fourth nine on the turn leaves trips", "9c 9d", "9h Kd 7c 9s 2h", "three_of_a_kind",
     800, 800),
    ("pair of kings loses", "Kc Qd", "Kh 8s 3d Jc 2h", None, 0, 0),
    ("ace high loses", "Ac Kd", "Qh 8s 3d Jc 2h", None, 0, 0),
    ("an ace on the turn does not count", "Ac Kd", "Qh 8s 3d Ah 2c", None, 0, 0),
    ("an ace on the river does not count", "Ac Kd", "Qh 8s 3d 2c Ad", None, 0, 0),
    ("a flush made on the turn and river does not count", "Ah 9h", "Kh 7h 2c 3h 8h", None,
     0, 0),
]  # fmt: skip


@pytest.mark.parametrize(
    ("player", "board", "line", "classic", "royal_20"),
    [case[1:] for case in AA_LINES],
    ids=[case[0] for case in AA_LINES],
)
def test_every_aa_bonus_line(
    player: str, board: str, line: str | None, classic: int, royal_20: int
) -> None:
    for table, returned in ((CLASSIC, classic), (PROGRESSIVE, classic), (ROYAL_20, royal_20)):
        settlement = one_hand(table, player, "4c 4d", board, Spot.AA_BONUS)
        aa = next(r for r in settlement.results if r.spot is Spot.AA_BONUS)
        assert (aa.outcome, aa.returned, aa.line) == (WIN if returned else LOSE, returned, line)
        assert aa.stake == 100


# --- folds -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "decisions", [[fold()], []], ids=["folded", "no decision by the end of the round"]
)
def test_a_fold_forfeits_the_ante_and_side_bets_that_would_have_won(
    decisions: list[Decision],
) -> None:
    # Four aces in hole + flop: the AA bonus would pay 40:1, the jackpot 500:1.
    settlement = one_hand(
        PROGRESSIVE,
        "As Ad",
        "4c 4d",
        "Ac Ah Kd 7c 2h",
        Spot.AA_BONUS,
        Spot.JACKPOT,
        decisions=decisions,
        meter=SEED,
    )
    assert by_bet(settlement) == {"a": (FOLD, 0), "aa_bonus": (FOLD, 0), "jackpot": (FOLD, 0)}
    assert all(r.line is None for r in settlement.results)
    # The forfeited jackpot stake still feeds the meter; nothing is awarded.
    assert check_meter(settlement.meter) == MeterMovement(SEED, 20, 0, 0, SEED + 20)


def test_a_fold_loses_even_against_a_dealer_who_does_not_qualify() -> None:
    settlement = one_hand(CLASSIC, "Kc Kd", "7h 2c", "As Jh 8d 5c 3s", decisions=[fold()])
    assert by_bet(settlement) == {"a": (FOLD, 0)}


# --- the progressive jackpot -----------------------------------------------------------------

JACKPOT_FIXED_LINES = [
    # (case, player, board, line, returned); dealer 4c 4d, player calls, meter at the seed
    ("four of a kind 500:1", "9c 9d", "9h 9s Kd 7c 2h", "four_of_a_kind", 50_100),
    ("full house 100:1", "Kc Kh", "Kd 7c 7h 2s 3d", "full_house", 10_100),
    ("flush 50:1", "Ah 9h", "Kh 7h 2h 8c 3d", "flush", 5_100),
    ("straight loses", "6c 5d", "7h 8s 9d Kc 2h", None, 0),
    ("three of a kind loses", "Qc Qd", "Qh 8s 3d Kc 2h", None, 0),
    ("two pair loses", "Kc 8d", "Kh 8s 3d Jc 2h", None, 0),
    ("pair of aces loses", "Ac Kd", "Ah 8s 3d Jc 2h", None, 0),
    ("high card loses", "Ac Kd", "Qh 8s 3d Jc 2h", None, 0),
    ("a flush made on the turn and river does not count", "Ah 9h", "Kh 7h 2c 3h 8h", None, 0),
]


@pytest.mark.parametrize(
    ("player", "board", "line", "returned"),
    [case[1:] for case in JACKPOT_FIXED_LINES],
    ids=[case[0] for case in JACKPOT_FIXED_LINES],
)
def test_every_fixed_odds_jackpot_line(
    player: str, board: str, line: str | None, returned: int
) -> None:
    settlement = one_hand(PROGRESSIVE, player, "4c 4d", board, Spot.JACKPOT, meter=SEED)
    jackpot = settlement.results[1]
    assert jackpot.spot is Spot.JACKPOT
    assert (jackpot.outcome, jackpot.returned, jackpot.line) == (
        WIN if returned else LOSE,
        returned,
        line,
    )
    # Fixed odds are paid by the house, not from the meter.
    assert check_meter(settlement.meter) == MeterMovement(SEED, 20, 0, 0, SEED + 20)


@pytest.mark.parametrize(
    ("player", "board", "meter", "line", "returned", "movement"),
    [
        pytest.param(
            "As Ks", "Qs Js Ts 7d 2h", SEED, "royal_flush", 100 + SEED + 20,
            MeterMovement(SEED, 20, SEED + 20, SEED, SEED),
            id="royal flush takes 100% of the meter, which reseeds",
        ),
        pytest.param(
            "As Ks", "Qs Js Ts 7d 2h", 12_345_678, "royal_flush", 100 + 12_345_698,
            MeterMovement(12_345_678, 20, 12_345_698, SEED, SEED),
            id="royal flush on a grown meter",
        ),
        pytest.param(
            "9s 8s", "7s 6s 5s Kd 2h", 8_000_000, "straight_flush", 100 + 800_002,
            MeterMovement(8_000_000, 20, 800_002, 0, 7_200_018),
            id="straight flush takes 10% of the meter",
        ),
        pytest.param(
            "9s 8s", "7s 6s 5s Kd 2h", SEED, "straight_flush", 100 + 500_002,
            MeterMovement(SEED, 20, 500_002, 499_982, SEED),
            id="a straight flush that leaves the meter below its seed tops it up",
        ),
    ],
)  # fmt: skip
def test_meter_lines(
    player: str, board: str, meter: int, line: str, returned: int, movement: MeterMovement
) -> None:
    settlement = one_hand(PROGRESSIVE, player, "4c 4d", board, Spot.JACKPOT, meter=meter)
    jackpot = settlement.results[1]
    assert (jackpot.outcome, jackpot.returned, jackpot.line) == (WIN, returned, line)
    assert check_meter(settlement.meter) == movement


def _shared(players: int, *, folded: int = 0) -> tuple[list[Wager], list[Decision]]:
    """``players`` players on box ``main``, each with an ante and a jackpot wager; the last
    ``folded`` of them fold."""
    wagers = [
        w
        for i in range(players)
        for w in (
            wager(f"a{i}", Spot.ANTE, player=f"p{i}"),
            wager(f"j{i}", Spot.JACKPOT, player=f"p{i}"),
        )
    ]
    decisions = [
        call(f"a{i}", f"c{i}") if i < players - folded else fold(f"a{i}") for i in range(players)
    ]
    return wagers, decisions


def test_a_shared_royal_flush_splits_the_meter_equally_and_the_remainder_stays() -> None:
    wagers, decisions = _shared(4, folded=1)
    round_ = deal("As Ks", "4c 4d", "Qs Js Ts 7d 2h")
    settlement = settle(PROGRESSIVE, round_, wagers, decisions, SEED)
    # Four jackpot stakes feed 80; three callers split 5,000,080: 1,666,693 each, 1 left.
    share = 1_666_693
    jackpots = {
        r.bet_id: (r.outcome, r.returned) for r in settlement.results if r.spot is Spot.JACKPOT
    }
    assert jackpots == {"j0": (WIN, 100 + share), "j1": (WIN, 100 + share),
                        "j2": (WIN, 100 + share), "j3": (FOLD, 0)}  # fmt: skip
    assert check_meter(settlement.meter) == MeterMovement(SEED, 80, 3 * share, SEED - 1, SEED)


def test_a_shared_straight_flush_splits_its_10_percent_and_the_remainder_stays() -> None:
    wagers, decisions = _shared(3)
    round_ = deal("9s 8s", "4c 4d", "7s 6s 5s Kd 2h")
    settlement = settle(PROGRESSIVE, round_, wagers, decisions, 8_000_000)
    # 10% of 8,000,060 is 800,006: 266,668 each and 2 stay on the meter.
    returned = [r.returned for r in settlement.results if r.spot is Spot.JACKPOT]
    assert returned == [100 + 266_668] * 3
    assert check_meter(settlement.meter) == MeterMovement(
        8_000_000, 60, 800_004, 0, 8_000_060 - 800_004
    )


def test_a_straight_flush_in_the_round_of_a_royal_flush_is_paid_from_the_reseeded_meter() -> None:
    wagers = [
        wager("a1", Spot.ANTE, player="p1", box="b1"),
        wager("j1", Spot.JACKPOT, player="p1", box="b1"),
        wager("a2", Spot.ANTE, player="p2", box="b2"),
        wager("j2", Spot.JACKPOT, player="p2", box="b2"),
    ]
    decisions = [call("a1", "c1"), call("a2", "c2")]
    round_ = deal({"b1": "As Ks", "b2": "9s 8s"}, "4c 4d", "Qs Js Ts 7d 2h")
    settlement = settle(PROGRESSIVE, round_, wagers, decisions, SEED)
    results = by_bet(settlement)
    assert results["j1"] == (WIN, 100 + SEED + 40)
    assert results["j2"] == (WIN, 100 + SEED // 10)
    assert check_meter(settlement.meter) == MeterMovement(
        SEED, 40, SEED + 40 + SEED // 10, SEED + SEED // 10, SEED
    )


def test_the_contribution_is_a_share_of_the_round_s_jackpot_stakes_rounded_down() -> None:
    raw = {
        "id": "casino-holdem/odd-jackpot",
        "version": 1,
        "game": "casino_holdem",
        "title": "a jackpot whose contribution does not divide evenly",
        "sources": [],
        "spots": {"ante": dict.fromkeys(CATEGORY_LINES, 1), "call": {"win": 1},
                  "jackpot": {"flush": 50}},
        "jackpot": {"stake": 150, "meter_share_percent": 15, "seed": 1_000,
                    "meter_percent": {"royal_flush": 100}},
        "limits": {"ante": {"min": 100, "max": 1_000}, "jackpot": {"min": 150, "max": 150}},
    }  # fmt: skip
    table = parse_paytable(raw)
    round_ = deal("7c 2d", "4c 4d", "Kh 8s 3d Jc 9h")
    one = [wager("a", Spot.ANTE), wager("j", Spot.JACKPOT, 150)]
    two = [*one, wager("a2", Spot.ANTE, player="p2"), wager("j2", Spot.JACKPOT, 150, "p2")]
    # 15% of 150 is 22.5: 22; of 300 it is 45, rounded once over the round's stakes.
    assert check_meter(settle(table, round_, one, [], 1_000).meter).contributed == 22
    assert check_meter(settle(table, round_, two, [], 1_000).meter).contributed == 45


def test_a_round_without_jackpot_wagers_needs_no_meter() -> None:
    settlement = one_hand(PROGRESSIVE, "Kc 9d", "4c 4d", "Kh 8s 3d Jc 2h", Spot.AA_BONUS)
    assert settlement.meter is None
    moved = one_hand(PROGRESSIVE, "Kc 9d", "4c 4d", "Kh 8s 3d Jc 2h", meter=SEED)
    assert moved.meter == MeterMovement(SEED, 0, 0, 0, SEED)


def test_jackpot_wagers_need_the_meter_and_a_table_that_offers_it() -> None:
    with pytest.raises(SettlementError, match="needs the meter"):
        one_hand(PROGRESSIVE, "Kc 9d", "4c 4d", "Kh 8s 3d Jc 2h", Spot.JACKPOT)
    with pytest.raises(SettlementError, match="has no jackpot"):
        one_hand(CLASSIC, "Kc 9d", "4c 4d", "Kh 8s 3d Jc 2h", Spot.JACKPOT, meter=SEED)


# --- many players, many boxes ----------------------------------------------------------------


def test_a_shared_hand_settles_each_player_s_own_bets() -> None:
    # Box "main" holds K-K: trips with the flop's king. Dealer pair of fours qualifies.
    wagers = [
        wager("a1", Spot.ANTE, 100, "p1"),
        wager("aa1", Spot.AA_BONUS, 100, "p1"),
        wager("a2", Spot.ANTE, 500, "p2"),
        wager("aa2", Spot.AA_BONUS, 200, "p2"),
        wager("a3", Spot.ANTE, 1_000, "p3"),
        wager("a4", Spot.ANTE, 250, "p4"),
        wager("aa4", Spot.AA_BONUS, 300, "p4"),
    ]
    decisions = [call("a1", "c1", 200), fold("a2"), call("a4", "c4", 500)]  # p3 times out
    settlement = settle(CLASSIC, deal("Kc Kd", "4c 4d", "Kh 8s 3d Jc 2h"), wagers, decisions)
    assert by_bet(settlement) == {
        "a1": (WIN, 200), "aa1": (WIN, 800), "c1": (WIN, 400),
        "a2": (FOLD, 0), "aa2": (FOLD, 0),
        "a3": (FOLD, 0),
        "a4": (WIN, 500), "aa4": (WIN, 2_400), "c4": (WIN, 1_000),
    }  # fmt: skip
    players = {r.bet_id: r.player for r in settlement.results}
    assert players == {"a1": "p1", "aa1": "p1", "c1": "p1", "a2": "p2", "aa2": "p2",
                       "a3": "p3", "a4": "p4", "aa4": "p4", "c4": "p4"}  # fmt: skip
    assert settlement.staked == 100 + 100 + 500 + 200 + 1_000 + 250 + 300 + 200 + 500
    assert settlement.returned == 200 + 800 + 400 + 500 + 2_400 + 1_000


def test_several_boxes_with_their_own_hole_cards() -> None:
    boxes = {"b1": "Kc Kd", "b2": "Qc Qd", "b3": "Ac 5d", "b4": "4h 4s"}
    wagers = [wager(f"a{b}", Spot.ANTE, player=f"p{b}", box=f"b{b}") for b in range(1, 5)]
    decisions = [call(f"a{b}", f"c{b}") for b in range(1, 5)]
    settlement = settle(CLASSIC, deal(boxes, "4c 4d", "Kh 8s 3d Jc 2h"), wagers, decisions)
    assert by_bet(settlement) == {
        "a1": (WIN, 200), "c1": (WIN, 400),  # trips
        "a2": (WIN, 200), "c2": (WIN, 400),  # queens beat fours
        "a3": (LOSE, 0), "c3": (LOSE, 0),  # ace high
        "a4": (PUSH, 100), "c4": (PUSH, 200),  # the same fours, the same board kickers
    }  # fmt: skip
    assert {r.bet_id: r.box for r in settlement.results} == {
        f"{kind}{b}": f"b{b}" for b in range(1, 5) for kind in "ac"
    }


def test_the_call_is_recorded_as_its_own_wager_on_spot_call() -> None:
    settlement = one_hand(CLASSIC, "Kc 9d", "4c 4d", "Kh 8s 3d Jc 2h", Spot.AA_BONUS)
    assert [r.bet_id for r in settlement.results] == ["a", "aa_bonus", "c"]
    call_ = settlement.results[-1]
    assert call_.spot is Spot.CALL
    assert str(call_.spot) == "call"
    assert (call_.player, call_.box, call_.stake) == ("p1", "main", 200)


# --- rounds that cannot be settled -----------------------------------------------------------


@pytest.mark.parametrize(
    ("wagers", "decisions", "message"),
    [
        ([wager("aa", Spot.AA_BONUS)], [], "has no ante"),
        ([wager("a", Spot.ANTE, box="b9")], [], "no hand on its box"),
        ([wager("a", Spot.ANTE)], [call("x")], "has no ante 'x'"),
        ([wager("a", Spot.ANTE)], [Decision("a", Stage.FLOP, Action.CALL)], "has no ante"),
    ],
    ids=["side bet without ante", "box not dealt", "call for an unknown ante", "call no id"],
)
def test_inconsistent_rounds_are_refused(
    wagers: list[Wager], decisions: list[Decision], message: str
) -> None:
    with pytest.raises(SettlementError, match=message):
        settle(CLASSIC, deal("Kc 9d", "4c 4d", "Kh 8s 3d Jc 2h"), wagers, decisions)


@pytest.mark.parametrize(
    ("wagers", "decisions"),
    [
        ([wager("a", Spot.ANTE), wager("x", Spot.AA_BONUS)], [call(bet_id="x")]),
        ([wager("a", Spot.ANTE), wager("a", Spot.AA_BONUS)], [call()]),
        ([wager("a", Spot.ANTE), wager("a2", Spot.ANTE, player="p2")], [call(), call("a2")]),
    ],
    ids=["call reuses a side bet's id", "side bet reuses the ante's id", "two calls, one id"],
)
def test_repeated_bet_ids_are_refused(wagers: list[Wager], decisions: list[Decision]) -> None:
    # Results are keyed by bet id: a repeat would drop one bet and count another twice.
    with pytest.raises(SettlementError, match="bet ids must be distinct; repeated: "):
        settle(CLASSIC, deal("Kc Kd", "4c 4d", "Kh 8s 3d Jc 2h"), wagers, decisions)


@pytest.mark.parametrize(
    ("player", "dealer", "board", "message"),
    [
        ("Kc 9d", "4c 4d", "Kh 8s 3d Jc", "five board cards"),
        ("Kc 9d", "4c 4d", "Kh 8s 3d Jc 2h 2c", "five board cards"),
        ("Kc 9d", "4c Kc", "Kh 8s 3d Jc 2h", "distinct"),
        ("Kc 9d", "4c 4d", "Kh 8s 4d Jc 2h", "distinct"),
    ],
    ids=["four board cards", "six board cards", "dealer holds a player card", "board repeat"],
)
def test_bad_deals_are_refused(player: str, dealer: str, board: str, message: str) -> None:
    with pytest.raises(SettlementError, match=message):
        settle(CLASSIC, deal(player, dealer, board), [wager("a", Spot.ANTE)], [call()])
