"""Autotuning on GPUs: mscclrt.tune(...) and the mscclrt-tune command.

For each power-of-two size in a range, every applicable algorithm (registered ones and the
communicator's default collection) x block count x thread count is timed by CUDA-graph replay;
the loop itself (_tuner.py) agrees on every candidate across ranks (barrier with a timeout
before it, the maximum time over ranks, a candidate that fails, errs or times out anywhere
dropped everywhere, a communicator rebuilt after a hang) and the winners go to the tuning table
(_table.py) that the default selector reads (MSCCLRT_TUNING_FILE; mscclrt.load_tuning_table
applies it in the running process).

Device buffers, streams and graphs come from PyTorch (torch.cuda), which this module needs.
"""
from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from typing import Any, Callable, Optional, Sequence

from . import _lib
from ._launch import comm_from_launcher
from ._sync import HostSync
from ._table import write_table
from ._tuner import Candidate, CandidateError, CandidateTimeout, TuneResult
from ._tuner import tune as _tune_loop
from .algorithm import (Algorithm, Request, default_algorithms, per_rank_bytes,
                        registered_algorithms)
from .comm import CommGroup, UniqueId
from .types import (Collective, DataType, ReduceOp, mscclrt_dtype_to_torch_dtype, parse_dtype,
                    parse_op, torch_dtype_to_mscclrt_dtype)

DEFAULT_BLOCKS = (4, 8, 16, 32)
DEFAULT_THREADS = (256, 512, 1024)


def _torch():
    try:
        import torch
    except ImportError as e:
        raise RuntimeError("mscclrt tuning needs PyTorch (device buffers and CUDA graphs)") from e
    return torch


# the data types tuned (device buffers are filled with ones)
TUNABLE_DTYPES = (DataType.float16, DataType.bfloat16, DataType.float32, DataType.float64,
                  DataType.int32, DataType.int64, DataType.int8, DataType.uint8)


