"""``croupier demo`` end to end, as a user runs it: a process in a working directory.

Embedded mode needs nothing running: the in-process bus and a SQLite ledger under ``var/``
of the working directory. When the broker or the database is configured but does not answer,
the demo says so and stops (exit 2) instead of quietly falling back to embedded mode. The
demo's own audit (every round closed and paid, exit 1 otherwise) is tested in
``tests/unit/croupier/test_demo_audit.py``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

TIMEOUT = 180


def croupier(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``croupier ARGS`` in ``cwd`` with the ``CROUPIER_*`` settings given, and only those."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CROUPIER_")}
    return subprocess.run(
        [sys.executable, "-m", "floor.cli", *args],
        cwd=cwd,
        env={**environment, **env},
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def test_the_embedded_demo_plays_settles_and_balances(tmp_path: Path) -> None:
    done = croupier(["demo", "--embedded", "--rounds", "40", "--seed", "7"], tmp_path)

    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "embedded mode" in out
    assert "SQLite ledger at var/croupier.sqlite" in out
    assert (tmp_path / "var" / "croupier.sqlite").is_file()
    assert "studio: 4 tables, 40 rounds" in out
    assert "rounds paid    40/40" in out
    header = re.search(
        r"^game\s+rounds\s+voided\s+bets\s+wagered\s+returned\s+hold\s+hold %$", out, re.M
    )
    assert header, out
    rows = dict(
        (m["game"], int(m["rounds"]) + int(m["voided"]))
        for m in re.finditer(
            r"^(?P<game>casino_holdem|texas_holdem_plus)\s+(?P<rounds>\d+)\s+(?P<voided>\d+)\s",
            out,
            re.M,
        )
    )
    assert rows.keys() == {"casino_holdem", "texas_holdem_plus"}
    assert sum(rows.values()) == 40
    assert re.search(r"^wallets EUR: .*: balanced ", out, re.M), out
    assert "MISMATCH" not in out


def test_a_second_embedded_run_in_the_same_directory_balances_on_its_own(tmp_path: Path) -> None:
    for seed in ("7", "8", "7"):  # the same seed again: its own ids, settled in full
        done = croupier(["demo", "--embedded", "--rounds", "12", "--seed", seed], tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "rounds paid    12/12" in done.stdout
        assert ": balanced " in done.stdout and "MISMATCH" not in done.stdout
        assert "rounds dealt 12, closed 12, open 0" in done.stdout
        assert done.stdout.rstrip().endswith("demo: OK, every closed round paid to the unit")
        assert "Traceback" not in done.stderr


def test_a_configured_broker_that_does_not_answer_stops_the_demo(tmp_path: Path) -> None:
    done = croupier(
        ["demo", "--rounds", "5"], tmp_path, CROUPIER_AMQP_URL="amqp://guest:guest@127.0.0.1:1/"
    )

    assert done.returncode == 2
    assert done.stderr == (
        "croupier demo: RabbitMQ at 127.0.0.1:1 (CROUPIER_AMQP_URL) not reachable; both are "
        "needed for live mode; start it with `make services`, fix or unset the variable, or "
        "run `croupier demo --embedded`\n"
    )
    assert "embedded mode" not in done.stdout
    assert not (tmp_path / "var").exists()


def test_the_demo_prints_a_players_history_page_that_works_while_it_runs(tmp_path: Path) -> None:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CROUPIER_")}
    demo = subprocess.Popen(
        [sys.executable, "-u", "-m", "floor.cli", "demo", "--embedded", "--rounds", "150"],
        cwd=tmp_path,
        env={**environment, "CROUPIER_WEB_PORT": "0", "CROUPIER_HTTP_PORT": "0"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert demo.stdout is not None
    try:
        url, pages = None, []
        for line in demo.stdout:
            found = re.search(r"game history of (\S+): (http://\S+/history\?token=\S+)", line)
            if found:
                player, url = found[1], found[2]
            if url and "rounds paid" in line and demo.poll() is None:
                with urllib.request.urlopen(url, timeout=10) as page:
                    pages.append((page.status, page.read().decode()))
        assert demo.wait(TIMEOUT) == 0
    finally:
        demo.kill()
    assert url is not None, "the demo printed no history page"
    assert pages and all(status == 200 for status, _ in pages)
    assert any("data-round" in html for _, html in pages), "no round showed while it ran"
    assert any("round " in html for _, html in pages) and player.startswith("demo-")
