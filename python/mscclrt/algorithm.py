"""Algorithms (plan-based or native), the process-wide collection, and the one selector.

An Algorithm wraps a libmscclrt algorithm handle. Those made here own a reference; those listed
from the registry or from a communicator's default collection borrow theirs (kept valid by
holding the registry entry or the communicator). Registering puts an algorithm in the process's
collection, which every communicator selects from, the preloaded NCCL drop-in's included.
"""
from __future__ import annotations

import ctypes
import struct
import sys
import threading
import traceback
from ctypes import byref, c_int, c_void_p
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional, Sequence, Union

from . import _lib
from ._buffers import address, stream_handle
from .compiler import Plan
from .types import (BufferMode, Collective, DataType, ReduceOp, parse_collective, parse_dtype,
                    parse_op)

_ROOTED = {Collective.broadcast, Collective.reduce, Collective.gather, Collective.scatter}


@dataclass(frozen=True)
class AlgorithmConstraint:
    """Which groups an algorithm serves (0: any)."""
    world_size: int = 0
    ranks_per_node: int = 0


def _parse_tags(s: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in s.split(","))):
        k, _, v = part.partition("=")
        out[k.strip()] = v.strip()
    return out


def _format_tags(tags: Union[None, str, Mapping[str, Any], Iterable[str]]) -> Optional[bytes]:
    if tags is None:
        return None
    if isinstance(tags, str):
        return tags.encode()
    if isinstance(tags, Mapping):
        items = [f"{k}={v}" if v not in (None, "") else str(k) for k, v in tags.items()]
    else:
        items = [str(t) for t in tags]
    for t in items:
        if "," in t:
            raise ValueError(f"mscclrt: tag {t!r} contains a comma")
    return ",".join(items).encode()


def _desc(name, collective, min_bytes, max_bytes, min_arch, max_arch, world_size,
          ranks_per_node, buffer_mode, tags) -> _lib.AlgoDescC:
    d = _lib.AlgoDescC()
    d.name = name.encode() if name else None
    d.collective = int(parse_collective(collective)) if collective is not None else 0
    d.min_bytes, d.max_bytes = int(min_bytes), int(max_bytes)
    d.min_arch, d.max_arch = int(min_arch), int(max_arch)
    d.world_size, d.ranks_per_node = int(world_size), int(ranks_per_node)
    d.buffer_mode = int(buffer_mode if isinstance(buffer_mode, int) else BufferMode[buffer_mode])
    d.tags = _format_tags(tags)
    return d


