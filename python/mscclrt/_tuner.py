"""The autotuning loop: time every candidate at every power-of-two size on every rank, agree.

Independent of how a candidate runs: a Runner (the GPU one lives elsewhere; the tests use
scripted doubles) proposes candidates and times them, and HostSync (_sync.py) carries the
agreement. For each collective and size, for each candidate: a barrier, the timing, then an
allgather of every rank's outcome. The candidate's time is the maximum over the ranks (a
collective is as slow as its slowest rank). A candidate that erred or timed out on any rank, or
whose round missed a rank, is dropped on every rank, with a warning naming it, the ranks and why.
After a timeout or a missing rank the communicator may be wedged, so rank 0 makes a new unique
id, broadcasts it, and every rank calls runner.recover(uid) before the next candidate.

Every decision is computed from the results of sync rounds, which are identical on every rank
(a late rank gets the decided result of its round), so the winners are identical everywhere by
construction. A dead rank (PeerDead) or a hub that stops answering ends tuning on every rank
with TuneAborted naming the rank; so does a rank missing MAX_MISSED candidates in a row.
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

from . import _table
from ._sync import MISSING, HostSync, PeerDead, SyncError, SyncTimeout

_log = logging.getLogger("mscclrt.tune")

MAX_MISSED = 3                     # candidates in a row a rank may miss before tuning gives up
SETTLE_S = 30.0                    # at the end, how long to wait for a late rank to catch up
DEADLINE_SLACK_S = 0.5             # time() may overrun its deadline by this much ("a little")
REDUCING = ("allreduce", "reducescatter", "reduce")   # the collectives whose table op matters


class CandidateError(Exception):
    """Raised by Runner.time(): the candidate cannot run here (message says why)."""


class CandidateTimeout(Exception):
    """Raised by Runner.time(): the candidate did not finish by its deadline."""


class TuneError(Exception):
    """Tuning cannot go on or was called wrongly (the same on every rank where it is decided)."""


class TuneAborted(TuneError):
    """Tuning stopped because of a rank: dead, silent, or missing too often; .rank names it."""

    def __init__(self, msg: str, rank: int) -> None:
        super().__init__(msg)
        self.rank = rank


@dataclass(frozen=True)
class Candidate:
    algorithm: str
    blocks: int = 0                # 0: the algorithm's own
    threads: int = 0               # 0: the algorithm's own

    @property
    def label(self) -> str:
        """"name b=16 t=512"; a 0 (the algorithm's own launch) is left out."""
        parts = [self.algorithm]
        if self.blocks:
            parts.append(f"b={self.blocks}")
        if self.threads:
            parts.append(f"t={self.threads}")
        return " ".join(parts)


class Runner(Protocol):
    rank: int
    world_size: int

    def candidates(self, collective: str, nbytes: int, dtype: str) -> list[Candidate]:
        """The candidates for one size, identical (and in the same order) on every rank."""
        ...

    def time(self, cand: Candidate, collective: str, nbytes: int, dtype: str, op: str,
             deadline_s: float) -> float:
        """Seconds per call; CandidateError on failure, CandidateTimeout past the deadline.
        Must itself return within deadline_s plus a little (DEADLINE_SLACK_S)."""
        ...

    def new_unique_id(self) -> bytes:
        """Rank 0 only: an id for a new communicator, after a timeout somewhere."""
        ...

    def recover(self, unique_id: bytes) -> None:
        """Every rank: abort the old communicator and join a new one made from unique_id."""
        ...


@dataclass(frozen=True)
class Dropped:
    collective: str
    nbytes: int
    candidate: Candidate
    reasons: tuple[tuple[int, str], ...]   # (rank, why), sorted by rank

    def message(self) -> str:
        why = "; ".join(f"rank {r}: {w}" for r, w in self.reasons)
        return f"{self.collective} {_size(self.nbytes)}: dropped '{self.candidate.label}' ({why})"


@dataclass(frozen=True)
class TuneEvent:
    """What progress() gets. kind: "timed" (time_s set), "dropped" (reason set) or "size"
    (every candidate of the size is done; best set unless all were dropped)."""
    kind: str
    collective: str
    nbytes: int
    candidate: Candidate | None
    time_s: float | None
    best: tuple[Candidate, float] | None
    reason: str = ""


@dataclass
class TuneResult:
    dtype: str
    op: str
    winners: list[tuple[str, int, Candidate, float]] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)
    # (collective, nbytes) -> surviving (candidate, max-over-ranks time), fastest first
    timings: dict[tuple[str, int], list[tuple[Candidate, float]]] = field(default_factory=dict)

    def table_entries(self, world_size: int, ranks_per_node: int, arch: int,
                      dtype: str | None = None, op: str | None = None) -> list[_table.TableEntry]:
        """The winners as tuning-table entries (the size rule of _table.py). dtype and op
        default to the tuned ones; op is "any" for collectives that do not reduce."""
        dt, o = dtype or self.dtype, op or self.op
        out: list[_table.TableEntry] = []
        for coll in dict.fromkeys(c for c, _, _, _ in self.winners):
            rows = [(c, n, w.algorithm, w.blocks, w.threads) for c, n, w, _ in self.winners
                    if c == coll]
            out += _table.entries_from_winners(rows, world_size=world_size,
                                               ranks_per_node=ranks_per_node, arch=arch,
                                               dtype=dt, op=o if coll in REDUCING else "any")
        return out

    def summary(self) -> str:
        """A text table: size | winner | time µs | runner-up | speedup, per collective."""
        lines: list[str] = []
        for coll in dict.fromkeys(c for c, _ in self.timings):
            sizes = sorted(n for c, n in self.timings if c == coll)
            rows = [("size", "winner", "time µs", "runner-up", "speedup")]
            for n in sizes:
                t = self.timings[(coll, n)]
                if not t:
                    rows.append((_size(n), "(none survived)", "-", "-", "-"))
                    continue
                up = t[1] if len(t) > 1 else None
                rows.append((_size(n), t[0][0].label, f"{t[0][1] * 1e6:.1f}",
                             f"{up[0].label} ({up[1] * 1e6:.1f} µs)" if up else "-",
                             f"{up[1] / t[0][1]:.2f}x" if up and t[0][1] > 0 else "-"))
            w = [max(len(r[i]) for r in rows) for i in range(5)]
            lines.append(f"{coll} ({self.dtype}, {self.op}):")
            for i, r in enumerate(rows):
                lines.append("  " + " | ".join(
                    (c.rjust(w[j]) if j in (0, 2, 4) else c.ljust(w[j])) for j, c in enumerate(r)
                ).rstrip())
                if i == 0:
                    lines.append("  " + "-+-".join("-" * x for x in w))
        if self.dropped:
            lines.append(f"{len(self.dropped)} candidate(s) dropped:")
            lines += ["  " + d.message() for d in self.dropped]
        return "\n".join(lines)


