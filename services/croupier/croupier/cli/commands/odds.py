"""``croupier odds``: exact EVs of a decision the player faces, and the outcome counts."""

from __future__ import annotations

import argparse
from fractions import Fraction
from typing import Any

from croupier.cli.console import add_json_argument, paytable_id, print_json
from croupier.errors import CommandError
from holdem.cards import CardError, card_text
from holdem.evaluator import Category
from holdem.odds.par import ParDataError, texas_holdem_plus_preflop
from holdem.odds.situation import (
    CasinoHoldemFlopOdds,
    ThpDecisionOdds,
    casino_holdem_flop,
    texas_holdem_plus_flop,
    texas_holdem_plus_turn,
)
from holdem.paytable import Game, PayTableError, load_paytable


def register(subparsers: Any) -> None:
    """Add the ``odds`` sub-command."""
    parser = subparsers.add_parser(
        "odds",
        description=(
            "Casino Hold'em: give --player and --flop (the call/fold decision). Texas Hold'em "
            "Plus: --player alone (preflop, from the stored PAR data), with --flop (flop), or "
            "with --flop and --turn (turn; --flop-bet if a flop bet was made)."
        ),
    )
    parser.add_argument(
        "--paytable",
        required=True,
        type=paytable_id,
        help="pay table id, e.g. casino-holdem/classic",
    )
    parser.add_argument(
        "--paytable-version", dest="version", type=int, help="pay table version (default: newest)"
    )
    parser.add_argument("--player", required=True, help="hole cards, e.g. AsKd")
    parser.add_argument("--flop", help="flop cards, e.g. Qh7c2s")
    parser.add_argument("--turn", help="turn card (Texas Hold'em Plus)")
    parser.add_argument("--flop-bet", action="store_true", help="a flop bet was made")
    add_json_argument(parser)
    parser.set_defaults(run=run)


def _ev(x: Fraction) -> dict[str, Any]:
    return {"exact": str(x), "antes": float(x)}


def _by_category(counts: tuple[int, ...]) -> dict[str, int]:
    return {Category(i).name.lower(): n for i, n in enumerate(counts) if n}


def _ch(odds: CasinoHoldemFlopOdds) -> dict[str, Any]:
    return {
        "decision": "flop",
        "hole": "".join(card_text(c) for c in odds.hole),
        "flop": "".join(card_text(c) for c in odds.flop),
        "ev": {a: _ev(v) for a, v in odds.ev.items()},
        "best": odds.best,
        "completions": odds.completions,
        "counts": {
            "dealer_does_not_qualify": _by_category(odds.dealer_does_not_qualify),
            "win": _by_category(odds.wins),
            "tie": odds.ties,
            "loss": odds.losses,
        },
    }


def _thp(odds: ThpDecisionOdds) -> dict[str, Any]:
    out: dict[str, Any] = {
        "decision": odds.stage,
        "ev": {a: _ev(v) for a, v in odds.ev.items()},
        "best": odds.best,
    }
    if odds.completions:
        out["completions"] = odds.completions
        out["counts"] = {"win": _by_category(odds.wins), "tie": odds.ties, "loss": odds.losses}
    return out


def _text(doc: dict[str, Any]) -> str:
    lines = [f"Decision: {doc['decision']}   best: {doc['best']}"]
    for action, ev in doc["ev"].items():
        lines.append(f"  EV({action}) = {ev['antes']:+.6f} antes  ({ev['exact']})")
    if "counts" in doc:
        total = doc["completions"]
        lines.append(f"Outcomes over {total:,} completions:")
        for name, value in doc["counts"].items():
            if isinstance(value, dict):
                for category, n in value.items():
                    lines.append(f"  {name:<24} {category:<16} {n:>10,}  {n / total:9.4%}")
            else:
                lines.append(f"  {name:<24} {'':<16} {value:>10,}  {value / total:9.4%}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Print the odds of one situation."""
    try:
        table = load_paytable(args.paytable, args.version)
        if table.game is Game.CASINO_HOLDEM:
            if not args.flop or args.turn:
                raise CommandError(
                    "Casino Hold'em decides at the flop", "give --flop, and no --turn"
                )
            doc = _ch(casino_holdem_flop(table, args.player, args.flop))
        elif args.turn:
            if not args.flop:
                raise CommandError("--turn needs --flop", "give the flop too")
            doc = _thp(
                texas_holdem_plus_turn(table, args.player, args.flop, args.turn, args.flop_bet)
            )
        elif args.flop:
            doc = _thp(texas_holdem_plus_flop(table, args.player, args.flop))
        else:
            doc = _thp(texas_holdem_plus_preflop(table, args.player))
    except (PayTableError, ParDataError, CardError) as error:
        raise CommandError(str(error), "check the cards and the pay table") from None
    doc = {"paytable": table.id, "version": table.version} | doc
    if args.json:
        print_json(doc)
    else:
        print(_text(doc))
    return 0
