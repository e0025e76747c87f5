"""docs/commands.md lists every sub-command of the ``croupier`` program exactly once, in one
table, and every option it names is one the command takes; read from the real parser."""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

from croupier.cli import build_parser
from floor.cli import COMMANDS

PAGE = Path(__file__).resolve().parents[3] / "docs" / "commands.md"
ROW = re.compile(r"^\| `croupier ([a-z-]+)([^`]*)` \|", re.MULTILINE)


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser(COMMANDS)
    (action,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def command_table() -> str:
    """The page's one command table: its contiguous lines that start with ``|``."""
    text = PAGE.read_text(encoding="utf-8")
    tables = re.findall(r"(?:^\|.*\n)+", text, flags=re.MULTILINE)
    with_commands = [table for table in tables if ROW.search(table)]
    assert len(with_commands) == 1, f"{len(with_commands)} tables list commands in {PAGE}"
    return with_commands[0]


def test_every_subcommand_is_listed_once() -> None:
    listed = Counter(name for name, _ in ROW.findall(command_table()))
    assert {name: n for name, n in listed.items() if n != 1} == {}
    assert sorted(listed) == sorted(subcommands())


def test_every_listed_option_is_one_the_command_takes() -> None:
    parsers = subcommands()
    unknown = []
    for name, usage in ROW.findall(command_table()):
        parser = parsers[name]
        taken = {flag for action in parser._actions for flag in action.option_strings}
        for sub in parser._actions:  # ``report hold`` takes its options one level down
            if isinstance(sub, argparse._SubParsersAction):
                for child in sub.choices.values():
                    taken |= {flag for action in child._actions for flag in action.option_strings}
        flags = re.findall(r"--[a-z-]+", usage)
        unknown += [f"{name} {flag}" for flag in flags if flag not in taken]
    assert unknown == []
