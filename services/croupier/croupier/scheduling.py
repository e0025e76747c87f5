"""How the event loop and its worker threads share the interpreter.

CPU-bound work runs in worker threads beside an event loop that mostly waits on round
trips: a projection's fold beside the commit of the page before it, the relay's derivation
of outbox messages beside publishing. With CPython's default switch interval (5 ms), each
reply the loop waits for then waits up to that long again for the interpreter lock, while
the database or broker idles: a projector's commit of a dozen statements lost tens of
milliseconds that way. A 0.2 ms interval lets the loop take each reply at once; a busy worker
pays for it in switches, a few percent of its time.
"""

from __future__ import annotations

import sys
from typing import Final

#: Seconds a thread may hold the interpreter lock while another waits for it.
SWITCH_INTERVAL: Final = 0.0002


def answer_round_trips_promptly() -> None:
    """Shorten the interpreter's switch interval to :data:`SWITCH_INTERVAL` (never lengthen
    it): for a process whose event loop shares the interpreter with worker threads."""
    sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL))
