"""PAR sheets and situation odds as text tables, Markdown, and JSON-ready figures."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from holdem.odds.sheet import BetSheet, ParSheet, percent

Row = Sequence[str]


@dataclass(frozen=True)
class Table:
    """A titled table of text cells."""

    title: str
    header: Row
    rows: Sequence[Row]


def _num(x: Fraction, places: int = 6) -> str:
    return f"{float(x):.{places}f}"


def bet_figures(bet: BetSheet, meter: Fraction = Fraction(0)) -> dict[str, Any]:
    """The headline figures of one wager, exact where they can be (``"num/den"`` strings)."""
    return {
        "rtp": str(bet.rtp(meter)),
        "rtp_percent": float(bet.rtp(meter) * 100),
        "house_edge": str(bet.house_edge(meter)),
        "house_edge_percent": float(bet.house_edge(meter) * 100),
        "element_of_risk": str(bet.element_of_risk(meter)),
        "average_stake": str(bet.average_stake),
        "hit_frequency": str(bet.hit_frequency()),
        "std_dev": bet.std_dev(meter),
        **({"break_even_meter": str(bet.break_even_meter())} if bet.break_even_meter() else {}),
    }


def par_figures(sheet: ParSheet) -> dict[str, Any]:
    """The PAR sheet's derived figures, for ``--json``."""
    meter = sheet.jackpot_meter or Fraction(0)
    return {
        "base": bet_figures(sheet.base),
        "decisions": {
            d.stage: {a: str(d.probability(a)) for a in d.counts} for d in sheet.decisions
        },
        "side_bets": [
            {"name": s.name, "basis": s.basis, **bet_figures(s, meter)} for s in sheet.side_bets
        ],
        **({"jackpot_meter_in_stakes": str(meter)} if sheet.jackpot_meter is not None else {}),
    }


def _summary(bet: BetSheet, meter: Fraction, unit: str) -> list[Row]:
    even = bet.break_even_meter()
    extra: list[Row] = [] if even is None else [("Meter for 100% RTP (stakes)", _num(even, 2))]
    return [
        ("RTP", percent(bet.rtp(meter))),
        (f"House edge (per {unit})", percent(bet.house_edge(meter))),
        ("Element of risk", percent(bet.element_of_risk(meter))),
        (f"Average total stake ({unit}s)", _num(bet.average_stake)),
        ("Hit frequency", percent(bet.hit_frequency())),
        (f"Standard deviation ({unit}s)", f"{bet.std_dev(meter):.6f}"),
        *extra,
    ]


def _lines(bet: BetSheet, meter: Fraction) -> list[Row]:
    rows: list[Row] = []
    for line in bet.lines:
        net = str(line.net)
        if line.meter_percent:
            net = f"{line.meter_percent}% of meter ({_num(line.meter_percent * meter / 100, 2)})"
        p = bet.probability(line)
        rows.append(
            (
                line.name,
                net,
                str(line.stake),
                f"{float(p):.10f}",
                str(line.count),
                _num(p * (line.net + Fraction(line.meter_percent, 100) * meter)),
            )
        )
    return rows


_LINE_HEADER = ("outcome", "net win", "staked", "probability", "count", "contribution")


def par_tables(sheet: ParSheet) -> list[Table]:
    """The PAR sheet as tables: summary, decisions, outcomes, then each side bet."""
    meter = sheet.jackpot_meter or Fraction(0)
    base = sheet.base
    tables = [
        Table(
            "Base game, best strategy (per ante)",
            ("figure", "value"),
            _summary(base, Fraction(0), "ante"),
        )
    ]
    decision_rows: list[Row] = []
    for d in sheet.decisions:
        reached = Fraction(d.reached, d.total)
        for action, count in d.counts.items():
            decision_rows.append(
                (d.stage, action, percent(d.probability(action)), percent(reached), str(count))
            )
    tables.append(
        Table(
            "Decisions (best strategy)",
            ("decision", "action", "probability when reached", "reached", "count"),
            decision_rows,
        )
    )
    tables.append(
        Table(
            f"Final outcomes (denominator {base.denominator})",
            _LINE_HEADER,
            _lines(base, Fraction(0)),
        )
    )
    for side in sheet.side_bets:
        at = (
            f", meter at {_num(meter, 2)} stakes"
            if any(ln.meter_percent for ln in side.lines)
            else ""
        )
        tables.append(
            Table(
                f"Side bet {side.name} ({side.basis}{at})",
                ("figure", "value"),
                _summary(side, meter, "stake"),
            )
        )
        tables.append(
            Table(
                f"Side bet {side.name} ({side.basis}) outcomes (denominator {side.denominator})",
                _LINE_HEADER,
                _lines(side, meter),
            )
        )
    return tables


def render_text(tables: Sequence[Table], heading: str = "") -> str:
    """Tables as aligned plain text."""
    out = [heading, ""] if heading else []
    for table in tables:
        widths = [len(h) for h in table.header]
        for row in table.rows:
            widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
        out.append(table.title)
        out.append(
            "  ".join(h.ljust(w) for h, w in zip(table.header, widths, strict=True)).rstrip()
        )
        out.append("  ".join("-" * w for w in widths))
        for row in table.rows:
            cells = [
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            ]
            out.append("  ".join(cells).rstrip())
        out.append("")
    return "\n".join(out)


def render_markdown(tables: Sequence[Table], heading: str = "", intro: str = "") -> str:
    """Tables as Markdown."""
    out = [f"# {heading}", ""] if heading else []
    if intro:
        out += [intro, ""]
    for table in tables:
        out += [f"## {table.title}", ""]
        out.append("| " + " | ".join(table.header) + " |")
        out.append(
            "|" + "|".join("---" if i == 0 else "---:" for i in range(len(table.header))) + "|"
        )
        out += ["| " + " | ".join(row) + " |" for row in table.rows]
        out.append("")
    return "\n".join(out)


def par_heading(sheet: ParSheet) -> str:
    return f"PAR sheet: {sheet.paytable_id} v{sheet.version}"


def par_intro(sheet: ParSheet) -> str:
    return (
        f"Pay table `{sheet.paytable_id}` version {sheet.version} ({sheet.content_hash}), "
        f"game `{sheet.game}`. Exact figures by full enumeration of every deal; the player "
        "takes the highest-EV action at every decision (ties go to the smaller stake, check "
        "before fold). Side bets are given on every hand (judged as if the player always "
        "called) and under that strategy (a fold forfeits them). Generated by "
        "`croupier par --all --write` (`make par`) from `holdem/par/*.json`."
    )
