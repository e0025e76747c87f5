"""``croupier`` as a process: Ctrl-C and a failing service end in one line, never a traceback,
and a service's every stderr line is JSON."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from croupier.ledger.signing import LedgerKey

SECRET = "s3cret-pw"


def start(args: list[str], cwd: Path, **env: str) -> subprocess.Popen[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CROUPIER_")}
    return subprocess.Popen(
        [sys.executable, "-m", "croupier.cli", *args],
        cwd=cwd,
        env={**environment, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Ctrl-C reaches the command even when this runs in a background job (which ignores it).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _where(pid: int) -> str:
    """What a stuck process and its children wait on, as the kernel says (state, wchan)."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        status = (task / "status").read_text().splitlines()
        state = next((line for line in status if line.startswith("State:")), "State: ?")
        found.append(
            f"thread {task.name} {state.split(':', 1)[1].strip()} in {(task / 'wchan').read_text()}"
        )
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return "; ".join(found) + f"; children {children or 'none'}"


def test_ctrl_c_during_a_replay_is_one_line_and_exit_130(tmp_path: Path) -> None:
    feed = tmp_path / "feed.jsonl"
    simulate = ["simulate", "--rounds", "400", "--seed", "4", "--out", str(feed)]
    assert (
        subprocess.run(
            [sys.executable, "-m", "floor.cli", *simulate], capture_output=True, check=False
        ).returncode
        == 0
    )
    replay = start(
        ["replay", "feed.jsonl", "--out", "o", "--rejections", "r", "--ledger", "sqlite:///l.db"],
        tmp_path,
    )
    deadline = time.monotonic() + 60
    while not (tmp_path / "l.db").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)
    replay.send_signal(signal.SIGINT)
    _, err = replay.communicate(timeout=60)
    assert replay.returncode == 130, err
    assert err.splitlines()[-1] == "croupier replay: interrupted", err
    assert "Traceback" not in err


def test_serve_logs_json_only_and_never_the_password(tmp_path: Path) -> None:
    LedgerKey.generate().write(tmp_path / "keys")
    migrate = start(["migrate", "--ledger", "sqlite:///serve.db"], tmp_path)
    assert migrate.wait(timeout=120) == 0
    serve = start(
        ["serve"],
        tmp_path,
        CROUPIER_LEDGER_SIGNING_KEY="keys/ledger-signing.key",
        CROUPIER_AMQP_URL=f"amqp://guest:{SECRET}@127.0.0.1:1/",
        CROUPIER_DATABASE_URL="sqlite:///serve.db",
        CROUPIER_HTTP_PORT="0",
        CROUPIER_LOG_LEVEL="debug",
    )
    out, err = serve.communicate(timeout=60)
    *logs, last = err.splitlines()
    assert serve.returncode == 2
    assert last.startswith("croupier serve: RabbitMQ at 127.0.0.1:1 does not answer")
    lines = [json.loads(line) for line in logs]
    assert {"croupier.settlement.service", "aiormq.connection"} <= {
        line["logger"] for line in lines
    }, err
    assert all({"timestamp", "level", "logger", "event"} <= line.keys() for line in lines)
    assert SECRET not in out + err and "Traceback" not in err


def test_ctrl_c_during_par_write_stops_the_workers_quietly(tmp_path: Path) -> None:
    # Interrupted seconds into an enumeration of minutes: nothing is computed, nothing written.
    par = start(
        ["par", "casino-holdem/classic", "--write", "--processes", "2", "--docs", "docs"],
        tmp_path,
    )
    deadline = time.monotonic() + 60
    while not (tmp_path / "docs").exists() and time.monotonic() < deadline:
        time.sleep(0.1)  # the enumeration starts once the sheets' folder is made
    time.sleep(2)
    par.send_signal(signal.SIGINT)
    try:
        out, err = par.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        stuck = _where(par.pid)
        par.kill()
        raise AssertionError(f"croupier par still running 60 s after Ctrl-C: {stuck}") from None
    assert par.returncode == 130, err
    assert err.strip() == "croupier par: interrupted", err
    assert out == "" and not any((tmp_path / "docs").iterdir())
