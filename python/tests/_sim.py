"""Simulated ranks for the sync and tuner tests: each rank is a spawned process on 127.0.0.1.

run_ranks() starts rank 0 (HostSync on port 0), hands its port to the other ranks, runs one
named scenario on every rank and collects what each returned or raised, with a hard deadline:
a rank that does not report in time fails the test instead of hanging it (and every child also
kills itself after HARD_LIMIT_S). ScriptedRunner is the tuner's Runner test double.
"""
from __future__ import annotations

import faulthandler
import multiprocessing as mp
import os
import queue
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from mscclrt._sync import MISSING, HostSync                      # noqa: E402
from mscclrt._tuner import (Candidate, CandidateError, CandidateTimeout, TuneEvent,  # noqa: E402
                            tune)

HARD_LIMIT_S = 60.0


@dataclass
class Report:
    rank: int
    value: Any = None              # what the scenario returned
    exc: dict[str, Any] | None = None   # {"type", "msg", "rank", "ranks"} if it raised
    exitcode: int | None = None    # set when the process died without reporting
    elapsed: float = 0.0           # seconds from the scenario's start to its end, in the child


def _describe(e: BaseException) -> dict[str, Any]:
    return {"type": type(e).__name__, "msg": str(e), "rank": getattr(e, "rank", None),
            "ranks": getattr(e, "ranks", None)}


def _child(scenario: str, rank: int, world: int, port: int, args: dict[str, Any],
           q: Any, job_key: str) -> None:
    faulthandler.dump_traceback_later(HARD_LIMIT_S, exit=True)
    sync = HostSync(rank, world, "127.0.0.1", port, timeout=args.get("sync_timeout", 10.0),
                    job_key=job_key)
    if rank == 0:
        q.put(("port", 0, sync.port))
    t0 = time.monotonic()
    try:
        value = SCENARIOS[scenario](sync, args)
        q.put(("done", rank, Report(rank, value, elapsed=time.monotonic() - t0)))
    except Exception as e:   # reported to the parent, which asserts on it
        q.put(("done", rank, Report(rank, exc=_describe(e), elapsed=time.monotonic() - t0)))
    finally:
        sync.close()