def _size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def print_progress(ev: TuneEvent) -> None:
    """The default progress display (rank 0): one line per candidate, then the size's best."""
    best = f"best {ev.best[0].label} {ev.best[1] * 1e6:.1f} µs" if ev.best else "best -"
    head = f"{ev.collective:<13} {_size(ev.nbytes):>9}"
    if ev.kind == "timed" and ev.candidate and ev.time_s is not None:
        print(f"{head}  {ev.candidate.label:<40} {ev.time_s * 1e6:>10.1f} µs   {best}",
              flush=True)
    elif ev.kind == "dropped" and ev.candidate:
        print(f"{head}  {ev.candidate.label:<40} {'dropped':>13}   {best}   ({ev.reason})",
              flush=True)


def _sizes(min_bytes: int, max_bytes: int) -> list[int]:
    if min_bytes < 1 or max_bytes < min_bytes:
        raise ValueError(f"size range [{min_bytes}, {max_bytes}] is empty or starts below 1")
    s = 1 << (min_bytes - 1).bit_length()          # the first power of two >= min_bytes
    out = []
    while s <= max_bytes:
        out.append(s)
        s <<= 1
    return out


class _Loop:
    """The state of one tune() call; every method runs identically on every rank."""

    def __init__(self, runner: Runner, sync: HostSync, dtype: str, op: str, timeout_s: float,
                 progress: Callable[[TuneEvent], None] | None, log: Callable[[str], None]):
        self.runner, self.sync, self.dtype, self.op = runner, sync, dtype, op
        self.timeout_s, self.progress, self.log = timeout_s, progress, log
        self.rank = runner.rank
        self.result = TuneResult(dtype, op)
        self.missed = [0] * sync.world_size       # candidates in a row each rank missed
        self.where = "start"                      # for the abort message

    def emit(self, ev: TuneEvent) -> None:
        if self.progress is not None:
            self.progress(ev)

    def size(self, coll: str, nbytes: int) -> None:
        self.where = f"{coll} {_size(nbytes)}"
        cands = list(self.runner.candidates(coll, nbytes, self.dtype))
        mine = [c.label for c in cands]
        labels = self.sync.allgather(mine, timeout=self.timeout_s)
        # rank 0 is never missing (it decides the rounds), so its list is the reference; a
        # late rank, whose own slot is MISSING, checks its list against it too
        for r, other in enumerate(labels):
            theirs = mine if r == self.rank else other
            if theirs is not MISSING and theirs != labels[0]:
                raise TuneError(f"{self.where}: rank {r} proposes the candidates {theirs}, rank 0 "
                                f"{labels[0]}; they must be the same on every rank")
        timed: list[tuple[Candidate, float]] = []
        best: tuple[Candidate, float] | None = None
        for cand in cands:
            self.where = f"{coll} {_size(nbytes)} '{cand.label}'"
            t = self.candidate(coll, nbytes, cand, best)
            if t is not None:
                timed.append((cand, t))
                if best is None or t < best[1]:
                    best = (cand, t)
        timed.sort(key=lambda ct: ct[1])              # stable: ties keep the candidates' order
        self.result.timings[(coll, nbytes)] = timed
        if best is not None:
            self.result.winners.append((coll, nbytes, best[0], best[1]))
        else:
            self.log(f"{coll} {_size(nbytes)}: no candidate survived; no entry for this size")
        self.emit(TuneEvent("size", coll, nbytes, None, None, best))

    def candidate(self, coll: str, nbytes: int, cand: Candidate,
                  best: tuple[Candidate, float] | None) -> float | None:
        """Times one candidate on every rank; its max-over-ranks time, or None if dropped."""
        absent = self.sync.barrier(timeout=self.timeout_s)
        if absent:
            # someone is still behind (a late rank catching up): timing now would measure a
            # collective with a rank missing, so nobody times and the candidate is dropped
            outcome: dict[str, Any] = {"skip": True}
        else:
            outcome = self.time_here(coll, nbytes, cand)
        # the others may spend up to the deadline and its slack in time() after this rank's
        # time() returned at once: only past that (and one more timeout) is a rank missing
        outs = self.sync.allgather(outcome, timeout=2 * self.timeout_s + DEADLINE_SLACK_S)
        reasons = [(r, "missed the barrier before it; nobody timed it") for r in absent]
        wedged = bool(absent)
        for r, o in enumerate(outs):
            if r in absent:
                continue
            if o is MISSING:
                reasons.append((r, f"missing from round {self.sync.last_round.round}"
                                if self.sync.last_round else "missing"))
                wedged = True
            elif "timeout" in o:
                reasons.append((r, f"timed out: {o['timeout']}"))
                wedged = True
            elif "error" in o:
                reasons.append((r, f"failed: {o['error']}"))
        absent_now = {r for r, o in enumerate(outs) if o is MISSING} | set(absent)
        for r in range(len(self.missed)):
            self.missed[r] = self.missed[r] + 1 if r in absent_now else 0
            if self.missed[r] >= MAX_MISSED:
                raise TuneAborted(f"tuning stopped at {self.where}: rank {r} missed {MAX_MISSED}"
                                  " candidates in a row", r)
        t: float | None = None
        if reasons:
            d = Dropped(coll, nbytes, cand, tuple(sorted(reasons)))
            self.result.dropped.append(d)
            self.log(d.message())
            self.emit(TuneEvent("dropped", coll, nbytes, cand, None, best,
                                "; ".join(f"rank {r}: {w}" for r, w in reasons)))
        else:
            t = max(float(o["time"]) for o in outs)
            self.emit(TuneEvent("timed", coll, nbytes, cand, t,
                                best if best and best[1] <= t else (cand, t)))
        if wedged:
            self.recover()
        return t

    def time_here(self, coll: str, nbytes: int, cand: Candidate) -> dict[str, Any]:
        """This rank's outcome, as it goes into the allgather."""
        t0 = time.monotonic()
        try:
            t = self.runner.time(cand, coll, nbytes, self.dtype, self.op, self.timeout_s)
        except CandidateTimeout as e:
            return {"timeout": str(e) or f"past the {self.timeout_s:g} s deadline"}
        except CandidateError as e:
            return {"error": str(e) or type(e).__name__}
        took = time.monotonic() - t0
        if took > self.timeout_s + DEADLINE_SLACK_S:
            return {"timeout": f"time() returned after {took:.2f} s, past the "
                               f"{self.timeout_s:g} s deadline"}
        if not isinstance(t, (int, float)) or isinstance(t, bool) or not math.isfinite(t) \
                or t <= 0:
            return {"error": f"time() returned {t!r}, not a positive number of seconds"}
        return {"time": float(t)}

    def settle(self) -> None:
        """Barriers until every rank is at the end, so that nobody closes the sync while a late
        rank still replays decided rounds (it would find rank 0 gone). The number of barriers
        is fixed in advance, and the decision to stop comes from barrier results, so every rank
        runs the same rounds; a rank still missing after about SETTLE_S is left behind."""
        tries = max(MAX_MISSED, math.ceil(SETTLE_S / self.timeout_s))
        for _ in range(tries):
            absent = self.sync.barrier(timeout=self.timeout_s)
            if not absent:
                return
        self.log(f"rank(s) {', '.join(map(str, absent))} still missing at the end of tuning; "
                 "the result stands without them")

    def recover(self) -> None:
        uid = self.runner.new_unique_id().hex() if self.rank == 0 else None
        got = self.sync.broadcast(uid, root=0, timeout=self.timeout_s)
        if not isinstance(got, str):
            raise TuneError(f"{self.where}: rank 0 broadcast {got!r} as the recovery id")
        self.log(f"{self.where}: recovering the communicator (new unique id from rank 0)")
        self.runner.recover(bytes.fromhex(got))