class GpuRunner:
    """Times candidates on one rank's communicator (the _tuner.Runner protocol)."""

    def __init__(self, comm: CommGroup, blocks: Sequence[int] = DEFAULT_BLOCKS,
                 threads: Sequence[int] = DEFAULT_THREADS, iters_per_graph: int = 10,
                 replays: int = 5, extra: Sequence[Algorithm] = (),
                 make_buffers: Optional[Callable[[], Any]] = None,
                 on_new_comm: Optional[Callable[[CommGroup], None]] = None):
        self.comm = comm
        self.rank, self.world_size = comm.rank, comm.size
        self.blocks, self.threads = tuple(blocks), tuple(threads)
        self.iters, self.replays = iters_per_graph, replays
        self.extra = list(extra)
        self.make_buffers = make_buffers
        self.on_new_comm = on_new_comm
        self._algos: dict[str, Algorithm] = {}
        torch = _torch()
        self.device = torch.device("cuda", comm.device)
        self._arch = 10 * torch.cuda.get_device_capability(self.device)[0] + \
            torch.cuda.get_device_capability(self.device)[1]

    def algorithm(self, name: str) -> Algorithm:
        """The algorithm called name on the current communicator (default algorithms belong to
        a communicator: after recover() they are looked up again on the new one)."""
        a = self._algos.get(name)
        if a is None:
            coll = None
            for c in Collective:
                if any(x.name == name for x in self._all_algos(c.name)):
                    coll = c.name
                    break
            if coll is None:
                raise CandidateError(f"no algorithm named {name!r} on this communicator")
            for x in self._all_algos(coll):
                self._algos.setdefault(x.name, x)
            a = self._algos[name]
        return a

    def _all_algos(self, coll: str) -> list[Algorithm]:
        seen, out = set(), []
        for a in list(self.extra) + list(registered_algorithms(coll)) + \
                list(default_algorithms(self.comm, coll)):
            if a.collective == coll and a.name not in seen:
                seen.add(a.name)
                out.append(a)
        return out

    def candidates(self, collective: str, nbytes: int, dtype: str) -> list[Candidate]:
        ib, ob = per_rank_bytes(collective, nbytes, self.world_size)
        req = Request.make(collective, nbytes, dtype=dtype, world_size=self.world_size,
                           ranks_per_node=self.comm.nranks_per_node, arch=self._arch,
                           in_place=collective in ("allreduce",), input_size=ib, output_size=ob)
        out: list[Candidate] = []
        for a in self._all_algos(collective):
            ok, _ = a.fits(req)
            if not ok:
                continue
            self._algos[a.name] = a
            if a.kind == "plan":
                out.append(Candidate(a.name))    # a plan fixes its own launch
            else:
                out.append(Candidate(a.name))
                out += [Candidate(a.name, b, t) for b in self.blocks for t in self.threads]
        return out

    def _buffers(self, collective: str, nbytes: int, dtype: str):
        torch = _torch()
        ib, ob = per_rank_bytes(collective, nbytes, self.world_size)
        dt = parse_dtype(dtype)
        if dt not in TUNABLE_DTYPES:
            raise KeyError(dt)
        tdt = mscclrt_dtype_to_torch_dtype(dt)
        es = torch.tensor([], dtype=tdt).element_size()
        inp = torch.ones((max(1, ib // es),), dtype=tdt, device=self.device)
        if collective == "allreduce":
            return inp, inp, ib, ob          # in place, as PyTorch calls it
        return inp, torch.empty((max(1, ob // es),), dtype=tdt, device=self.device), ib, ob

    def _wait(self, ev: Any, deadline: float, what: str) -> None:
        while not ev.query():
            if time.monotonic() > deadline:
                self.comm.revoke()           # the kernels give up; the comm is rebuilt later
                raise CandidateTimeout(f"{what}: not finished after the deadline")
            time.sleep(0.0005)

    def time(self, cand: Candidate, collective: str, nbytes: int, dtype: str, op: str,
             deadline_s: float) -> float:
        torch = _torch()
        deadline = time.monotonic() + deadline_s
        algo = self.algorithm(cand.algorithm)
        inp, out, ib, ob = self._buffers(collective, nbytes, dtype)
        opv = parse_op(op)
        s = torch.cuda.Stream(self.device)

        def once() -> None:
            algo.execute(self.comm, inp.data_ptr(), out.data_ptr(), ib, ob, dtype, opv,
                         s.cuda_stream, cand.blocks, cand.threads)
        try:
            s.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(s):
                once()                          # setup (collective) and warm-up, eagerly
                ev = torch.cuda.Event()
                ev.record(s)
            self._wait(ev, deadline, cand.label)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, stream=s):
                for _ in range(self.iters):
                    once()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            with torch.cuda.stream(s):
                g.replay()                      # warm replay
                start.record(s)
                for _ in range(self.replays):
                    g.replay()
                end.record(s)
            self._wait(end, deadline, cand.label)
            return start.elapsed_time(end) / 1e3 / (self.replays * self.iters)
        except CandidateTimeout:
            raise
        except _lib.MscclrtError as e:
            raise CandidateError(str(e)) from e
        except RuntimeError as e:              # torch's CUDA errors (capture refused, ...)
            raise CandidateError(f"{type(e).__name__}: {e}") from e

    def new_unique_id(self) -> bytes:
        return bytes(UniqueId.new())

    def recover(self, unique_id: bytes) -> None:
        old = self.comm
        try:
            old.abort()
        except _lib.MscclrtError:
            pass            # a comm that cannot even abort is left behind; a new one serves
        self.comm = CommGroup.from_unique_id(unique_id, self.rank, self.world_size,
                                             old.device)
        self._algos.clear()
        if self.on_new_comm:
            self.on_new_comm(self.comm)


def _master_addr() -> str:
    for v in ("MSCCLRT_MASTER_ADDR", "MASTER_ADDR"):
        if os.environ.get(v):
            return os.environ[v]
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def host_sync_for(comm: CommGroup, timeout: float) -> HostSync:
    """A HostSync among comm's ranks: rank 0 listens on an ephemeral port and its address goes
    to the others over the communicator's bootstrap."""
    import json
    if comm.rank == 0:
        hs = HostSync(0, comm.size, "0.0.0.0", 0, timeout=timeout, job_key="mscclrt-tune")
        msg = json.dumps({"addr": _master_addr(), "port": hs.port}).encode().ljust(256, b"\0")
        comm.host_broadcast(msg, 0)
        return hs
    got = comm.host_broadcast(b"\0" * 256, 0).rstrip(b"\0")
    where = json.loads(got.decode())
    return HostSync(comm.rank, comm.size, where["addr"], int(where["port"]), timeout=timeout,
                    job_key="mscclrt-tune")


def tune(comm: CommGroup, collectives: Sequence[str] = ("allreduce",), min_bytes: int = 1 << 10,
         max_bytes: int = 1 << 27, dtype: str = "bfloat16", op: str = "sum",
         timeout_s: float = 10.0, table: Optional[str] = None, apply: bool = True,
         blocks: Sequence[int] = DEFAULT_BLOCKS, threads: Sequence[int] = DEFAULT_THREADS,
         iters_per_graph: int = 10, replays: int = 5, extra: Sequence[Algorithm] = (),
         progress: Any = None, runner: Optional[GpuRunner] = None) -> TuneResult:
    """Tunes collectives on comm (every rank calls it) and, with table=, writes the winners to
    that tuning table (merged with what it holds) and, with apply, loads it in this process.
    Returns the TuneResult; result.comm is the communicator to use afterwards (a new one when a
    candidate hung and the communicator had to be rebuilt)."""
    r = runner or GpuRunner(comm, blocks, threads, iters_per_graph, replays, extra)
    sync = host_sync_for(comm, timeout_s)
    try:
        res = _tune_loop(r, sync, list(collectives), min_bytes, max_bytes, dtype, op,
                         timeout_s, progress)
    finally:
        sync.close()
    res.comm = r.comm  # type: ignore[attr-defined]
    if table:
        torch = _torch()
        cap = torch.cuda.get_device_capability(r.device)
        entries = res.table_entries(r.world_size, r.comm.nranks_per_node, cap[0] * 10 + cap[1],
                                    dtype, op)
        if r.rank == 0:
            write_table(table, entries, meta={"tuner": "mscclrt.tune", "date":
                                              time.strftime("%Y-%m-%d %H:%M:%S")})
        _barrier_file(r.comm, table)
        if apply:
            from .algorithm import load_tuning_table
            load_tuning_table(table)
    return res


def _barrier_file(comm: CommGroup, path: str) -> None:
    """Every rank waits until rank 0 wrote the table (a host broadcast is the barrier)."""
    comm.host_broadcast(b"\1" if comm.rank == 0 else b"\0", 0)


def tune_shape(comm: CommGroup, coll: str, nbytes: int, dtype: Any, op: int,
               make_buffers: Any = None, timeout_s: float = 10.0) -> Any:
    """Tunes one (collective, size, dtype) for the torch.compile ops; returns (algorithm,
    blocks, threads) or None when no candidate could be timed."""
    try:
        dt = torch_dtype_to_mscclrt_dtype(dtype)
    except TypeError:
        return None
    if dt not in TUNABLE_DTYPES or str(dtype) == "torch.bool":
        return None
    dname = dt.name
    opname = ReduceOp(op).name.lower() if 0 <= op < 5 else "sum"
    r = GpuRunner(comm, blocks=(8, 16, 32), threads=(512, 1024), iters_per_graph=5, replays=3)
    res = tune(comm, [coll], nbytes, nbytes, dname, opname, timeout_s, runner=r,
               progress=lambda ev: None)
    for c, n, cand, _t in res.winners:
        if c == coll:
            return r.algorithm(cand.algorithm), cand.blocks, cand.threads
    return None


# ---- the command ----------------------------------------------------------------------------------

def _size(s: str) -> int:
    s = s.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if s and s[-1] in mult:
        return int(float(s[:-1]) * mult[s[-1]])
    if s.endswith("B"):
        return _size(s[:-1])
    return int(s)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="mscclrt-tune",
        description="Autotune collectives across the ranks of a job (torchrun or mpirun: one "
                    "process per rank) and write the tuning table the default selector reads.")
    p.add_argument("-c", "--collectives", default="allreduce",
                   help="comma-separated: allreduce,allgather,reducescatter,broadcast,alltoall")
    p.add_argument("-b", "--min-bytes", type=_size, default=1 << 10, help="smallest size (1K)")
    p.add_argument("-e", "--max-bytes", type=_size, default=1 << 27, help="largest size (128M)")
    p.add_argument("-d", "--dtype", default="bfloat16")
    p.add_argument("-o", "--op", default="sum")
    p.add_argument("--blocks", default=",".join(map(str, DEFAULT_BLOCKS)))
    p.add_argument("--threads", default=",".join(map(str, DEFAULT_THREADS)))
    p.add_argument("--timeout", type=float, default=10.0,
                   help="seconds a candidate and each agreement may take (10)")
    p.add_argument("--table", default=os.environ.get("MSCCLRT_TUNING_FILE") or "mscclrt-tune.json",
                   help="the tuning table to write or merge into (MSCCLRT_TUNING_FILE)")
    p.add_argument("--coll-file", action="append", default=[],
                   help="also tune this .coll program (compiled with -D N=<ranks>); repeatable")
    p.add_argument("--device", type=int, default=None, help="CUDA device (default: local rank)")
    a = p.parse_args(argv)
    a.collectives = [c.strip() for c in a.collectives.split(",") if c.strip()]
    for c in a.collectives:
        try:
            Collective[c]
        except KeyError:
            p.error(f"unknown collective '{c}'")
    try:
        a.blocks = [int(x) for x in a.blocks.split(",") if x]
        a.threads = [int(x) for x in a.threads.split(",") if x]
    except ValueError:
        p.error("--blocks and --threads take comma-separated integers")
    if a.min_bytes <= 0 or a.max_bytes < a.min_bytes:
        p.error(f"need 0 < --min-bytes <= --max-bytes (got {a.min_bytes}, {a.max_bytes})")
    if a.timeout <= 0:
        p.error("--timeout must be positive")
    return a


def main(argv: Optional[Sequence[str]] = None) -> int:
    a = parse_args(argv)
    torch = _torch()
    local = int(os.environ.get("LOCAL_RANK", os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", "0")))
    dev = a.device if a.device is not None else local % max(1, torch.cuda.device_count())
    torch.cuda.set_device(dev)
    # under torchrun, MASTER_PORT is torchrun's own store: join through it (_launch.py)
    comm = comm_from_launcher(dev, timeout_s=max(300.0, 6 * a.timeout))
    extra = []
    from .compiler import compile as _compile
    for f in a.coll_file:
        extra.append(Algorithm.from_plan(_compile(f, params={"N": comm.size}, rank=comm.rank)))
    try:
        res = tune(comm, a.collectives, a.min_bytes, a.max_bytes, a.dtype, a.op, a.timeout,
                   table=a.table, apply=False, blocks=a.blocks, threads=a.threads, extra=extra)
    except Exception as e:
        print(f"mscclrt-tune: rank {comm.rank}: {e}", file=sys.stderr)
        return 1
    if comm.rank == 0:
        print(f"mscclrt-tune: {len(res.winners)} winners written to {a.table}")
    res.comm.destroy()  # type: ignore[attr-defined]
    return 0


if __name__ == "__main__":
    sys.exit(main())