class Algorithm:
    """A collective algorithm: plan-based (a compiled .coll or any MSCCL++ plan) or native
    (CUDA source compiled by NVRTC)."""

    def __init__(self, handle: int, owned: bool, keep: Any = None):
        if not handle:
            raise ValueError("mscclrt: null algorithm handle")
        self._h = handle
        self._owned = owned
        self._keep = keep     # what must outlive the handle: the plan, or the communicator

    # ---- construction ----
    @classmethod
    def from_plan(cls, plan: Union[Plan, str, Path], *, name: Optional[str] = None,
                  collective: Optional[Union[str, Collective]] = None, min_size: int = 0,
                  max_size: int = 0, tags: Any = None, buffer_mode: Union[int, str] = 0,
                  world_size: int = 0, ranks_per_node: int = 0, min_arch: int = 0,
                  max_arch: int = 0) -> "Algorithm":
        """From a Plan (mscclrt.compile), a plan file path, or plan JSON text. Unset fields come
        from the plan (its name, collective, size range, rank count, in-place flag)."""
        if not isinstance(plan, Plan):
            s = str(plan)
            plan = Plan(s) if s.lstrip().startswith("{") else Plan.load(s)
        h = c_void_p()
        d = _desc(name, collective, min_size, max_size, min_arch, max_arch, world_size,
                  ranks_per_node, buffer_mode, tags)
        _lib.check(_lib.runtime().mscclrt_algo_from_plan(byref(h), plan.handle, byref(d)),
                   "mscclrt_algo_from_plan")
        return cls(h.value, True, plan)

    from_execution_plan = from_plan   # MSCCL++'s name

    @classmethod
    def from_native(cls, *, name: str, collective: Union[str, Collective], kernel: str,
                    file: Optional[Union[str, Path]] = None, source: Optional[str] = None,
                    min_size: int = 0, max_size: int = 0, tags: Any = None,
                    buffer_mode: Union[int, str] = 0, world_size: int = 0, ranks_per_node: int = 0,
                    min_arch: int = 0, max_arch: int = 0) -> "Algorithm":
        """From CUDA source (source=) or a .cu file (file=) defining
        ``extern "C" __global__ void <kernel>(MnArgs args)``; see libmscclrt(3), native algorithms."""
        if (file is None) == (source is None):
            raise ValueError("mscclrt.Algorithm.from_native: give exactly one of file= and source=")
        h = c_void_p()
        d = _desc(name, collective, min_size, max_size, min_arch, max_arch, world_size,
                  ranks_per_node, buffer_mode, tags)
        rt = _lib.runtime()
        if file is not None:
            r = rt.mscclrt_algo_from_file(byref(h), str(file).encode(), kernel.encode(), byref(d))
        else:
            r = rt.mscclrt_algo_from_source(byref(h), source.encode(), kernel.encode(), byref(d))
        _lib.check(r, "mscclrt_algo_from_native")
        return cls(h.value, True)

    def __del__(self) -> None:
        if getattr(self, "_owned", False):
            try:
                _lib.runtime().mscclrt_algo_free(self._h)
            except Exception:   # interpreter shutdown
                pass

    # ---- description ----
    def _d(self) -> _lib.AlgoDescC:
        d = _lib.AlgoDescC()
        _lib.check(_lib.runtime().mscclrt_algo_get_desc(self._h, byref(d)), "mscclrt_algo_get_desc")
        return d

    @property
    def handle(self) -> int:
        return self._h

    @property
    def name(self) -> str:
        return self._d().name.decode()

    @property
    def collective(self) -> str:
        return Collective(self._d().collective).name

    @property
    def min_size(self) -> int:
        return self._d().min_bytes

    @property
    def max_size(self) -> int:
        """0: no upper bound."""
        return self._d().max_bytes

    @property
    def size_range(self) -> tuple[int, int]:
        d = self._d()
        return d.min_bytes, d.max_bytes

    @property
    def tags(self) -> dict[str, str]:
        t = self._d().tags
        return _parse_tags(t.decode()) if t else {}

    @property
    def buffer_mode(self) -> BufferMode:
        return BufferMode(self._d().buffer_mode)

    @property
    def architectures(self) -> tuple[int, int]:
        """(min, max) compute capability x10 (0: unbounded)."""
        d = self._d()
        return d.min_arch, d.max_arch

    @property
    def constraint(self) -> AlgorithmConstraint:
        d = self._d()
        return AlgorithmConstraint(d.world_size, d.ranks_per_node)

    @property
    def kind(self) -> str:
        return "plan" if _lib.runtime().mscclrt_algo_kind_of(self._h) == 0 else "native"

    def is_dsl_based(self) -> bool:
        return self.kind == "plan"

    def is_kernel_based(self) -> bool:
        return self.kind == "native"

    def __repr__(self) -> str:
        return f"Algorithm({self.name!r}, {self.collective}, {self.kind})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Algorithm) and other._h == self._h

    def __hash__(self) -> int:
        return hash(self._h)

    # ---- running ----
    def execute(self, comm: Any, input: Any, output: Any, input_size: int, output_size: int,
                dtype: Any, op: Any = ReduceOp.SUM, stream: Any = None, nblocks: int = 0,
                nthreads_per_block: int = 0, extras: Any = None, *, root: int = 0,
                peer: int = -1) -> None:
        """Runs this algorithm directly on comm (a CommGroup), bypassing the selector. input and
        output are device addresses, tensors or DLPack objects; sizes are this rank's bytes;
        nblocks/nthreads_per_block 0 take the algorithm's own. extras (native only): bytes, or a
        sequence / dict (in insertion order) of ints packed as 64-bit values. Raises
        MscclrtError when the algorithm does not fit the call or fails."""
        req = build_request(self.collective, input, output, input_size, output_size, dtype, op,
                            stream, root, peer)
        extra = _pack_extras(extras)
        rt = _lib.runtime()
        r = rt.mscclrt_algo_run(_comm_handle(comm), self._h, byref(req), int(nblocks),
                                int(nthreads_per_block), extra, len(extra) if extra else 0)
        _lib.check(r, f"execute({self.name})")

    def fits(self, request: "Request") -> tuple[bool, str]:
        """(True, "") when this algorithm can serve request, else (False, why)."""
        why = ctypes.c_char_p()
        q = request.to_c()
        ok = _lib.runtime().mscclrt_algo_fits(self._h, byref(q), byref(why))
        return bool(ok), (why.value.decode(errors="replace") if why.value else "")

    def clean_cached_contexts(self) -> None:
        """Drops what communicators hold for this algorithm (collective: every rank calls it)."""
        _lib.check(_lib.runtime().mscclrt_algo_clean_cached_contexts(self._h),
                   "mscclrt_algo_clean_cached_contexts")