def tune(runner: Runner, sync: HostSync, collectives: Sequence[str], min_bytes: int,
         max_bytes: int, dtype: str = "bfloat16", op: str = "sum", timeout_s: float = 10.0,
         progress: Callable[[TuneEvent], None] | None = None,
         log: Callable[[str], None] | None = None) -> TuneResult:
    """Tunes every collective at every power of two in [min_bytes, max_bytes] (module doc).

    timeout_s is the deadline given to runner.time() and every sync round's timeout. progress
    gets a TuneEvent per candidate and per size (default: print_progress on rank 0, nothing
    elsewhere, and the summary() printed at the end); log gets the warnings (default: the "mscclrt.tune" logger). Raises TuneAborted
    (with .rank) when a rank dies or rank 0 stops answering, TuneError on a wrong call.
    """
    if runner.rank != sync.rank or runner.world_size != sync.world_size:
        raise TuneError(f"runner is rank {runner.rank} of {runner.world_size}, sync rank "
                        f"{sync.rank} of {sync.world_size}")
    for c in collectives:
        if c not in _table.COLLECTIVES:
            raise TuneError(f"unknown collective '{c}'")
    sizes = _sizes(min_bytes, max_bytes)
    show_summary = progress is None and runner.rank == 0
    if show_summary:
        progress = print_progress
    loop = _Loop(runner, sync, dtype, op, timeout_s, progress, log or _log.warning)
    try:
        for coll in collectives:
            for n in sizes:
                loop.size(coll, n)
        loop.where = "the end"
        loop.settle()
    except PeerDead as e:
        raise TuneAborted(f"tuning stopped at {loop.where} on rank {runner.rank}: {e}",
                          e.rank) from e
    except SyncTimeout as e:
        raise TuneAborted(f"tuning stopped at {loop.where} on rank {runner.rank}: {e}",
                          e.ranks[0]) from e
    except SyncError as e:
        raise TuneError(f"tuning stopped at {loop.where} on rank {runner.rank}: {e}") from e
    if show_summary:
        print(loop.result.summary(), flush=True)
    return loop.result