def run_ranks(scenario: str, world: int, args: dict[str, Any] | None = None,
              deadline_s: float = 30.0, job_key: str = "test-job",
              with_port: Callable[[int], None] | None = None) -> dict[int, Report]:
    """Runs scenario on `world` ranks; returns rank -> Report. with_port(port) runs in this
    process once rank 0 listens (for strangers). Fails (AssertionError) past deadline_s."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    a = dict(args or {})
    end = time.monotonic() + deadline_s
    procs = {0: ctx.Process(target=_child, args=(scenario, 0, world, 0, a, q, job_key))}
    procs[0].start()
    reports: dict[int, Report] = {}
    try:
        kind, _, port = q.get(timeout=deadline_s)
        assert kind == "port", kind
        for r in range(1, world):
            procs[r] = ctx.Process(target=_child, args=(scenario, r, world, port, a, q, job_key))
            procs[r].start()
        if with_port is not None:
            with_port(port)
        dead_since: dict[int, float] = {}
        while len(reports) < world:
            left = end - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{scenario}: ranks {sorted(set(procs) - set(reports))} "
                                     f"did not finish within {deadline_s} s")
            try:
                kind, r, rep = q.get(timeout=min(0.1, left))
                reports[r] = rep
            except queue.Empty:
                pass
            now = time.monotonic()
            for r, p in procs.items():
                # a process that exited without a report (os._exit) gets one after a grace
                # period, in case its report is still in the queue's pipe
                if r not in reports and p.exitcode is not None:
                    if now - dead_since.setdefault(r, now) > 0.5:
                        reports[r] = Report(r, exitcode=p.exitcode)
    finally:
        for p in procs.values():
            p.join(timeout=max(0.1, min(5.0, end - time.monotonic())))
            if p.is_alive():
                p.kill()
                p.join()
    return reports


# ---- sync scenarios -----------------------------------------------------------------------------

def sc_basic(sync: HostSync, args: dict[str, Any]) -> dict[str, Any]:
    r, n = sync.rank, sync.world_size
    got = sync.allgather({"rank": r, "sq": r * r})
    b0 = sync.broadcast(f"from 0 to {n}" if r == 0 else None, root=0)
    bl = sync.broadcast([r, "last"] if r == n - 1 else None, root=n - 1)
    missing = sync.barrier()
    again = sync.allgather(r + 100)
    return {"gather": got, "b0": b0, "blast": bl, "barrier": missing, "again": again,
            "round": sync.last_round.round if sync.last_round else None}


def sc_late(sync: HostSync, args: dict[str, Any]) -> dict[str, Any]:
    sync.barrier(timeout=20.0)                       # everyone is connected
    if sync.rank == args["late"]:
        time.sleep(args["delay"])
    got = sync.allgather(sync.rank, timeout=args["round_timeout"])
    info = sync.last_round
    assert info is not None
    t0 = time.monotonic()
    after = sync.barrier(timeout=20.0)
    return {"gather": got, "late": info.late, "missing": info.missing, "round": info.round,
            "after": after, "after_wait": time.monotonic() - t0}


def sc_die(sync: HostSync, args: dict[str, Any]) -> dict[str, Any]:
    sync.barrier(timeout=20.0)
    if sync.rank == args["victim"]:
        os._exit(7)
    sync.allgather(sync.rank, timeout=args["round_timeout"])
    return {"unexpected": "allgather returned"}


def sc_die_then_more(sync: HostSync, args: dict[str, Any]) -> dict[str, Any]:
    """After a PeerDead, the object stays broken: the next call re-raises it."""
    try:
        sc_die(sync, args)
    except Exception as first:
        try:
            sync.barrier(timeout=1.0)
        except Exception as second:
            return {"first": _describe(first), "second": _describe(second)}
    return {"unexpected": "no error"}


def sc_stranger_job(sync: HostSync, args: dict[str, Any]) -> dict[str, Any]:
    # rank 0 serves connections only inside operations: keep it in one while strangers try
    if sync.rank == 1:
        time.sleep(args["rank1_delay"])
    return {"gather": sync.allgather(sync.rank, timeout=20.0)}


# ---- the tuner's runner double and scenarios ------------------------------------------------------

class ScriptedRunner:
    """A Runner whose timings come from a script: {label: {rank: behaviour}}; a label or rank
    not in it takes the default time. A behaviour is seconds (float), "error:<msg>",
    "timeout" (sleeps to the deadline, raises CandidateTimeout), "block:<s>" (time() itself
    sleeps s seconds, then returns 1 µs) or "die" (the process exits)."""

    def __init__(self, rank: int, world_size: int, cands: list[list[Any]],
                 script: dict[str, dict[int, Any]], default_s: float = 50e-6) -> None:
        self.rank, self.world_size = rank, world_size
        self.cands = [Candidate(*c) for c in cands]
        self.script, self.default_s = script, default_s
        self.uids_made: list[bytes] = []
        self.recovered: list[bytes] = []

    def candidates(self, collective: str, nbytes: int, dtype: str) -> list[Candidate]:
        return list(self.cands)

    def time(self, cand: Candidate, collective: str, nbytes: int, dtype: str, op: str,
             deadline_s: float) -> float:
        how = self.script.get(cand.label, {}).get(self.rank, self.default_s)
        if isinstance(how, (int, float)):
            return how * (1 + nbytes / 1e6)          # bigger messages are slower
        if how.startswith("error:"):
            raise CandidateError(how[6:])
        if how == "timeout":
            time.sleep(deadline_s)
            raise CandidateTimeout(f"no completion after {deadline_s:g} s")
        if how.startswith("block:"):
            time.sleep(float(how[6:]))
            return 1e-6
        if how == "die":
            os._exit(9)
        raise ValueError(f"bad script behaviour {how!r}")

    def new_unique_id(self) -> bytes:
        assert self.rank == 0, "new_unique_id() called on a rank other than 0"
        uid = f"uid-{len(self.uids_made)}".encode()
        self.uids_made.append(uid)
        return uid

    def recover(self, unique_id: bytes) -> None:
        self.recovered.append(unique_id)


def sc_tune(sync: HostSync, args: dict[str, Any]) -> dict[str, Any]:
    sync.barrier(timeout=20.0)                       # all spawned and connected
    runner = ScriptedRunner(sync.rank, sync.world_size, args["cands"],
                            {k: {int(r): v for r, v in d.items()}
                             for k, d in args.get("script", {}).items()})
    warnings: list[str] = []
    events: list[str] = []

    def progress(ev: TuneEvent) -> None:
        events.append(f"{ev.kind} {ev.collective} {ev.nbytes} "
                      f"{ev.candidate.label if ev.candidate else '-'}")
    try:
        res = tune(runner, sync, args.get("collectives", ["allreduce"]), args["min_bytes"],
                   args["max_bytes"], timeout_s=args["timeout_s"], progress=progress,
                   log=warnings.append)
    except Exception as e:
        return {"error": _describe(e), "warnings": warnings,
                "recovered": [u.decode() for u in runner.recovered]}
    return {"winners": [(c, n, w.label, t) for c, n, w, t in res.winners],
            "dropped": [(d.collective, d.nbytes, d.candidate.label, list(d.reasons))
                        for d in res.dropped],
            "warnings": warnings, "events": events,
            "recovered": [u.decode() for u in runner.recovered],
            "uids_made": [u.decode() for u in runner.uids_made],
            "entries": [e.to_json() for e in res.table_entries(sync.world_size, sync.world_size,
                                                                 90)],
            "summary": res.summary()}


SCENARIOS: dict[str, Callable[[HostSync, dict[str, Any]], Any]] = {
    "basic": sc_basic, "late": sc_late, "die": sc_die, "die_then_more": sc_die_then_more,
    "stranger_job": sc_stranger_job, "tune": sc_tune,
}

__all__ = ["MISSING", "Report", "ScriptedRunner", "run_ranks"]