def _comm_handle(comm: Any) -> int:
    h = getattr(comm, "handle", comm)
    if not isinstance(h, int) or not h:
        raise TypeError("mscclrt: comm must be a CommGroup (or a live communicator handle)")
    return h


def _pack_extras(extras: Any) -> Optional[bytes]:
    if extras is None:
        return None
    if isinstance(extras, (bytes, bytearray, memoryview)):
        data = bytes(extras)
    else:
        vals = list(extras.values()) if isinstance(extras, Mapping) else list(extras)
        data = b"".join(struct.pack("<Q", int(v) & 0xFFFFFFFFFFFFFFFF) for v in vals)
    if len(data) > 256:
        raise ValueError(f"mscclrt: extras are {len(data)} bytes; at most 256 "
                         "(MSCCLRT_NATIVE_EXTRA_BYTES)")
    return data


def message_bytes(coll: Collective, input_size: int, output_size: int) -> int:
    """The message size as the size ranges count it (libmscclrt(3))."""
    if coll in (Collective.allgather, Collective.gather):
        return output_size
    if coll in (Collective.reducescatter, Collective.alltoall, Collective.scatter):
        return input_size
    return max(input_size, output_size)


def per_rank_bytes(collective: Any, message_size: int, world_size: int) -> tuple[int, int]:
    """A rank's (input, output) bytes for a message of message_size bytes on world_size ranks,
    as the size ranges count messages (the inverse of message_bytes)."""
    c = parse_collective(collective)
    n = int(message_size)
    per = n // world_size if world_size else n
    shapes = {Collective.allgather: (per, n), Collective.gather: (per, n),
              Collective.reducescatter: (n, per), Collective.scatter: (n, per)}
    return shapes.get(c, (n, n))


def build_request(collective: Any, input: Any, output: Any, input_size: int, output_size: int,
                  dtype: Any, op: Any, stream: Any, root: int = 0, peer: int = -1) -> _lib.RequestC:
    coll = parse_collective(collective)
    q = _lib.RequestC()
    q.collective = int(coll)
    q.in_bytes, q.out_bytes = int(input_size), int(output_size)
    q.message_bytes = message_bytes(coll, q.in_bytes, q.out_bytes)
    q.dtype = int(parse_dtype(dtype))
    q.op = parse_op(op) if op is not None else 0
    q.root = int(root) if coll in _ROOTED else -1
    q.peer = int(peer) if coll == Collective.sendrecv else -1
    q.sendbuf = address(input, "input")
    q.recvbuf = address(output, "output")
    like = input if hasattr(input, "is_cuda") else None
    q.stream = stream_handle(stream, like)
    if coll in _ROOTED:
        q.inplace = 2
    else:
        q.inplace = 1 if (q.sendbuf or 0) == (q.recvbuf or 0) else 0
    return q


