"""The CPU reference backend: a group of host "ranks" (one thread each, in this process) that runs
any plan over host buffers with the plan format's intended semantics. For checking plans and
algorithms without a GPU (CI, and users writing .coll programs on a laptop)."""
from __future__ import annotations

import ctypes
from ctypes import byref, c_void_p
from typing import Any, Optional, Sequence

from . import _lib
from ._ints import c_int_arg, size_arg
from .compiler import Plan
from .types import DataType, ReduceOp, parse_dtype, parse_op


def _host_address(buf: Any, what: str) -> tuple[int, int, Any]:
    """(address, bytes, keeper) of a writable host buffer: bytearray, memoryview, ctypes array,
    or an object with the buffer protocol (numpy arrays). Never an int: the CPU backend reads
    and writes the memory, and an integer taken as an address crashed the interpreter."""
    if isinstance(buf, ctypes.Array):
        return ctypes.addressof(buf), ctypes.sizeof(buf), buf
    try:
        mv = memoryview(buf)
    except TypeError:
        raise TypeError(f"mscclrt.cpu: {what} must be a writable buffer (bytearray, numpy "
                        f"array, ctypes array...), not {type(buf).__name__}") from None
    if mv.readonly:
        raise TypeError("mscclrt.cpu: buffers must be writable (bytearray, numpy array, ...)")
    if not mv.c_contiguous:
        raise TypeError("mscclrt.cpu: buffers must be contiguous")
    if mv.nbytes == 0:
        return 0, 0, None
    arr = (ctypes.c_char * mv.nbytes).from_buffer(mv.cast("B"))
    return ctypes.addressof(arr), mv.nbytes, arr


class CpuComm:
    """nranks host ranks; contexts persist between calls as on a GPU."""

    def __init__(self, nranks: int):
        self._h = None
        n = c_int_arg(nranks, "CpuComm nranks", 1)
        h = c_void_p()
        _lib.check(_lib.runtime().mscclrt_cpu_comm_create(byref(h), n),
                   "mscclrt_cpu_comm_create")
        self._h = h.value
        self.nranks = n

    def execute(self, plan: Plan, send: Sequence[Any], recv: Sequence[Any], in_bytes: int,
                out_bytes: int, dtype: Any = DataType.float32, op: Any = ReduceOp.SUM,
                packet: int = 0) -> None:
        """One call of plan on every rank: send[r]/recv[r] are rank r's buffers (recv may be send
        for in-place plans). Raises MscclrtError naming the rank, block and op on failure."""
        if not self._h:
            raise RuntimeError("mscclrt.cpu: the communicator was destroyed")
        in_bytes = size_arg(in_bytes, "in_bytes")
        out_bytes = size_arg(out_bytes, "out_bytes")
        packet = c_int_arg(packet, "packet")
        if len(send) != self.nranks or len(recv) != self.nranks:
            raise ValueError(f"mscclrt.cpu: need {self.nranks} send and recv buffers, got "
                             f"{len(send)} and {len(recv)}")
        keep = []
        sp = (c_void_p * self.nranks)()
        rp = (c_void_p * self.nranks)()
        for r in range(self.nranks):
            for arr, buf, need, kind in ((sp, send[r], in_bytes, "send"),
                                         (rp, recv[r], out_bytes, "recv")):
                a, n, k = _host_address(buf, f"rank {r}'s {kind} buffer")
                if n < need:
                    raise ValueError(f"mscclrt.cpu: rank {r}'s buffer has {n} bytes, the call "
                                     f"needs {need}")
                arr[r] = a or None
                keep.append(k)
        r = _lib.runtime().mscclrt_cpu_execute(self._h, plan.handle, sp, rp, in_bytes,
                                               out_bytes, int(parse_dtype(dtype)),
                                               parse_op(op), packet)
        _lib.check(r, f"cpu execute of {plan.name}")

    def close(self) -> None:
        if self._h:
            _lib.runtime().mscclrt_cpu_comm_destroy(self._h)
            self._h = None

    def __enter__(self) -> "CpuComm":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


class _CheckC(ctypes.Structure):
    """struct mscclrt_gpu_check (mscclrt.h), which the CPU check takes too."""
    _fields_ = [("bytes", ctypes.c_size_t), ("dtype", ctypes.c_int), ("op", ctypes.c_int),
                ("packet", ctypes.c_int), ("inplace", ctypes.c_int), ("iters", ctypes.c_int),
                ("graph_iters", ctypes.c_int), ("seed", ctypes.c_uint64), ("cumem", ctypes.c_int)]


def check_cpu(plan: Any, ranks: Optional[int] = None, size: Optional[int] = None,
              dtype: Any = DataType.float32, op: Any = ReduceOp.SUM,
              inplace: Optional[bool] = None, packet: int = 0, iters: int = 1,
              seed: int = 1) -> float:
    """Runs `plan` (a Plan, or a path to its JSON) on the CPU reference backend and checks every
    rank's output against the host reference, as `mscclrt-run PLAN --backend cpu --check` does.
    size: the message in bytes as nccl-tests counts it (default: the plan's smallest); 0 is an
    empty call. ranks, if given, must be the plan's. inplace: default the plan's. packet: 0 LL16,
    1 LL8. Returns the mean time per call in microseconds; raises MscclrtError on a wrong result,
    naming the rank, element, values, the chunk and the ops that write it."""
    if not isinstance(plan, Plan):
        plan = Plan.load(plan)
    n = plan.nranks if ranks is None else int(ranks)
    if n != plan.nranks:
        raise ValueError(f"mscclrt.check_cpu: ranks={n}, but plan {plan.name!r} is for "
                         f"{plan.nranks} ranks")
    rt = _lib.runtime()
    if size is None:
        b = ctypes.c_size_t()
        _lib.check(rt.mscclrt_plan_min_bytes(plan.handle, byref(b)), "mscclrt_plan_min_bytes")
        size = b.value
    c = _CheckC(bytes=int(size), dtype=int(parse_dtype(dtype)), op=int(parse_op(op)),
                packet=int(packet), inplace=int(plan.inplace if inplace is None else bool(inplace)),
                iters=int(iters), graph_iters=0, seed=int(seed), cumem=0)
    us = ctypes.c_double()
    _lib.check(rt.mscclrt_cpu_check_plan(plan.handle, n, ctypes.addressof(c), byref(us)),
               f"cpu check of {plan.name}")
    return us.value


__all__ = ["CpuComm", "check_cpu"]
