"""tune() on simulated ranks (spawned processes with scripted runners): the max-over-ranks
winner identical everywhere, candidates that err, time out, block or kill their rank dropped
everywhere with warnings naming them, recovery with one id, and the table entries."""
from __future__ import annotations

import json
from typing import Any

import pytest

from _sim import run_ranks
from mscclrt import _table
from mscclrt._tuner import Candidate, TuneResult, _sizes

CANDS = [["A", 0, 0], ["B", 16, 512], ["C", 8, 256]]
A, B, C = "A", "B b=16 t=512", "C b=8 t=256"          # their labels, which scripts are keyed by


def tune_on(world: int, script: dict, timeout_s: float = 1.0, min_bytes: int = 1024,
            max_bytes: int = 2048, cands: list = CANDS, deadline_s: float = 40.0) -> dict:
    reps = run_ranks("tune", world, {"cands": cands, "script": script, "timeout_s": timeout_s,
                                     "min_bytes": min_bytes, "max_bytes": max_bytes},
                     deadline_s=deadline_s)
    out = {}
    for r, rep in reps.items():
        assert rep.exc is None, (r, rep.exc)
        out[r] = rep.value if rep.value is not None else {"exitcode": rep.exitcode}
    return out


def same_everywhere(vals: dict, key: str, ranks: list[int] | None = None) -> Any:
    ranks = ranks if ranks is not None else sorted(vals)
    first = vals[ranks[0]][key]
    for r in ranks[1:]:
        assert vals[r][key] == first, (key, r, vals[r][key], first)
    return first


def test_consensus_picks_max_over_ranks_winner() -> None:
    # A is fastest on two ranks but slow on rank 2: its max (100 µs) loses to B (40 µs)
    script = {A: {0: 10e-6, 1: 10e-6, 2: 100e-6}, B: {0: 40e-6, 1: 40e-6, 2: 40e-6},
              C: {0: 20e-6, 1: 60e-6, 2: 20e-6}}
    v = tune_on(3, script)
    winners = same_everywhere(v, "winners")
    assert [(c, n, w) for c, n, w, _ in winners] == [("allreduce", 1024, "B b=16 t=512"),
                                                     ("allreduce", 2048, "B b=16 t=512")]
    assert winners[0][3] == pytest.approx(40e-6 * (1 + 1024 / 1e6))
    assert same_everywhere(v, "dropped") == []
    assert v[0]["recovered"] == [] and v[0]["uids_made"] == []
    # B won both sizes: one entry for every size, in a table the reader accepts
    entries = same_everywhere(v, "entries")
    assert entries == [{"collective": "allreduce", "world_size": 3, "ranks_per_node": 3,
                        "arch": 90, "dtype": "bfloat16", "op": "sum", "min_bytes": 0,
                        "max_bytes": 0, "algorithm": "B", "blocks": 16, "threads": 512}]
    assert _table.validate_text(json.dumps({"version": 1, "entries": entries}).encode(),
                                "tuned") == 1
    s = v[0]["summary"]
    assert "B b=16 t=512" in s and "C b=8 t=256 (60.1 µs)" in s and "1.50x" in s
    assert v[0]["events"].count("size allreduce 1024 -") == 1


def test_candidate_that_errs_on_one_rank_is_dropped_everywhere() -> None:
    script = {A: {0: 10e-6, 1: "error:out of shared memory", 2: 10e-6}}
    v = tune_on(3, script)
    dropped = same_everywhere(v, "dropped")
    assert [(d[1], d[2], d[3]) for d in dropped] == [
        (n, "A", [(1, "failed: out of shared memory")]) for n in (1024, 2048)]
    for r in range(3):
        warn = [w for w in v[r]["warnings"] if "dropped" in w]
        assert warn[0] == ("allreduce 1 KiB: dropped 'A' (rank 1: failed: out of shared "
                           "memory)"), warn
        assert v[r]["recovered"] == []                   # an error does not wedge anything
    assert [w[2] for w in same_everywhere(v, "winners")] == ["B b=16 t=512"] * 2


def test_candidate_timing_out_on_one_rank_is_dropped_and_all_recover() -> None:
    v = tune_on(3, {B: {2: "timeout"}}, timeout_s=0.5)
    dropped = same_everywhere(v, "dropped")
    assert [(d[2], d[3][0][0]) for d in dropped] == [("B b=16 t=512", 2)] * 2
    assert "timed out: no completion after 0.5 s" in dropped[0][3][0][1]
    # one recovery per timeout, with the ids rank 0 made, on every rank
    assert v[0]["uids_made"] == ["uid-0", "uid-1"]
    assert same_everywhere(v, "recovered") == ["uid-0", "uid-1"]
    assert all("dropped 'B b=16 t=512' (rank 2: timed out" in "".join(v[r]["warnings"])
               for r in range(3))
    assert [w[2] for w in same_everywhere(v, "winners")] == ["A", "A"]