# ---- the collection -----------------------------------------------------------------------------

class AlgorithmCollection(Sequence):
    """An ordered list of algorithms with lookups by name and collective."""

    def __init__(self, algorithms: Iterable[Algorithm] = ()):
        self._v: list[Algorithm] = list(algorithms)

    def __getitem__(self, i):  # type: ignore[override]
        return self._v[i]

    def __len__(self) -> int:
        return len(self._v)

    def __iter__(self) -> Iterator[Algorithm]:
        return iter(self._v)

    def add_algorithm(self, algo: Algorithm) -> None:
        self._v.append(algo)

    def get_algorithms(self, collective: Any = None) -> list[Algorithm]:
        if collective is None:
            return list(self._v)
        c = parse_collective(collective).name
        return [a for a in self._v if a.collective == c]

    def get(self, name: str) -> Algorithm:
        for a in self._v:
            if a.name == name:
                return a
        raise KeyError(f"mscclrt: no algorithm named {name!r} (have: "
                       f"{', '.join(a.name for a in self._v)})")

    def names(self) -> list[str]:
        return [a.name for a in self._v]

    def register_all(self) -> None:
        for a in self._v:
            register_algorithm(a)

    def __repr__(self) -> str:
        return f"AlgorithmCollection({self.names()})"


def _list(fn: Callable[..., int], *lead: Any) -> list[int]:
    n = c_int()
    _lib.check(fn(*lead, None, 0, byref(n)), "listing algorithms")
    arr = (c_void_p * max(1, n.value))()
    _lib.check(fn(*lead, arr, n.value, byref(n)), "listing algorithms")
    return [arr[i] for i in range(min(n.value, len(arr)))]


def default_algorithms(comm: Any, collective: Any = None) -> AlgorithmCollection:
    """comm's default collection: the stdlib programs compiled for its layout and the built-in
    native algorithms (valid while comm lives)."""
    coll = int(parse_collective(collective)) if collective is not None else 9
    hs = _list(_lib.runtime().mscclrt_comm_algorithms, _comm_handle(comm), coll)
    return AlgorithmCollection(Algorithm(h, False, comm) for h in hs)


def registered_algorithms(collective: Any = None) -> AlgorithmCollection:
    coll = int(parse_collective(collective)) if collective is not None else 9
    hs = _list(_lib.runtime().mscclrt_algo_list, coll)
    return AlgorithmCollection(Algorithm(h, False, _registered_keep.get(h)) for h in hs)


_registered_keep: dict[int, Algorithm] = {}
_reg_lock = threading.Lock()


def register_algorithm(algo: Algorithm) -> None:
    """Adds algo to the process's collection (every communicator, the NCCL drop-in's included,
    selects from it). Register on every rank in the same order."""
    _lib.check(_lib.runtime().mscclrt_algo_register(algo.handle), f"register_algorithm({algo.name})")
    with _reg_lock:
        _registered_keep[algo.handle] = algo


def unregister_algorithm(name: str) -> None:
    _lib.check(_lib.runtime().mscclrt_algo_unregister(name.encode()), f"unregister_algorithm({name})")
    with _reg_lock:
        for h, a in list(_registered_keep.items()):
            if a.name == name:
                del _registered_keep[h]


