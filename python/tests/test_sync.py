"""HostSync across real processes on 127.0.0.1: results, missing and late ranks, dead ranks,
strangers. Every test runs under run_ranks()'s hard deadline, so none can hang."""
from __future__ import annotations

import socket
import threading
import time

import pytest

from _sim import MISSING, run_ranks
from mscclrt._sync import HostSync, SyncRejected


@pytest.mark.parametrize("world", [2, 3, 4])
def test_allgather_broadcast_barrier(world: int) -> None:
    reps = run_ranks("basic", world)
    for r in range(world):
        rep = reps[r]
        assert rep.exc is None, rep.exc
        v = rep.value
        assert v["gather"] == [{"rank": k, "sq": k * k} for k in range(world)]
        assert v["b0"] == f"from 0 to {world}"
        assert v["blast"] == [world - 1, "last"]          # tuples come back as lists
        assert v["barrier"] == ()
        assert v["again"] == [k + 100 for k in range(world)]
        assert v["round"] == 5


@pytest.mark.parametrize("world,late", [(2, 1), (4, 2)])
def test_late_rank_is_missing_then_told_it_was_late(world: int, late: int) -> None:
    reps = run_ranks("late", world, {"late": late, "delay": 1.2, "round_timeout": 0.4})
    want = [MISSING if k == late else k for k in range(world)]
    for r in range(world):
        v = reps[r].value
        assert reps[r].exc is None, reps[r].exc
        assert v["gather"] == want                          # the same decision everywhere
        assert v["missing"] == (late,)
        assert v["late"] is (r == late)
        assert v["after"] == ()                             # it caught up for the next round
    # the late rank was answered from the decided round, without waiting for a new timeout
    assert reps[late].value["after_wait"] < 5.0


@pytest.mark.parametrize("world,victim", [(2, 1), (3, 2), (4, 1)])
def test_dead_rank_raises_peerdead_naming_it(world: int, victim: int) -> None:
    reps = run_ranks("die", world, {"victim": victim, "round_timeout": 8.0})
    assert reps[victim].exitcode == 7
    for r in range(world):
        if r == victim:
            continue
        e = reps[r].exc
        assert e is not None and e["type"] == "PeerDead", reps[r]
        assert e["rank"] == victim
        assert f"rank {victim} (" in e["msg"] and "closed its connection during round 2" in e["msg"]
        assert reps[r].elapsed < 8.0                     # noticed at once, not by timing out


@pytest.mark.parametrize("world", [2, 4])
def test_rank0_dead_raises_peerdead_rank0(world: int) -> None:
    reps = run_ranks("die", world, {"victim": 0, "round_timeout": 8.0})
    assert reps[0].exitcode == 7
    for r in range(1, world):
        e = reps[r].exc
        assert e is not None and e["type"] == "PeerDead" and e["rank"] == 0, reps[r]
        assert e["msg"].startswith("rank 0 (")
        assert reps[r].elapsed < 8.0


def test_after_peerdead_every_call_reraises() -> None:
    reps = run_ranks("die_then_more", 3, {"victim": 2, "round_timeout": 8.0})
    for r in (0, 1):
        v = reps[r].value
        assert v["first"]["type"] == v["second"]["type"] == "PeerDead", v
        assert v["second"]["rank"] == 2


def test_stranger_with_wrong_job_key_is_rejected() -> None:
    outcome: dict[str, object] = {}

    def stranger(port: int) -> None:
        def go() -> None:
            # a raw client that does not speak the protocol is dropped without harm
            with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
                raw.sendall(b"GET / HTTP/1.0\r\n\r\n")
            s = HostSync(1, 2, "127.0.0.1", port, timeout=3.0, job_key="another-job")
            try:
                s.barrier(timeout=3.0)
                outcome["result"] = "accepted"
            except SyncRejected as e:
                outcome["result"] = e
            finally:
                s.close()
        t = threading.Thread(target=go)
        t.start()
        t.join(timeout=10)
        assert not t.is_alive(), "the stranger hung"

    # the real rank 1 comes only after the stranger tried to take its place
    reps = run_ranks("stranger_job", 2, {"rank1_delay": 1.5}, with_port=stranger)
    e = outcome["result"]
    assert isinstance(e, SyncRejected), e
    assert "job key differs" in str(e) and "rejected this process (rank 1" in str(e)
    for r in (0, 1):
        assert reps[r].exc is None, reps[r].exc
        assert reps[r].value["gather"] == [0, 1]


def test_single_rank_and_bad_arguments() -> None:
    with HostSync(0, 1, "127.0.0.1", 0, timeout=1.0) as s:
        assert s.allgather("x") == ["x"]
        assert s.broadcast(3) == 3
        assert s.barrier() == ()
    with pytest.raises(ValueError, match="rank 2 is not in a world of 2"):
        HostSync(2, 2, "127.0.0.1", 0)


def test_unreachable_rank0_times_out() -> None:
    with socket.socket() as probe:                 # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    from mscclrt._sync import SyncTimeout
    t0 = time.monotonic()
    with pytest.raises(SyncTimeout, match="could not connect to rank 0") as ei:
        HostSync(1, 2, "127.0.0.1", port, timeout=0.5)
    assert ei.value.ranks == (0,)
    assert time.monotonic() - t0 < 3.0
