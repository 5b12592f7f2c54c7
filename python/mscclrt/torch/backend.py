"""backend="mscclrt" for torch.distributed: a Python ProcessGroup whose collectives run on a
libmscclrt communicator (CommGroup) through the algorithm API's selector.

Streams: an asynchronous operation (``async_op=True``) runs on the group's own stream after
waiting for the caller's current stream; its Work records an event there, and ``wait()`` makes
the caller's current stream wait for it (the host does not block, as with NCCL; barrier's wait
does block). Tensors are kept alive for the side stream (record_stream). A synchronous one
(``opts.asyncOp`` False, which torch.distributed sets for ``async_op=False``) runs on the
caller's current stream, as ProcessGroupNCCL does: no stream switch, event or record_stream,
which were most of an eager call's host time. libmscclrt orders a communicator's calls across
streams itself. All of this is legal inside CUDA-graph capture.

Point-to-point: send/recv are queued and launched together (one kernel) when any of their works
is waited on, when coalescing ends, or before the next collective, so isend/irecv pairs in any
order never deadlock on each other.
"""
from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any, Optional

import torch
import torch.distributed as dist

from .. import _lib
from .._buffers import current_stream_handle
from ..comm import CommGroup
from ..types import ReduceOp, torch_dtype_to_mscclrt_dtype

BACKEND_NAME = "mscclrt"
_UID_KEY = "mscclrt/unique_id"


# our operator per torch RedOpType met so far (PREMUL_SUM never: its factor makes each one its
# own); the comparisons below cost an eager call about 1 us each
_op_cache: dict = {}


def _op_of(op: Any) -> int:
    """Our operator for a torch ReduceOp (or RedOpType); PREMUL_SUM is _Premul's business."""
    R = dist.ReduceOp
    key = getattr(op, "op", op)
    for theirs, ours in ((R.SUM, ReduceOp.SUM), (R.PRODUCT, ReduceOp.PROD), (R.MAX, ReduceOp.MAX),
                         (R.MIN, ReduceOp.MIN), (R.AVG, ReduceOp.AVG)):
        if key == theirs or op == theirs:
            try:
                _op_cache[key] = int(ours)
            except TypeError:   # a key that cannot be hashed: no cache
                pass
            return int(ours)
    raise ValueError(f"backend mscclrt: reduction {op} is not supported (SUM, PRODUCT, MAX, MIN, "
                     "AVG, PREMUL_SUM; bitwise operators are not)")


def _cached_op(red: Any) -> Optional[int]:
    """_op_of's answer for red when it was asked before, else None."""
    try:
        return _op_cache.get(getattr(red, "op", red))
    except TypeError:
        return None


def _is_sync(opts: Any) -> bool:
    """Whether torch waits for the call at once (async_op=False): then it runs on the caller's
    stream. Options without asyncOp (torch before 2.7) count as asynchronous."""
    return opts is not None and getattr(opts, "asyncOp", True) is False


def _is_premul(op: Any) -> bool:
    return op == dist.ReduceOp.PREMUL_SUM or getattr(op, "op", None) == dist.ReduceOp.PREMUL_SUM


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _check_tensor(t: torch.Tensor, what: str, device: torch.device) -> None:
    if not t.is_cuda:
        raise ValueError(f"backend mscclrt: {what} is on {t.device}; mscclrt runs CUDA tensors")
    if t.get_device() != device.index:   # an int: t.device makes an object per call
        raise ValueError(f"backend mscclrt: {what} is on {t.device}, the group's device is {device}")
    if not t.is_contiguous():
        raise ValueError(f"backend mscclrt: {what} must be contiguous")


