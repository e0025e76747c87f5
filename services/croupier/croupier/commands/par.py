"""``croupier par``: the PAR sheet of a pay table, from stored data; or recompute them all."""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import Any

from holdem.odds.par import (
    ParDataError,
    compute_par,
    dump_par,
    load_par,
    par_directory,
    par_file_name,
)
from holdem.odds.report import (
    par_figures,
    par_heading,
    par_intro,
    par_tables,
    render_markdown,
    render_text,
)
from holdem.odds.sheet import ParSheet
from holdem.paytable import Game, PayTable, PayTableError, load_paytable, paytable_ids

DOCS = Path("docs/par")


def register(subparsers: Any) -> None:
    """Add the ``par`` sub-command."""
    parser = subparsers.add_parser(
        "par",
        help="print a pay table's PAR sheet (exact RTP, house edge, outcome table)",
        description="Print the stored PAR sheet of a pay table, or recompute and store them.",
    )
    parser.add_argument("paytable", nargs="?", help="pay table id, e.g. casino-holdem/classic")
    parser.add_argument("--version", type=int, help="pay table version (default: newest)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--all", action="store_true", help="every pay table")
    parser.add_argument(
        "--write",
        action="store_true",
        help="recompute by full enumeration and store the PAR data and Markdown sheets",
    )
    parser.add_argument("--docs", type=Path, default=DOCS, help="where Markdown sheets go")
    parser.add_argument(
        "--meter",
        type=int,
        help="jackpot meter before the round, in minor units (default: the pay table's seed)",
    )
    parser.add_argument("--processes", type=int, default=None, help="worker processes")
    parser.set_defaults(run=run)


def _write(tables: list[PayTable], args: argparse.Namespace) -> None:
    args.docs.mkdir(parents=True, exist_ok=True)
    for game in Game:
        chosen = [t for t in tables if t.game is game]
        if not chosen:
            continue
        started = time.perf_counter()

        def progress(done: int, total: int, game: Game = game) -> None:
            if done % 100 == 0 or done == total:
                print(f"  {game}: {done}/{total} flops", file=sys.stderr, flush=True)

        sheets = compute_par(chosen, processes=args.processes, progress=progress)
        elapsed = time.perf_counter() - started
        ids = ", ".join(t.id for t in chosen)
        print(f"{game}: computed {ids} in {elapsed:.1f} s", flush=True)
        for table, sheet in zip(chosen, sheets, strict=True):
            (par_directory() / par_file_name(table)).write_text(dump_par(sheet), encoding="utf-8")
            name = table.id.replace("/", "--") + ".md"
            markdown = render_markdown(par_tables(sheet), par_heading(sheet), par_intro(sheet))
            (args.docs / name).write_text(markdown, encoding="utf-8")
            print(f"  {table.id} v{table.version}: RTP {float(sheet.base.rtp()) * 100:.4f}%")


def _at_meter(sheet: ParSheet, table: PayTable, meter: int | None) -> ParSheet:
    """Quote the jackpot at ``meter`` plus the round's own contribution, in stakes."""
    jackpot = table.jackpot
    if meter is None or jackpot is None:
        return sheet
    level = Fraction(meter + jackpot.contribution(jackpot.stake), jackpot.stake)
    return replace(sheet, jackpot_meter=level)


def run(args: argparse.Namespace) -> int:
    """Print or recompute PAR sheets."""
    try:
        if args.all:
            tables = [load_paytable(i) for i in paytable_ids()]
        elif args.paytable:
            tables = [load_paytable(args.paytable, args.version)]
        else:
            print("croupier par: name a pay table, or --all", file=sys.stderr)
            return 2
        if args.write:
            _write(tables, args)
            return 0
        sheets = [_at_meter(load_par(t), t, args.meter) for t in tables]
    except (PayTableError, ParDataError) as error:
        print(f"croupier par: {error}", file=sys.stderr)
        return 1
    if args.json:
        docs = [sheet.to_json() | {"figures": par_figures(sheet)} for sheet in sheets]
        print(json.dumps(docs if args.all else docs[0], indent=1))
    else:
        for sheet in sheets:
            print(render_text(par_tables(sheet), par_heading(sheet)))
    return 0
