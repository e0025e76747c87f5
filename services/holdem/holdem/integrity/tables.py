"""Exact decision tables of one flop, shared by every situation on it up to renaming suits.

A situation (two hole cards and a flop, and for Texas Hold'em Plus a turn card) is looked up
in the table of its flop's canonical form (:func:`holdem.odds.combos.canonical_flops`):
renaming suits changes no EV, so 1,755 flop tables cover all 22,100 flops. A table holds
every hole pair of the flop at once (:mod:`holdem.odds.engine`), so the rounds of a day that
share a flop, and the players of a shared hand, cost one table between them.

Numerators are exact integers over the completions counted: Casino Hold'em over
:data:`~holdem.odds.situation.CH_COMPLETIONS`; a Texas Hold'em Plus turn over
:data:`~holdem.odds.situation.THP_TURN_COMPLETIONS`, its flop over 47 times that.

Stored tables. Every canonical flop's values under one ante table, built once (one pass
over the 1,755 flops, both games from one sweep of each, about a minute of CPU:
:func:`build`, ``make integrity-tables``) and kept in :func:`cache_dir`
(``$XDG_CACHE_HOME/croupier`` or ``~/.cache/croupier``), in files keyed on the ante table
and on the source of the code that counts the outcomes, so a change to that code is a new
file, never a stale value. One process builds at a time (a lock file beside them); others
that need the same tables wait for it and read what it stored:

- ``integrity-ch-<key>.npz``: a Casino Hold'em call's net and its square, summed over the
  completions, for every hole pair of every flop (about 33 MB);
- ``integrity-thp-<key>/``: per hole pair and turn card of every flop, the showdown's wins,
  losses, and the sums of the pay multiplier and of its square over the wins (835 MB,
  memory-mapped: only the pages a recompute touches are read); per hole pair, the flop
  numerators and the spread of the value after the turn card.

Once stored, every path reads them (:func:`load` for the projector, :func:`prepare` for
``croupier integrity`` and the benchmarks, which build what is missing with a progress
display); a situation of an ante table without stored tables is computed from its flop on
demand, exactly the same values (a few hundredths of a second a flop), and a process that
found none looks again after :data:`LOOK_AGAIN` seconds, so a running projector takes up
tables stored after it started.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from holdem.odds import engine, situation, sweep
from holdem.odds.combos import SUIT_PERMUTATIONS, canonical_flops, pair_index, permute_suits
from holdem.odds.engine import casino_holdem_flop_all, thp_flop_all
from holdem.odds.situation import (
    THP_TURN_COMPLETIONS,
    THP_TURNS,
    ch_call_numerator,
)

I64 = npt.NDArray[np.int64]
Flop = tuple[int, int, int]
Multipliers = tuple[int, ...]
Progress = Callable[[int, int], None]

#: Flop tables of each game kept at once (a Texas Hold'em Plus table is a few megabytes).
CH_TABLES_KEPT: Final = 4096
THP_TABLES_KEPT: Final = 24


@cache
def _orbits() -> dict[Flop, tuple[Flop, tuple[int, ...]]]:
    """Every sorted flop -> (its canonical flop, the suit renaming that maps it there)."""
    out: dict[Flop, tuple[Flop, tuple[int, ...]]] = {}
    for flop, _ in canonical_flops():
        for perm in SUIT_PERMUTATIONS:
            image = tuple(sorted(permute_suits(c, perm) for c in flop))
            if image not in out:
                back = [0, 0, 0, 0]
                for suit, renamed in enumerate(perm):
                    back[renamed] = suit
                out[(image[0], image[1], image[2])] = (flop, tuple(back))
    assert len(out) == 22_100
    return out


@dataclass(frozen=True, slots=True)
class Place:
    """Where a situation sits in its flop's table: the canonical flop and the hole's row."""

    flop: Flop
    row: int
    perm: tuple[int, ...]
    position: tuple[int, ...]  # card -> its place among the 49 cards off the flop, or -1


def place(hole: Sequence[int], flop: Sequence[int]) -> Place:
    """The canonical flop and hole row of a (hole, flop) situation."""
    key = tuple(sorted(flop))
    canonical, perm = _orbits()[(key[0], key[1], key[2])]
    position = _positions(canonical)
    a, b = (position[permute_suits(c, perm)] for c in hole)
    assert a >= 0 and b >= 0, "hole cards are not on the flop"
    return Place(canonical, int(pair_index(49)[a, b]), perm, position)


@lru_cache(maxsize=2048)
def _positions(flop: Flop) -> tuple[int, ...]:
    out = [-1] * 52
    for i, card in enumerate(sorted(set(range(52)) - set(flop))):
        out[card] = i
    return tuple(out)


def turn_index(where: Place, hole: Sequence[int], turn: int) -> int:
    """The turn card's index among the hole's 47 open cards (ascending positions)."""
    p = where.position[permute_suits(turn, where.perm)]
    a, b = (where.position[permute_suits(c, where.perm)] for c in hole)
    assert p >= 0 and p not in (a, b), "the turn is not an open card"
    return p - (a < p) - (b < p)


# --- Casino Hold'em -----------------------------------------------------------------------


@dataclass(frozen=True)
class ChFlopTable:
    """A call's net win per ante, every hole pair of one canonical flop.

    ``ev`` and ``second`` are the sums of the net and of its square over the completions.
    """

    ev: I64
    second: I64


@lru_cache(maxsize=2)
def _ch_counts(flop: Flop) -> tuple[I64, I64, I64, I64]:
    c = casino_holdem_flop_all(flop)
    return c.no_qualify, c.wins, c.ties, c.losses


_CH_STORED: dict[Multipliers, tuple[dict[Flop, int], I64, I64]] = {}


def ch_flop_table(multipliers: Multipliers, flop: Flop) -> ChFlopTable:
    """The Casino Hold'em table of a canonical flop under one ante table."""
    stored = _CH_STORED.get(multipliers)
    if stored is None and _load_ch(multipliers):
        stored = _CH_STORED[multipliers]
    if stored is not None:
        index, ev, second = stored
        i = index[flop]
        return ChFlopTable(ev[i], second[i])
    return _ch_flop_table(multipliers, flop)


