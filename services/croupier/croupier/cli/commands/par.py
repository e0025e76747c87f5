"""``croupier par``: the PAR sheet of a pay table, from stored data; or recompute them all."""

from __future__ import annotations

import argparse
from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import Any

from croupier.cli.console import add_json_argument, bounded_int, paytable_id, print_json
from croupier.cli.progress import Progress
from croupier.errors import CommandError
from holdem.integrity.constants import (
    compute_constants,
    constants_directory,
    constants_file_name,
    dump_constants,
)
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
        description="Print the stored PAR sheet of a pay table, or recompute and store them.",
    )
    parser.add_argument(
        "paytable", nargs="?", type=paytable_id, help="pay table id, e.g. casino-holdem/classic"
    )
    parser.add_argument(
        "--paytable-version", dest="version", type=int, help="pay table version (default: newest)"
    )
    add_json_argument(parser)
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
    parser.add_argument(
        "--processes",
        type=bounded_int(1, 256),
        help="worker processes for --write (default: up to 2, one per core)",
    )
    parser.set_defaults(run=run)


def _write(tables: list[PayTable], args: argparse.Namespace) -> None:
    args.docs.mkdir(parents=True, exist_ok=True)
    for game in Game:
        chosen = [t for t in tables if t.game is game]
        if not chosen:
            continue
        with Progress(f"par {game}", "flops") as meter:

            def progress(done: int, total: int, meter: Progress = meter) -> None:
                meter.total = total
                meter.advance(done - meter.done)

            sheets = compute_par(chosen, processes=args.processes, progress=progress)
        print(f"{game}: computed {', '.join(t.id for t in chosen)}", flush=True)
        for table, sheet in zip(chosen, sheets, strict=True):
            (par_directory() / par_file_name(table)).write_text(dump_par(sheet), encoding="utf-8")
            name = table.id.replace("/", "--") + ".md"
            markdown = render_markdown(par_tables(sheet), par_heading(sheet), par_intro(sheet))
            (args.docs / name).write_text(markdown, encoding="utf-8")
            print(f"  {table.id} v{table.version}: RTP {float(sheet.base.rtp()) * 100:.4f}%")
        with Progress(f"deal constants {game}", "flops") as meter:

            def step(done: int, total: int, meter: Progress = meter) -> None:
                meter.total = total
                meter.advance(done - meter.done)

            deal = compute_constants(chosen, step)
        for table, constants in zip(chosen, deal, strict=True):
            path = constants_directory() / constants_file_name(table)
            path.write_text(dump_constants(constants), encoding="utf-8")
            mean, variance = float(constants.mean[0]), float(constants.covariance[0][0])
            print(f"  {table.id}: deal value mean {mean:+.6f}, variance {variance:.6f} antes^2")


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
            raise CommandError(
                "no pay table named", "name one (e.g. casino-holdem/classic) or --all"
            )
        if args.write:
            _write(tables, args)
            return 0
        sheets = [_at_meter(load_par(t), t, args.meter) for t in tables]
    except (PayTableError, ParDataError) as error:
        raise CommandError(
            str(error),
            "check the pay table and --paytable-version; `make par` recomputes the sheets",
        ) from None
    if args.json:
        docs = [sheet.to_json() | {"figures": par_figures(sheet)} for sheet in sheets]
        print_json(docs if args.all else docs[0])
    else:
        for sheet in sheets:
            print(render_text(par_tables(sheet), par_heading(sheet)))
    return 0