# ---- the selector --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Request:
    """What a selector sees of one collective call."""
    collective: str
    message_size: int
    input_size: int
    output_size: int
    dtype: DataType
    op: int
    world_size: int
    ranks_per_node: int
    rank: int
    root: int
    peer: int
    send_buffer: int
    recv_buffer: int
    stream: int
    capturing: bool
    arch: int
    in_place: Optional[bool]    # None for the rooted collectives (not known on non-roots)
    symmetric: bool

    def to_c(self) -> _lib.RequestC:
        q = _lib.RequestC()
        q.collective = int(parse_collective(self.collective))
        q.message_bytes, q.in_bytes, q.out_bytes = self.message_size, self.input_size, self.output_size
        q.dtype, q.op = int(parse_dtype(self.dtype)), int(self.op)
        q.world_size, q.ranks_per_node, q.rank = self.world_size, self.ranks_per_node, self.rank
        q.root, q.peer = self.root, self.peer
        q.sendbuf, q.recvbuf, q.stream = self.send_buffer, self.recv_buffer, self.stream
        q.capturing, q.arch, q.symmetric = int(self.capturing), self.arch, int(self.symmetric)
        q.inplace = 2 if self.in_place is None else int(self.in_place)
        return q

    @classmethod
    def make(cls, collective: Any, message_size: int, *, dtype: Any = DataType.float32,
             op: Any = ReduceOp.SUM, world_size: int, ranks_per_node: int = 0, rank: int = 0,
             arch: int = 90, in_place: Optional[bool] = False, symmetric: bool = False,
             root: int = -1, peer: int = -1, input_size: Optional[int] = None,
             output_size: Optional[int] = None) -> "Request":
        """A request as a collective call on world_size ranks would make it (for select_among,
        tools and tests); per-rank sizes follow the collective's shape unless given."""
        c = parse_collective(collective)
        n = int(message_size)
        if input_size is None or output_size is None:
            i, o = per_rank_bytes(c, n, world_size)
            input_size = i if input_size is None else input_size
            output_size = o if output_size is None else output_size
        if c in _ROOTED:
            in_place, root = None, max(root, 0)
        return cls(c.name, n, input_size, output_size, parse_dtype(dtype), parse_op(op),
                   world_size, ranks_per_node or world_size, rank, root, peer, 0, 0, 0, False,
                   arch, in_place, symmetric)

    @classmethod
    def from_c(cls, q: _lib.RequestC) -> "Request":
        return cls(Collective(q.collective).name, q.message_bytes, q.in_bytes, q.out_bytes,
                   DataType(q.dtype), q.op, q.world_size, q.ranks_per_node, q.rank, q.root,
                   q.peer, q.sendbuf or 0, q.recvbuf or 0, q.stream or 0, bool(q.capturing),
                   q.arch, None if q.inplace == 2 else bool(q.inplace), bool(q.symmetric))


@dataclass(frozen=True)
class Choice:
    algorithm: Algorithm
    nblocks: int = 0
    nthreads_per_block: int = 0


SelectorFn = Callable[[Request, AlgorithmCollection], Any]
_selector_lock = threading.Lock()
_selector_cb: Any = None          # the live CFUNCTYPE object (must outlive its registration)
_selector_py: Optional[SelectorFn] = None
_tls = threading.local()


def last_selector_error() -> Optional[str]:
    """The traceback text of this thread's last selector failure (None if none since)."""
    return getattr(_tls, "error", None)


def _to_choice(res: Any, cands: AlgorithmCollection) -> Optional[Choice]:
    if res is None:
        return None
    if isinstance(res, Choice):
        return res
    if isinstance(res, Algorithm):
        return Choice(res)
    if isinstance(res, str):
        return Choice(cands.get(res))
    if isinstance(res, tuple) and 1 <= len(res) <= 3:
        a = res[0] if isinstance(res[0], Algorithm) else cands.get(str(res[0]))
        return Choice(a, *[int(x) for x in res[1:]])
    raise TypeError(f"selector returned {type(res).__name__}; expected None, an Algorithm, its "
                    "name, (algorithm, nblocks, nthreads) or a Choice")