@lru_cache(maxsize=CH_TABLES_KEPT)
def _ch_flop_table(multipliers: Multipliers, flop: Flop) -> ChFlopTable:
    return _ch_of_counts(multipliers, *_ch_counts(flop))


def _ch_of_counts(
    multipliers: Multipliers, no_qualify: I64, wins: I64, _ties: I64, losses: I64
) -> ChFlopTable:
    m = np.asarray(multipliers, dtype=np.int64)
    ev = ch_call_numerator(no_qualify, wins, losses, multipliers)
    second = no_qualify @ (m * m) + wins @ ((m + 2) * (m + 2)) + 9 * losses
    ev.setflags(write=False)
    second.setflags(write=False)
    return ChFlopTable(ev, second)


# --- Texas Hold'em Plus ---------------------------------------------------------------------


@dataclass(frozen=True)
class ThpFlopTable:
    """Texas Hold'em Plus values of every hole pair and turn card of one canonical flop.

    - ``wins`` (1176, 47, 10), ``losses`` (1176, 47): showdown counts after each turn card
      (the player's final category on the last axis), over 45,540 completions each.
    - ``best_turn`` (2, 1176, 47): the best turn action's net numerator after a flop check
      (0) or flop bet (1): 45,540 times the best-play value after the turn card.
    - ``flop`` (1176, 3): flop numerators of check, fold, bet over 47 x 45,540.
    """

    wins: I64
    losses: I64
    best_turn: I64
    flop: I64


@lru_cache(maxsize=THP_TABLES_KEPT)
def thp_flop_table(multipliers: Multipliers, flop: Flop) -> ThpFlopTable:
    """The Texas Hold'em Plus table of a canonical flop under one ante table."""
    counts = thp_flop_all(flop)
    return _thp_of_counts(multipliers, counts.wins, counts.losses)


def _thp_of_counts(multipliers: Multipliers, wins: I64, losses: I64) -> ThpFlopTable:
    won, paid = wins.sum(axis=-1), wins @ np.asarray(multipliers, dtype=np.int64)
    best, flop_n = _best_play(won, losses, paid)
    for array in (wins, losses, best, flop_n):
        array.setflags(write=False)
    return ThpFlopTable(wins, losses, best, flop_n)


def _best_play(won: I64, lost: I64, paid: I64) -> tuple[I64, I64]:
    """From the showdown sums after each turn card: ``best_turn`` and ``flop`` of a table."""
    best = np.empty((2, *won.shape), dtype=np.int64)
    for fb in (0, 1):
        check, fold, bet = turn_numerators(won, lost, paid, fb)  # type: ignore[arg-type]
        np.maximum(np.maximum(check, bet), fold, out=best[fb])
    check_n = best[0].sum(axis=-1)
    fold_n = np.full_like(check_n, -3 * THP_TURN_COMPLETIONS * THP_TURNS)
    return best, np.stack([check_n, fold_n, best[1].sum(axis=-1)], axis=-1)