class MscclrtWork(dist._Work):
    """One operation's completion: an event on the group's stream."""

    def __init__(self, pg: "MscclrtProcessGroup", event: Optional[torch.cuda.Event],
                 result: Any = None, blocking: bool = False, p2p_ticket: int = -1):
        super().__init__()
        self._pg = pg
        self._event = event
        self._result = result
        self._blocking = blocking
        self._ticket = p2p_ticket
        self._future: Optional[torch.futures.Future] = None

    def _ensure_launched(self) -> None:
        if self._ticket >= 0 and self._event is None:
            self._pg._flush_p2p()
            self._event = self._pg._p2p_events.pop(self._ticket, None)
            self._ticket = -1

    def wait(self, timeout: Any = None) -> bool:
        self._ensure_launched()
        if self._event is not None:
            if self._blocking:
                self._event.synchronize()
            else:
                torch.cuda.current_stream(self._pg.device).wait_event(self._event)
        err = self._pg._comm.async_error() if self._pg._comm else None
        if err is not None:
            raise err
        return True

    def is_completed(self) -> bool:
        self._ensure_launched()
        return self._event is None or self._event.query()

    def is_success(self) -> bool:
        return self.is_completed()

    def exception(self) -> Any:
        return None

    def result(self) -> Any:
        return self._result

    def get_future(self) -> torch.futures.Future:
        if self._future is None:
            self.wait()
            self._future = torch.futures.Future(devices=[self._pg.device])
            self._future.set_result(self._result)
        return self._future

    def synchronize(self) -> None:
        self.wait()