def _trampoline(req_p, cand_p, n, choice_p, _user) -> int:
    fn = _selector_py
    try:
        if fn is None:
            return 0
        cands = AlgorithmCollection(Algorithm(cand_p[i], False) for i in range(n))
        ch = _to_choice(fn(Request.from_c(req_p.contents), cands), cands)
        if ch is None:
            return 0
        choice_p.contents.algo = ch.algorithm.handle
        choice_p.contents.blocks = int(ch.nblocks)
        choice_p.contents.threads = int(ch.nthreads_per_block)
        return 1
    except BaseException:   # never let an exception cross into C: report it and fail the call
        text = traceback.format_exc()
        _tls.error = text
        sys.stderr.write(f"mscclrt: the selector raised; the collective fails:\n{text}")
        sys.stderr.flush()
        return -1


def register_selector(fn: Optional[SelectorFn]) -> None:
    """Makes fn the process's one selector (the last registration wins; None restores the
    default). fn(request, candidates) returns None (no opinion), an Algorithm from candidates,
    its name, (algorithm, nblocks, nthreads) or a Choice. It runs inside collective calls (also
    those PyTorch makes through the NCCL drop-in), must answer alike on every rank, and must not
    call collectives. An exception in it is printed with its traceback and fails that call."""
    global _selector_cb, _selector_py
    with _selector_lock:
        if fn is None:
            _lib.check(_lib.runtime().mscclrt_set_selector(_lib.SELECTOR_FN(), None),
                       "register_selector(None)")
            _selector_py = None
            return
        if not callable(fn):
            raise TypeError("mscclrt.register_selector: the selector must be callable")
        cb = _lib.SELECTOR_FN(_trampoline)
        _selector_py = fn
        _lib.check(_lib.runtime().mscclrt_set_selector(cb, None), "register_selector")
        _selector_cb = cb   # keep the old one too until now: C may still be calling it


def select(comm: Any, collective: Any, input: Any, output: Any, input_size: int,
           output_size: int, dtype: Any, op: Any = ReduceOp.SUM, stream: Any = None,
           root: int = 0, peer: int = -1) -> Choice:
    """What the selector chain chooses for such a call on comm (runs nothing)."""
    q = build_request(collective, input, output, input_size, output_size, dtype, op, stream,
                      root, peer)
    ch = _lib.ChoiceC()
    _lib.check(_lib.runtime().mscclrt_select(_comm_handle(comm), byref(q), byref(ch)),
               "mscclrt_select")
    return Choice(Algorithm(ch.algo, False, comm), ch.blocks, ch.threads)


def select_among(request: Request, candidates: Iterable[Algorithm]) -> Choice:
    """The selector chain (the registered selector, then the default selector with its tuning
    table) over candidates for request; needs no communicator and runs nothing."""
    cands = list(candidates)
    arr = (c_void_p * max(1, len(cands)))(*[a.handle for a in cands])
    q = request.to_c()
    ch = _lib.ChoiceC()
    r = _lib.runtime().mscclrt_select_among(byref(q), arr, len(cands), byref(ch))
    _lib.check(r, "select_among")
    chosen = next((a for a in cands if a.handle == ch.algo), None)
    if chosen is None:
        chosen = Algorithm(ch.algo, False)
    return Choice(chosen, ch.blocks, ch.threads)


def load_tuning_table(path: Optional[Union[str, Path]]) -> None:
    """Replaces the process's tuning table (None drops it); see libmscclrt(3) TUNING TABLE."""
    _lib.check(_lib.runtime().mscclrt_tuning_load(str(path).encode() if path else None),
               "mscclrt_tuning_load")


__all__ = ["Algorithm", "AlgorithmCollection", "AlgorithmConstraint", "Choice", "Request",
           "default_algorithms", "registered_algorithms", "register_algorithm", "select_among",
           "unregister_algorithm", "register_selector", "select", "last_selector_error",
           "load_tuning_table", "build_request", "message_bytes", "per_rank_bytes"]