@dataclass(frozen=True, slots=True)
class ThpSituation:
    """What one Texas Hold'em Plus situation (hole, flop, turn card) needs from its table.

    - ``flop``: flop numerators of check, fold, bet (over 47 x 45,540);
    - ``after``: the best-play value after this turn card, following a flop check or bet
      (antes);
    - ``spread``: over the 47 possible turn cards, the variance of the value after a check,
      its covariance with the value after a bet, and the variance after a bet (antes^2);
    - the showdown after this turn card, over 45,540 completions: ``won`` and ``lost``
      counts, and ``paid`` and ``paid_square``, the sums over the wins of the ante's pay
      multiplier and of its square.
    """

    flop: tuple[int, int, int]
    after: tuple[float, float]
    spread: tuple[float, float, float]
    won: int
    lost: int
    paid: int
    paid_square: int


def turn_numerators(won: int, lost: int, paid: int, flop_bet: int) -> tuple[int, int, int]:
    """Check, fold and bet numerators at the turn (over 45,540) from a showdown's sums."""
    played = 2 + flop_bet
    check = paid + played * won - lost * (1 + played)
    return check, -(1 + played) * THP_TURN_COMPLETIONS, check + won - lost


def thp_situation(multipliers: Multipliers, flop: Flop, row: int, turn: int) -> ThpSituation:
    """One situation of a canonical flop: stored, else from the flop's table."""
    stored = _THP_STORED.get(multipliers)
    if stored is None and _load_thp(multipliers):
        stored = _THP_STORED[multipliers]
    if stored is not None:
        return stored.situation(flop, row, turn)
    return _thp_situation(multipliers, thp_flop_table(multipliers, flop), row, turn)


def _showdown_sums(multipliers: Multipliers, wins: I64) -> tuple[I64, I64]:
    m = np.asarray(multipliers, dtype=np.int64)
    return wins @ m, wins @ (m * m)