class MscclrtProcessGroup(dist.ProcessGroup):
    """torch.distributed's view of one rank of a libmscclrt communicator."""

    def __init__(self, store: Any, rank: int, size: int, timeout: Optional[timedelta] = None,
                 device: Optional[torch.device] = None):
        super().__init__(rank, size)
        self._rank, self._size = rank, size
        self.device = device or torch.device("cuda", torch.cuda.current_device())
        torch.cuda.set_device(self.device)
        # the rendezvous token goes through the store torch.distributed already made
        if rank == 0:
            uid = bytes(_lib_uid())
            store.set(_UID_KEY, uid)
        else:
            store.wait([_UID_KEY], timeout or timedelta(minutes=5))
            uid = store.get(_UID_KEY)
        self._comm: Optional[CommGroup] = CommGroup.from_unique_id(uid, rank, size,
                                                                   self.device.index)
        self.stream = torch.cuda.Stream(self.device)
        self._lock = threading.Lock()
        self._p2p: list[tuple[str, torch.Tensor, int]] = []
        self._p2p_tickets: list[int] = []
        self._p2p_events: dict[int, torch.cuda.Event] = {}
        self._next_ticket = 0
        self._coalescing = False
        self._premul: dict[tuple, tuple] = {}   # PREMUL_SUM operators, see _op

    # ---- identity ----
    def getBackendName(self) -> str:
        return BACKEND_NAME

    # torch.distributed names every group (functional collectives find it by name); a Python
    # group keeps its own name and description
    def setGroupName(self, name: str) -> None:
        self._group_name = name

    def getGroupName(self) -> str:
        return getattr(self, "_group_name", "")

    def setGroupDesc(self, desc: str) -> None:
        self._group_desc = desc

    def getGroupDesc(self) -> str:
        return getattr(self, "_group_desc", "")

    def getRank(self) -> int:
        return self._rank

    def getSize(self) -> int:
        return self._size

    @property
    def comm(self) -> CommGroup:
        if self._comm is None:
            raise RuntimeError("backend mscclrt: the process group was shut down")
        return self._comm

    # ---- running on the group's stream ----
    def _run(self, tensors: list, fn: Any, result: Any = None, blocking: bool = False,
             opts: Any = None) -> MscclrtWork:
        """Runs fn(stream_handle) on the group's stream after the caller's work, or, for a call
        torch waits for at once, on the caller's stream; returns its Work."""
        if self._p2p:
            self._flush_p2p()
        if not blocking and _is_sync(opts):
            fn(current_stream_handle(self.device))
            return MscclrtWork(self, None, result)
        cur = torch.cuda.current_stream(self.device)
        self.stream.wait_stream(cur)
        with torch.cuda.stream(self.stream):
            fn(self.stream.cuda_stream)
            for t in tensors:
                t.record_stream(self.stream)
            ev = torch.cuda.Event()
            ev.record(self.stream)
        return MscclrtWork(self, ev, result, blocking)

    # ---- operators ----
    def _op(self, opts: Any, dtype: torch.dtype) -> int:
        """Our operator for the call's ReduceOp. PREMUL_SUM (torch's _make_nccl_premul_sum):
        its factor, a number or a one-element tensor of the call's type on this device, becomes
        a PreMulSum operator of the communicator, made once per (factor, dtype) and kept (a
        number is copied to the device once; a tensor is read at each call, as NCCL does)."""
        red = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
        got = _cached_op(red)
        if got is not None:
            return got
        if not _is_premul(red):
            return _op_of(red)
        factor = red.__getstate__()[1]
        dt = torch_dtype_to_mscclrt_dtype(dtype)
        if isinstance(factor, torch.Tensor):
            if factor.device != self.device or factor.dtype != dtype or factor.numel() != 1:
                raise ValueError("backend mscclrt: a PREMUL_SUM factor tensor must hold one "
                                 f"element of {dtype} on {self.device}")
            key = ("t", factor.data_ptr(), int(dt))
        else:
            key = ("f", float(factor), int(dt))
        got = self._premul.get(key)
        if got is None:
            if isinstance(factor, torch.Tensor):
                got = (self.comm.premulsum(factor.data_ptr(), dt, on_device=True), factor)
            else:
                got = (self.comm.premulsum(float(factor), dt), None)
            self._premul[key] = got
        return got[0]

    # ---- collectives ----
    def allreduce(self, tensors: list, opts: Any = None) -> MscclrtWork:
        op = self._op(opts, tensors[0].dtype) if tensors else 0
        for t in tensors:
            _check_tensor(t, "allreduce tensor", self.device)

        def go(s: int) -> None:
            for t in tensors:
                self.comm.allreduce(t.data_ptr(), t.data_ptr(), t.numel(),
                                    torch_dtype_to_mscclrt_dtype(t.dtype), op, s)
        return self._run(tensors, go, tensors, opts=opts)

    def allreduce_coalesced(self, tensors: list, opts: Any = None) -> MscclrtWork:
        return self.allreduce(tensors, opts)

    def broadcast(self, tensors: list, opts: Any = None) -> MscclrtWork:
        root = opts.rootRank if opts is not None else 0
        for t in tensors:
            _check_tensor(t, "broadcast tensor", self.device)

        def go(s: int) -> None:
            for t in tensors:
                self.comm.broadcast(t.data_ptr(), t.data_ptr(), t.numel(),
                                    torch_dtype_to_mscclrt_dtype(t.dtype), root, s)
        return self._run(tensors, go, tensors, opts=opts)

    def reduce(self, tensors: list, opts: Any = None) -> MscclrtWork:
        root = opts.rootRank if opts is not None else 0
        op = self._op(opts, tensors[0].dtype) if tensors else 0
        for t in tensors:
            _check_tensor(t, "reduce tensor", self.device)

        def go(s: int) -> None:
            for t in tensors:
                self.comm.reduce(t.data_ptr(), t.data_ptr(), t.numel(),
                                 torch_dtype_to_mscclrt_dtype(t.dtype), op, root, s)
        return self._run(tensors, go, tensors, opts=opts)

    def _allgather_base(self, output: torch.Tensor, input: torch.Tensor, opts: Any = None) -> MscclrtWork:
        _check_tensor(output, "allgather output", self.device)
        _check_tensor(input, "allgather input", self.device)
        if _nbytes(output) != _nbytes(input) * self._size:
            raise ValueError(f"backend mscclrt: allgather output has {_nbytes(output)} bytes, "
                             f"expected {self._size} x {_nbytes(input)}")
        dt = torch_dtype_to_mscclrt_dtype(input.dtype)
        return self._run([output, input], lambda s: self.comm.allgather(
            input.data_ptr(), output.data_ptr(), input.numel(), dt, s), output, opts=opts)

    all_gather_single = _allgather_base

    def allgather(self, output_lists: list, inputs: list, opts: Any = None) -> MscclrtWork:
        works = []
        for outs, inp in zip(output_lists, inputs):
            flat = torch.empty((self._size * inp.numel(),), dtype=inp.dtype, device=self.device)
            self._allgather_base(flat, inp.contiguous())
            with torch.cuda.stream(self.stream):
                for k, o in enumerate(outs):
                    o.copy_(flat[k * inp.numel():(k + 1) * inp.numel()].view_as(o))
                    o.record_stream(self.stream)
                flat.record_stream(self.stream)
                ev = torch.cuda.Event()
                ev.record(self.stream)
            works.append(ev)
        return MscclrtWork(self, works[-1] if works else None, output_lists)

    def allgather_into_tensor_coalesced(self, outputs: list, inputs: list, opts: Any = None) -> MscclrtWork:
        w = None
        for o, i in zip(outputs, inputs):
            w = self._allgather_base(o, i, opts)
        return w or MscclrtWork(self, None, outputs)

    all_gather_single_coalesced = allgather_into_tensor_coalesced

    def _reduce_scatter_base(self, output: torch.Tensor, input: torch.Tensor, opts: Any = None) -> MscclrtWork:
        _check_tensor(output, "reduce_scatter output", self.device)
        _check_tensor(input, "reduce_scatter input", self.device)
        if _nbytes(input) != _nbytes(output) * self._size:
            raise ValueError(f"backend mscclrt: reduce_scatter input has {_nbytes(input)} bytes, "
                             f"expected {self._size} x {_nbytes(output)}")
        op = self._op(opts, input.dtype)
        dt = torch_dtype_to_mscclrt_dtype(input.dtype)
        return self._run([output, input], lambda s: self.comm.reducescatter(
            input.data_ptr(), output.data_ptr(), output.numel(), dt, op, s), output, opts=opts)

    reduce_scatter_single = _reduce_scatter_base

    def reduce_scatter(self, outputs: list, input_lists: list, opts: Any = None) -> MscclrtWork:
        w = None
        for out, ins in zip(outputs, input_lists):
            flat = torch.cat([i.reshape(-1) for i in ins])
            w = self._reduce_scatter_base(out, flat, opts)
        return w or MscclrtWork(self, None, outputs)

    def reduce_scatter_tensor_coalesced(self, outputs: list, inputs: list, opts: Any = None) -> MscclrtWork:
        w = None
        for o, i in zip(outputs, inputs):
            w = self._reduce_scatter_base(o, i, opts)
        return w or MscclrtWork(self, None, outputs)

    reduce_scatter_single_coalesced = reduce_scatter_tensor_coalesced

    def alltoall_base(self, output: torch.Tensor, input: torch.Tensor, output_split_sizes: list,
                      input_split_sizes: list, opts: Any = None) -> MscclrtWork:
        _check_tensor(output, "alltoall output", self.device)
        _check_tensor(input, "alltoall input", self.device)
        dt = torch_dtype_to_mscclrt_dtype(input.dtype)
        n = self._size
        if not output_split_sizes and not input_split_sizes:
            if input.numel() % n or output.numel() != input.numel():
                raise ValueError("backend mscclrt: even all_to_all_single needs equal input and "
                                 f"output sizes divisible by {n}")
            cnt = input.numel() // n
            return self._run([output, input], lambda s: self.comm.alltoall(
                input.data_ptr(), output.data_ptr(), cnt, dt, s), output, opts=opts)
        # uneven: one group of sends and receives (one kernel)
        in_row = input.numel() // max(1, input.size(0)) if input.dim() else 1
        out_row = output.numel() // max(1, output.size(0)) if output.dim() else 1
        isz = list(input_split_sizes) or [input.size(0) // n] * n
        osz = list(output_split_sizes) or [output.size(0) // n] * n
        es = input.element_size()

        def go(s: int) -> None:
            rt = _lib.runtime()
            _lib.check(rt.mscclrt_group_start(), "group_start")
            try:
                ioff = ooff = 0
                for p in range(n):
                    if isz[p]:
                        self.comm.send(input.data_ptr() + ioff * in_row * es, isz[p] * in_row, dt, p, s)
                    if osz[p]:
                        self.comm.recv(output.data_ptr() + ooff * out_row * es, osz[p] * out_row, dt, p, s)
                    ioff += isz[p]
                    ooff += osz[p]
            finally:
                _lib.check(rt.mscclrt_group_end(), "group_end")
        return self._run([output, input], go, output, opts=opts)

    all_to_all_single = alltoall_base

    def alltoall(self, outputs: list, inputs: list, opts: Any = None) -> MscclrtWork:
        def go(s: int) -> None:
            rt = _lib.runtime()
            _lib.check(rt.mscclrt_group_start(), "group_start")
            try:
                for p, (o, i) in enumerate(zip(outputs, inputs)):
                    dt = torch_dtype_to_mscclrt_dtype(i.dtype)
                    self.comm.send(i.data_ptr(), i.numel(), dt, p, s)
                    self.comm.recv(o.data_ptr(), o.numel(), dt, p, s)
            finally:
                _lib.check(rt.mscclrt_group_end(), "group_end")
        return self._run(list(outputs) + list(inputs), go, outputs)

    def barrier(self, opts: Any = None) -> MscclrtWork:
        one = torch.ones((1,), dtype=torch.float32, device=self.device)
        w = self._run([one], lambda s: self.comm.allreduce(one.data_ptr(), one.data_ptr(), 1,
                                                           "float32", ReduceOp.SUM, s),
                      blocking=True)
        return w

    # ---- point-to-point: queued, launched together ----
    def _queue_p2p(self, kind: str, tensors: list, peer: int) -> MscclrtWork:
        for t in tensors:
            _check_tensor(t, f"{kind} tensor", self.device)
        with self._lock:
            ticket = self._next_ticket
            self._next_ticket += 1
            for t in tensors:
                self._p2p.append((kind, t, peer))
            self._p2p_tickets.append(ticket)
        return MscclrtWork(self, None, tensors, p2p_ticket=ticket)

    def send(self, tensors: list, dst: int, tag: int = 0) -> MscclrtWork:
        return self._queue_p2p("send", tensors, dst)

    def recv(self, tensors: list, src: int, tag: int = 0) -> MscclrtWork:
        return self._queue_p2p("recv", tensors, src)

    def _flush_p2p(self) -> None:
        with self._lock:
            if self._coalescing or not self._p2p:
                return
            ops, tickets = self._p2p, self._p2p_tickets
            self._p2p, self._p2p_tickets = [], []
        cur = torch.cuda.current_stream(self.device)
        self.stream.wait_stream(cur)
        rt = _lib.runtime()
        with torch.cuda.stream(self.stream):
            s = self.stream.cuda_stream
            _lib.check(rt.mscclrt_group_start(), "group_start")
            try:
                for kind, t, peer in ops:
                    dt = torch_dtype_to_mscclrt_dtype(t.dtype)
                    if kind == "send":
                        self.comm.send(t.data_ptr(), t.numel(), dt, peer, s)
                    else:
                        self.comm.recv(t.data_ptr(), t.numel(), dt, peer, s)
            finally:
                _lib.check(rt.mscclrt_group_end(), "group_end")
            for _, t, _ in ops:
                t.record_stream(self.stream)
            ev = torch.cuda.Event()
            ev.record(self.stream)
        for k in tickets:
            self._p2p_events[k] = ev

    @property
    def supports_coalescing(self) -> bool:
        return True

    def start_coalescing(self, device: Any = None) -> None:
        with self._lock:
            self._coalescing = True

    def end_coalescing(self, device: Any = None) -> MscclrtWork:
        with self._lock:
            self._coalescing = False
            ticket = self._p2p_tickets[-1] if self._p2p_tickets else -1
        self._flush_p2p()
        if ticket < 0:
            return MscclrtWork(self, None)
        return MscclrtWork(self, self._p2p_events.get(ticket))

    # ---- life ----
    def shutdown(self) -> None:
        comm, self._comm = self._comm, None
        if comm is not None:
            self._flush_p2p_safely()
            torch.cuda.current_stream(self.device).synchronize()
            self.stream.synchronize()
            comm.destroy()

    def _flush_p2p_safely(self) -> None:
        try:
            if self._comm is not None:
                self._flush_p2p()
        except Exception:
            pass

    def abort(self) -> None:
        comm, self._comm = self._comm, None
        if comm is not None:
            comm.abort()

    def __repr__(self) -> str:
        return f"MscclrtProcessGroup(rank {self._rank} of {self._size} on {self.device})"


def _lib_uid() -> bytes:
    from ..comm import UniqueId
    return UniqueId.new()


def _create(store: Any, rank: int, size: int, timeout: Any) -> MscclrtProcessGroup:
    return MscclrtProcessGroup(store, rank, size, timeout)


_registered = False


def register() -> None:
    """Registers backend="mscclrt" with torch.distributed (idempotent)."""
    global _registered
    if _registered:
        return
    try:
        dist.Backend.register_backend(BACKEND_NAME, _create, devices=["cuda"])
    except TypeError:   # torch before `devices=`
        dist.Backend.register_backend(BACKEND_NAME, _create)
    _registered = True


def comm_of(group: Any = None) -> CommGroup:
    """The CommGroup under a torch process group of backend mscclrt (default: the world)."""
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    if isinstance(pg, MscclrtProcessGroup):
        return pg.comm
    raise TypeError(f"mscclrt: {pg} is not a process group of backend mscclrt")