def test_rank_blocked_in_time_is_missing_dropped_and_all_recover() -> None:
    # rank 1's time() itself overruns: it reaches the allgather long after the round's timeout
    v = tune_on(3, {C: {1: "block:2.5"}}, timeout_s=0.4, max_bytes=1024)
    dropped = same_everywhere(v, "dropped")     # the late rank sees the same decision
    assert len(dropped) == 1 and dropped[0][2] == "C b=8 t=256"
    assert dropped[0][3][0][0] == 1 and dropped[0][3][0][1].startswith("missing from round")
    assert v[0]["uids_made"] == ["uid-0"]
    assert same_everywhere(v, "recovered") == ["uid-0"]
    assert "rank 1: missing from round" in "".join(v[1]["warnings"])
    assert same_everywhere(v, "winners")[0][2] == "A"


def test_rank0_overrunning_its_deadline_is_waited_for_and_its_candidate_dropped() -> None:
    # rank 0 decides the rounds, so it is never missing: the others wait for it (up to twice
    # the round's timeout) and its own report says it overran
    v = tune_on(3, {A: {0: "block:1.2"}}, timeout_s=0.3, max_bytes=1024)
    dropped = same_everywhere(v, "dropped")
    assert len(dropped) == 1 and dropped[0][2] == "A"
    assert dropped[0][3][0][0] == 0
    assert "timed out: time() returned after 1.2" in dropped[0][3][0][1]
    assert "past the 0.3 s deadline" in dropped[0][3][0][1]
    assert same_everywhere(v, "recovered") == ["uid-0"]


@pytest.mark.parametrize("victim", [2, 0])
def test_dead_rank_stops_tuning_everywhere_naming_it(victim: int) -> None:
    v = tune_on(3, {B: {victim: "die"}}, timeout_s=1.0)
    assert v[victim] == {"exitcode": 9}
    for r in range(3):
        if r == victim:
            continue
        e = v[r]["error"]
        assert e["type"] == "TuneAborted" and e["rank"] == victim, e
        assert f"rank {victim} (" in e["msg"] and "allreduce 1 KiB 'B b=16 t=512'" in e["msg"]


def test_rank_missing_again_and_again_stops_tuning() -> None:
    cands = [["A"], ["B"], ["C"], ["D"], ["E"]]
    script = {c[0]: {1: "block:1.5"} for c in cands}
    v = tune_on(3, script, timeout_s=0.2, max_bytes=1024, cands=cands)
    for r in (0, 2):
        e = v[r]["error"]
        assert e["type"] == "TuneAborted" and e["rank"] == 1, e
        assert "rank 1 missed 3 candidates in a row" in e["msg"]
    assert v[1]["error"]["type"] == "TuneAborted"        # it learns too, one way or another


def test_sizes_and_labels() -> None:
    assert _sizes(1000, 5000) == [1024, 2048, 4096]
    assert _sizes(1024, 1024) == [1024]
    with pytest.raises(ValueError):
        _sizes(0, 10)
    assert Candidate("x").label == "x"
    assert Candidate("x", 16, 512).label == "x b=16 t=512"


def test_table_entries_and_summary_without_processes() -> None:
    a, b = Candidate("stdlib/allgather/packet"), Candidate("stdlib/allgather/fullmesh", 32, 1024)
    res = TuneResult("float16", "max")
    res.winners = [("allgather", 1024, a, 5e-6), ("allgather", 2048, a, 6e-6),
                   ("allgather", 4096, b, 9e-6)]
    res.timings = {("allgather", 1024): [(a, 5e-6), (b, 7e-6)], ("allgather", 2048): [(a, 6e-6)],
                   ("allgather", 4096): [(b, 9e-6), (a, 18e-6)]}
    es = res.table_entries(8, 8, 90)
    # allgather does not reduce: op "any"; the first winner covers [0, 2048], the last is open
    assert [(e.algorithm, e.min_bytes, e.max_bytes, e.op, e.dtype) for e in es] == [
        ("stdlib/allgather/packet", 0, 2048, "any", "float16"),
        ("stdlib/allgather/fullmesh", 2049, 0, "any", "float16")]
    lines = res.summary().splitlines()
    assert lines[0] == "allgather (float16, max):"
    assert lines[1].split("|")[0].strip() == "size"
    assert "4 KiB" in lines[-1] and "2.00x" in lines[-1] and "stdlib/allgather/packet (18.0 µs)" in lines[-1]
