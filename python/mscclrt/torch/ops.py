"""torch.compile support: ``mscclrt::all_reduce``, ``mscclrt::all_gather_into_tensor`` and
``mscclrt::reduce_scatter_tensor`` as torch.library custom ops (functional: they return new
tensors) with fake implementations, so compiled graphs carry them as opaque calls.

They run on the CommGroup of a torch process group of backend mscclrt (or of one made with
``mscclrt.CommGroup.from_torch`` and bound with ``bind_group``), on the current stream. On the
first call for a new (collective, size, dtype) outside CUDA-graph capture, the candidates are
tuned across ranks (mscclrt.tuning: barrier with timeout before each, max over ranks, failing or
hanging candidates dropped on every rank) and the winner is reused afterwards; under capture an
untuned shape takes the selector's choice.
"""
from __future__ import annotations

import os
import threading
from typing import Any

import torch
import torch.distributed as dist

from ..comm import CommGroup
from ..types import parse_op, torch_dtype_to_mscclrt_dtype

_groups: dict[str, CommGroup] = {}
_lock = threading.Lock()
_tuned: dict[tuple, Any] = {}


def bind_group(name: str, comm: CommGroup) -> None:
    """Makes the custom ops with group=name run on comm."""
    with _lock:
        _groups[name] = comm


def _comm(group_name: str) -> CommGroup:
    with _lock:
        c = _groups.get(group_name)
    if c is not None:
        return c
    from .backend import MscclrtProcessGroup
    pg = None
    if group_name in ("", "default", "world"):
        pg = dist.distributed_c10d._get_default_group()
    else:
        try:
            pg = dist.distributed_c10d._resolve_process_group(group_name)
        except Exception as e:
            raise ValueError(f"mscclrt ops: no process group named {group_name!r}: {e}") from e
    if isinstance(pg, MscclrtProcessGroup):
        return pg.comm
    # a group of another backend: make (once) a communicator over the same ranks
    c = CommGroup.from_torch(pg)
    bind_group(group_name, c)
    return c


def _tuned_choice(comm: CommGroup, coll: str, nbytes: int, dtype: torch.dtype, op: int,
                  make_buffers: Any) -> Any:
    """The tuned (algorithm, blocks, threads) for this shape, tuning it on first use; None when
    tuning is off (MSCCLRT_OPS_TUNE=0), impossible now (capture), or nothing could be timed."""
    if os.environ.get("MSCCLRT_OPS_TUNE", "1") == "0":
        return None
    key = (id(comm), coll, nbytes, dtype, op)
    if key in _tuned:
        return _tuned[key]
    if torch.cuda.is_current_stream_capturing():
        return None
    from ..tuning import tune_shape
    choice = tune_shape(comm, coll, nbytes, dtype, op, make_buffers)
    _tuned[key] = choice
    return choice


def _run(comm: CommGroup, coll: str, inp: torch.Tensor, out: torch.Tensor, op: int) -> None:
    dt = torch_dtype_to_mscclrt_dtype(inp.dtype)
    s = torch.cuda.current_stream(inp.device).cuda_stream
    ib, ob = inp.numel() * inp.element_size(), out.numel() * out.element_size()
    msg = ob if coll == "allgather" else ib

    def buffers():
        return (torch.empty_like(inp), torch.empty_like(out))
    ch = _tuned_choice(comm, coll, msg, inp.dtype, op, buffers)
    if ch is not None:
        algo, nb, nt = ch
        algo.execute(comm, inp.data_ptr(), out.data_ptr(), ib, ob, dt, op, s, nb, nt)
        return
    if coll == "allreduce":
        comm.allreduce(inp, out, inp.numel(), dt, op, s)
    elif coll == "allgather":
        comm.allgather(inp, out, inp.numel(), dt, s)
    else:
        comm.reducescatter(inp, out, out.numel(), dt, op, s)


@torch.library.custom_op("mscclrt::all_reduce", mutates_args=())
def all_reduce(x: torch.Tensor, op: str, group: str) -> torch.Tensor:
    out = torch.empty_like(x)
    _run(_comm(group), "allreduce", x.contiguous(), out, parse_op(op))
    return out


@all_reduce.register_fake
def _(x: torch.Tensor, op: str, group: str) -> torch.Tensor:
    return torch.empty_like(x)


def _world(group: str) -> int:
    return _comm(group).size


@torch.library.custom_op("mscclrt::all_gather_into_tensor", mutates_args=())
def all_gather_into_tensor(x: torch.Tensor, world_size: int, group: str) -> torch.Tensor:
    comm = _comm(group)
    if world_size != comm.size:
        raise ValueError(f"mscclrt::all_gather_into_tensor: world_size {world_size}, the group has {comm.size}")
    out = x.new_empty((world_size * x.shape[0],) + tuple(x.shape[1:]))
    _run(comm, "allgather", x.contiguous(), out, 0)
    return out


@all_gather_into_tensor.register_fake
def _(x: torch.Tensor, world_size: int, group: str) -> torch.Tensor:
    return x.new_empty((world_size * x.shape[0],) + tuple(x.shape[1:]))


@torch.library.custom_op("mscclrt::reduce_scatter_tensor", mutates_args=())
def reduce_scatter_tensor(x: torch.Tensor, op: str, world_size: int, group: str) -> torch.Tensor:
    comm = _comm(group)
    if world_size != comm.size or x.shape[0] % world_size:
        raise ValueError(f"mscclrt::reduce_scatter_tensor: dim 0 ({x.shape[0]}) must split over "
                         f"the group's {comm.size} ranks (world_size {world_size})")
    out = x.new_empty((x.shape[0] // world_size,) + tuple(x.shape[1:]))
    _run(comm, "reducescatter", x.contiguous(), out, parse_op(op))
    return out


@reduce_scatter_tensor.register_fake
def _(x: torch.Tensor, op: str, world_size: int, group: str) -> torch.Tensor:
    return x.new_empty((x.shape[0] // world_size,) + tuple(x.shape[1:]))


__all__ = ["all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor", "bind_group"]