def _spread(best_turn: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """(..., 2, 47) values after each turn card -> (..., 3): var check, cov, var bet."""
    centred = best_turn - best_turn.mean(axis=-1, keepdims=True)
    cov = np.einsum("...it,...jt->...ij", centred, centred) / best_turn.shape[-1]
    return np.stack([cov[..., 0, 0], cov[..., 0, 1], cov[..., 1, 1]], axis=-1)


def _thp_situation(
    multipliers: Multipliers, table: ThpFlopTable, row: int, turn: int
) -> ThpSituation:
    after = table.best_turn[:, row, :].astype(np.float64) / THP_TURN_COMPLETIONS
    spread = _spread(after)
    f = table.flop[row]
    paid, square = _showdown_sums(multipliers, table.wins[row, turn])
    return ThpSituation(
        (int(f[0]), int(f[1]), int(f[2])),
        (float(after[0, turn]), float(after[1, turn])),
        (float(spread[0]), float(spread[1]), float(spread[2])),
        int(table.wins[row, turn].sum()),
        int(table.losses[row, turn]),
        int(paid),
        int(square),
    )


# --- stored tables ----------------------------------------------------------------------

_THP_FIELDS: Final = ("won", "lost", "paid", "paid_square", "flop", "spread")


@dataclass(frozen=True)
class _ThpStored:
    index: dict[Flop, int]
    multipliers: Multipliers
    arrays: dict[str, npt.NDArray[np.generic]]

    def situation(self, flop: Flop, row: int, turn: int) -> ThpSituation:
        i = self.index[flop]
        a = self.arrays
        f, spread = a["flop"][i, row], a["spread"][i, row]
        won, lost = int(a["won"][i, row, turn]), int(a["lost"][i, row, turn])
        paid, square = int(a["paid"][i, row, turn]), int(a["paid_square"][i, row, turn])
        after = tuple(
            max(turn_numerators(won, lost, paid, fb)) / THP_TURN_COMPLETIONS for fb in (0, 1)
        )
        return ThpSituation(
            (int(f[0]), int(f[1]), int(f[2])),
            (after[0], after[1]),
            (float(spread[0]), float(spread[1]), float(spread[2])),
            won,
            lost,
            paid,
            square,
        )


_THP_STORED: dict[Multipliers, _ThpStored] = {}
#: When each game's stored tables of an ante table were last looked for and not found.
_LOOKED: dict[tuple[str, Multipliers], float] = {}
#: Seconds before looking again: a long-running process (the projector) reads tables that
#: another process built after it started, and computes flops on demand until then.
LOOK_AGAIN: Final = 60.0


def _looked_lately(game: str, multipliers: Multipliers) -> bool:
    """True if these tables were missing less than :data:`LOOK_AGAIN` ago; else note a look."""
    now = time.monotonic()
    if now - _LOOKED.get((game, multipliers), -LOOK_AGAIN) < LOOK_AGAIN:
        return True
    _LOOKED[(game, multipliers)] = now
    return False


def cache_dir() -> Path:
    """Where built tables are kept: ``$XDG_CACHE_HOME/croupier``, else ``~/.cache/croupier``."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "croupier"


def _key(game: str, multipliers: Multipliers) -> str:
    # Keyed on the ante table and on the code that counts the outcomes and lays out the file.
    here = Path(__file__)
    source = b"".join(Path(m.__file__ or "").read_bytes() for m in (engine, sweep, situation))
    source += game.encode() + repr(_THP_FIELDS).encode() + here.name.encode()
    return hashlib.sha256(repr(multipliers).encode() + source).hexdigest()[:16]


def _ch_path(multipliers: Multipliers) -> Path:
    return cache_dir() / f"integrity-ch-{_key('ch', multipliers)}.npz"


def _thp_path(multipliers: Multipliers) -> Path:
    return cache_dir() / f"integrity-thp-{_key('thp', multipliers)}"


def _load_ch(multipliers: Multipliers) -> bool:
    """Read the stored Casino Hold'em tables of an ante table, once; False when absent."""
    if multipliers in _CH_STORED:
        return True
    if _looked_lately("ch", multipliers):
        return False
    try:
        with np.load(_ch_path(multipliers)) as stored:
            ev, second = stored["ev"], stored["second"]
    except (OSError, KeyError, ValueError):
        return False
    flops = _flops()
    if ev.shape != (len(flops), 1176) or second.shape != ev.shape:
        return False
    _CH_STORED[multipliers] = ({f: i for i, f in enumerate(flops)}, ev, second)
    return True


def _load_thp(multipliers: Multipliers) -> bool:
    """Map the stored Texas Hold'em Plus tables of an ante table, once; False when absent."""
    if multipliers in _THP_STORED:
        return True
    if _looked_lately("thp", multipliers):
        return False
    path = _thp_path(multipliers)
    try:
        # Plain arrays over the mapped files: indexing an np.memmap goes through Python.
        arrays = {
            name: np.load(path / f"{name}.npy", mmap_mode="r").view(np.ndarray)
            for name in _THP_FIELDS
        }
    except (OSError, ValueError):
        return False
    flops = _flops()
    if arrays["won"].shape != (len(flops), 1176, THP_TURNS):
        return False
    index = {f: i for i, f in enumerate(flops)}
    _THP_STORED[multipliers] = _ThpStored(index, multipliers, arrays)
    return True


def _flops() -> list[Flop]:
    return [flop for flop, _ in canonical_flops()]


def load(ch: Iterable[Multipliers] = (), thp: Iterable[Multipliers] = ()) -> list[str]:
    """Read the stored tables of these ante tables; the names of those not stored yet."""
    missing = [f"Casino Hold'em {m}" for m in ch if not _load_ch(m)]
    return missing + [f"Texas Hold'em Plus {m}" for m in thp if not _load_thp(m)]


def prepare(
    ch: Iterable[Multipliers] = (),
    thp: Iterable[Multipliers] = (),
    progress: Progress | None = None,
    waiting: Callable[[], None] | None = None,
) -> None:
    """Read the stored tables of these ante tables, building what is missing first.

    One process at a time builds (a lock file in :func:`cache_dir`): the others wait for it
    (``waiting`` is called when they start to) and then read what it stored.
    """
    ch, thp = list(dict.fromkeys(ch)), list(dict.fromkeys(thp))
    load(ch, thp)
    if any(m not in _CH_STORED for m in ch) or any(m not in _THP_STORED for m in thp):
        with _building(waiting):
            _LOOKED.clear()
            load(ch, thp)  # what another process built while this one waited
            missing_ch = [m for m in ch if m not in _CH_STORED]
            build(missing_ch, [m for m in thp if m not in _THP_STORED], progress)
    _LOOKED.clear()
    missing = load(ch, thp)
    if missing:
        raise OSError(f"the integrity tables could not be stored in {cache_dir()}: {missing}")


@contextmanager
def _building(waiting: Callable[[], None] | None) -> Iterator[None]:
    """Hold the cache's build lock (released by the system if the process dies)."""
    cache_dir().mkdir(parents=True, exist_ok=True)
    with open(cache_dir() / "integrity-build.lock", "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if waiting:
                waiting()
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def build(
    ch: Sequence[Multipliers], thp: Sequence[Multipliers], progress: Progress | None = None
) -> None:
    """Build and store the tables of these ante tables, every canonical flop once.

    About 22 ms of CPU a flop for both games together (about a minute for all 1,755, spread
    over the cores); call it through :func:`prepare`, which keeps other processes from
    building the same at once.
    """
    if not ch and not thp:
        return
    flops = _flops()
    cache_dir().mkdir(parents=True, exist_ok=True)
    ch_ev = {m: np.empty((len(flops), 1176), np.int64) for m in ch}
    ch_second = {m: np.empty((len(flops), 1176), np.int64) for m in ch}
    thp_out = {m: _open_thp(m, len(flops)) for m in thp}
    for i, (c, sums) in enumerate(_swept(flops, bool(ch), list(thp))):
        for m in ch:
            table = _ch_of_counts(m, c.ch_no_qualify, c.ch_wins, c.ch_ties, c.ch_losses)
            ch_ev[m][i], ch_second[m][i] = table.ev, table.second
        for (_, arrays), showdowns in zip(thp_out.values(), sums, strict=True):
            _store_thp_flop(showdowns, arrays, i)
        if progress:
            progress(i + 1, len(flops))
    for m in ch:
        _store(_ch_path(m), ev=ch_ev[m], second=ch_second[m])
    for m, (building, arrays) in thp_out.items():
        for array in arrays.values():
            array.flush()  # type: ignore[attr-defined]
        del arrays
        final = _thp_path(m)
        shutil.rmtree(final, ignore_errors=True)
        os.replace(building, final)


def _swept(
    flops: Sequence[Flop], ch: bool, thp: Sequence[Multipliers]
) -> Iterator[tuple[sweep.FlopCounts, list[sweep.ThpSums]]]:
    """Each flop's Casino Hold'em counts and Texas Hold'em Plus sums (one sweep), in order,
    on every core this may use.

    The sweep runs outside the interpreter's lock, so threads suffice; a few flops ahead at
    most, so the memory held stays a few tens of megabytes.
    """
    workers = len(os.sched_getaffinity(0))
    with ThreadPoolExecutor(workers) as pool:
        ahead: deque[Future[tuple[sweep.FlopCounts, list[sweep.ThpSums]]]] = deque()
        for flop in flops:
            ahead.append(pool.submit(sweep.flop_sums, flop, ch, thp))
            if len(ahead) > 2 * workers:
                yield ahead.popleft().result()
        while ahead:
            yield ahead.popleft().result()


def _open_thp(multipliers: Multipliers, flops: int) -> tuple[Path, dict[str, npt.NDArray[Any]]]:
    top = max(multipliers)
    wide = np.uint16 if THP_TURN_COMPLETIONS * top * top <= np.iinfo(np.uint16).max else np.int64
    building = Path(tempfile.mkdtemp(dir=cache_dir(), prefix=".building-"))
    shapes: dict[str, tuple[tuple[int, ...], Any]] = {
        "won": ((flops, 1176, THP_TURNS), np.uint16),
        "lost": ((flops, 1176, THP_TURNS), np.uint16),
        "paid": ((flops, 1176, THP_TURNS), wide),
        "paid_square": ((flops, 1176, THP_TURNS), wide),
        "flop": ((flops, 1176, 3), np.int64),
        "spread": ((flops, 1176, 3), np.float64),
    }
    arrays: dict[str, npt.NDArray[Any]] = {
        name: np.lib.format.open_memmap(building / f"{name}.npy", "w+", dtype, shape)
        for name, (shape, dtype) in shapes.items()
    }
    return building, arrays


def _store_thp_flop(sums: sweep.ThpSums, arrays: dict[str, npt.NDArray[Any]], i: int) -> None:
    """Store a flop's showdown sums as the stored table's row ``i``, with what follows."""
    best, flop_n = _best_play(sums.won, sums.lost, sums.paid)
    arrays["won"][i] = sums.won
    arrays["lost"][i] = sums.lost
    arrays["paid"][i] = sums.paid
    arrays["paid_square"][i] = sums.paid_square
    arrays["flop"][i] = flop_n
    after = best.astype(np.float64).transpose(1, 0, 2) / THP_TURN_COMPLETIONS
    arrays["spread"][i] = _spread(after)


def _store(path: Path, **arrays: I64) -> None:
    with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".npz", delete=False) as handle:
        np.savez(handle, **arrays)  # type: ignore[arg-type]
    os.replace(handle.name, path)
