"""``croupier --help`` and ``--version`` answer at once: they load no driver, web framework
or rules core (only the chosen command's module is imported), and every option's help
shows its default.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import pytest

from croupier.cli import build_parser
from floor.cli import COMMANDS, main

#: What a command loads when it runs, never for the program's help or version.
HEAVY = ("asyncpg", "aio_pika", "aiormq", "numpy", "fastapi", "uvicorn", "holdem", "structlog")


def imported_by(*args: str) -> set[str]:
    """The top-level packages ``croupier ARGS`` imports, from ``python -X importtime``."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "floor.cli", *args],
        env={k: v for k, v in os.environ.items() if not k.startswith("CROUPIER_")},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "croupier" in done.stdout
    return {
        line.rpartition("|")[2].strip().split(".")[0]
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    }


@pytest.mark.parametrize("args", [["--help"], ["--version"]])
def test_help_and_version_import_nothing_heavy(args: list[str]) -> None:
    modules = imported_by(*args)
    assert "pydantic_settings" in modules  # the settings are read, the reading is measured
    assert not modules & set(HEAVY), sorted(modules & set(HEAVY))


def test_a_commands_help_imports_that_command_only() -> None:
    modules = imported_by("token", "--help")
    assert not modules & set(HEAVY), sorted(modules & set(HEAVY))
    assert "fastapi" in imported_by("web", "--help")


def test_the_program_help_lists_every_command_with_its_summary(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    for name, (_, summary) in COMMANDS.items():
        assert f"{name} {summary}" in out


def _options_with_defaults() -> list[tuple[str, argparse.ArgumentParser, argparse.Action]]:
    parser = build_parser(COMMANDS)
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return [
        (name, sub, action)
        for name, sub in commands.choices.items()
        for action in sub._actions
        if action.option_strings
        and action.default not in (None, argparse.SUPPRESS)
        and action.default is not False
        and not isinstance(action, argparse._HelpAction)
    ]


def test_every_option_with_a_default_shows_it() -> None:
    options = _options_with_defaults()
    assert len(options) > 15
    for name, sub, action in options:
        text = " ".join(sub.format_help().split())
        shown = " ".join(sub._get_formatter()._expand_help(action).split()) if action.help else ""
        assert "default" in shown and shown in text, (name, action.option_strings)


@pytest.mark.parametrize(
    ("command", "option", "default"),
    [
        ("simulate", "--strategy", "simple"),
        ("reconcile", "--lag", "0"),
        ("web", "--host", "0.0.0.0"),
    ],
)
def test_the_defaults_once_missing_are_shown(
    command: str, option: str, default: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command, "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    after = text[text.rindex(option) :]
    assert f"(default: {default})" in after[: after.index(" --", 2)], after[:200]
