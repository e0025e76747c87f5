"""``croupier demo`` end to end, as a user runs it: a process in a working directory.

Embedded mode needs nothing running: the in-process bus and a new SQLite ledger under
``var/`` of the working directory each run. The commands the demo prints run as printed. At
a terminal it serves the history pages until Ctrl-C; with no terminal it exits after its
summary. When the broker or the database is configured but does not answer,
the demo says so and stops (exit 2) instead of quietly falling back to embedded mode. The
demo's own audit (every round closed and paid, exit 1 otherwise) is tested in
``tests/unit/croupier/test_demo_audit.py``.
"""

from __future__ import annotations

import os
import pty
import re
import shlex
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

TIMEOUT = 180


def croupier(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``croupier ARGS`` in ``cwd`` with the ``CROUPIER_*`` settings given, and only those."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CROUPIER_")}
    ports = {"CROUPIER_HTTP_PORT": "0", "CROUPIER_WEB_PORT": "0"}  # tests run side by side
    return subprocess.run(
        [sys.executable, "-m", "floor.cli", *args],
        cwd=cwd,
        env={**environment, **ports, **env},
        stdin=subprocess.DEVNULL,
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
    assert "a new SQLite ledger at var/demo.sqlite" in out
    assert (tmp_path / "var" / "demo.sqlite").is_file()
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
    sizes = []
    for seed in ("7", "8", "7"):  # the same seed again: its own ids, settled in full
        done = croupier(["demo", "--embedded", "--rounds", "12", "--seed", seed], tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        # a new ledger each run: this run's positions start at 1, the file holds one run
        assert re.search(r"reconcile --ledger \S+ --wallet \S+ --positions 1:\d+\)", done.stdout)
        sizes.append((tmp_path / "var" / "demo.sqlite").stat().st_size)
        assert "rounds paid    12/12" in done.stdout
        assert ": balanced " in done.stdout and "MISMATCH" not in done.stdout
        assert "rounds dealt 12, closed 12, open 0" in done.stdout
        assert done.stdout.rstrip().endswith("demo: OK, every closed round paid to the unit")
        assert "Traceback" not in done.stderr
    assert max(sizes) < 2 * min(sizes), sizes


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
        stdin=subprocess.DEVNULL,
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


def test_every_command_the_demo_prints_runs_as_printed(tmp_path: Path) -> None:
    done = croupier(["demo", "--embedded", "--rounds", "12", "--seed", "3"], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr

    commands = re.findall(r"\((\S*croupier (?:reconcile|verify) [^)]*)\)", done.stdout)
    assert {shlex.split(c)[1] for c in commands} == {"reconcile", "verify"}, done.stdout
    for command in commands:
        pasted = subprocess.run(
            command,
            shell=True,
            cwd=tmp_path,
            env={k: v for k, v in os.environ.items() if not k.startswith("CROUPIER_")},
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
        assert pasted.returncode == 0, (command, pasted.stdout, pasted.stderr)


def test_at_a_terminal_the_demo_serves_its_pages_until_ctrl_c(tmp_path: Path) -> None:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CROUPIER_")}
    terminal, keyboard = pty.openpty()
    demo = subprocess.Popen(
        [sys.executable, "-u", "-m", "floor.cli", "demo", "--embedded", "--rounds", "12"],
        cwd=tmp_path,
        env={**environment, "CROUPIER_WEB_PORT": "0", "CROUPIER_HTTP_PORT": "0"},
        stdin=keyboard,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    os.close(keyboard)
    assert demo.stdout is not None
    try:
        lines = []
        for line in demo.stdout:
            lines.append(line)
            if "press Ctrl-C" in line:
                break
        url = re.search(r"game history stays up at (http://\S+)", "".join(lines))
        assert url is not None, "".join(lines)
        assert "demo: OK" in "".join(lines)
        assert demo.poll() is None  # the summary is out, the pages are still served
        with urllib.request.urlopen(url[1], timeout=10) as page:
            assert page.status == 200 and "data-round" in page.read().decode()
        demo.send_signal(signal.SIGINT)
        rest = demo.communicate(timeout=30)[0]
        assert demo.returncode == 0, rest
        assert "demo stopped" in rest and "Traceback" not in rest
    finally:
        demo.kill()
        os.close(terminal)
