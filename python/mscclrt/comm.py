"""CommGroup: one rank's GPU communicator, made from a unique id, from the launcher's environment
(MSCCLRT_MASTER_ADDR / MASTER_ADDR and RANK / WORLD_SIZE, as torchrun sets them), or from an
existing torch.distributed process group; plus the NCCL-shaped collectives on raw buffers."""
from __future__ import annotations

import ctypes
import threading
from ctypes import byref, c_int, c_void_p
from typing import Any, Optional

from . import _lib
from ._buffers import address, stream_handle
from ._ints import c_int_arg
from .types import DataType, ReduceOp, parse_dtype, parse_op

UNIQUE_ID_BYTES = 128


class UniqueId(bytes):
    """The rendezvous token rank 0 makes (it starts the rendezvous server) and hands to every rank."""

    @classmethod
    def new(cls) -> "UniqueId":
        u = _lib.UniqueIdC()
        _lib.check(_lib.runtime().mscclrt_get_unique_id(byref(u)), "mscclrt_get_unique_id")
        return cls(bytes(bytearray(u.internal)))


def get_unique_id() -> UniqueId:
    return UniqueId.new()


def _default_device(device: Optional[int]) -> int:
    if device is not None:
        return int(getattr(device, "index", device) if not isinstance(device, int) else device)
    try:
        import torch
        if torch.cuda.is_available():
            return int(torch.cuda.current_device())
    except ImportError:
        pass
    return -1


class CommGroup:
    """One rank's membership in a GPU group (a libmscclrt communicator)."""

    def __init__(self, handle: int):
        if not handle:
            raise ValueError("mscclrt: null communicator")
        self._h: Optional[int] = handle
        self._lock = threading.Lock()
        r, n, d = c_int(), c_int(), c_int()
        rt = _lib.runtime()
        _lib.check(rt.mscclrt_comm_rank(handle, byref(r)), "mscclrt_comm_rank")
        _lib.check(rt.mscclrt_comm_size(handle, byref(n)), "mscclrt_comm_size")
        _lib.check(rt.mscclrt_comm_device(handle, byref(d)), "mscclrt_comm_device")
        self.rank, self.size, self.device = r.value, n.value, d.value

    # ---- construction ----
    @classmethod
    def from_unique_id(cls, unique_id: bytes, rank: int, size: int,
                       device: Optional[int] = None) -> "CommGroup":
        if len(unique_id) != UNIQUE_ID_BYTES:
            raise ValueError(f"mscclrt: a unique id has {UNIQUE_ID_BYTES} bytes, not {len(unique_id)}")
        size = c_int_arg(size, "communicator size", 1)
        rank = c_int_arg(rank, "rank", 0, size - 1)
        u = _lib.UniqueIdC()
        ctypes.memmove(ctypes.addressof(u), bytes(unique_id), UNIQUE_ID_BYTES)
        h = c_void_p()
        _lib.check(_lib.runtime().mscclrt_comm_init_rank(byref(h), size, u, rank,
                                                         _default_device(device)),
                   f"mscclrt_comm_init_rank(rank {rank} of {size})")
        return cls(h.value)

    @classmethod
    def from_env(cls, device: Optional[int] = None) -> "CommGroup":
        """From the launcher's environment: torchrun (RANK, WORLD_SIZE, MASTER_ADDR/PORT), Open MPI,
        Slurm; MSCCLRT_MASTER_ADDR/PORT win over MASTER_*. Rank 0 runs the rendezvous."""
        h = c_void_p()
        _lib.check(_lib.runtime().mscclrt_comm_init_env(byref(h), _default_device(device)),
                   "mscclrt_comm_init_env")
        return cls(h.value)

    @classmethod
    def from_torch(cls, group: Any = None, device: Optional[int] = None) -> "CommGroup":
        """Over the ranks of an existing torch.distributed process group (default: the world):
        rank 0 of the group makes the id, which goes to the others through the group itself."""
        import torch.distributed as dist
        rank, size = dist.get_rank(group), dist.get_world_size(group)
        box = [bytes(UniqueId.new()) if rank == 0 else None]
        src = dist.get_global_rank(group, 0) if group is not None else 0
        dist.broadcast_object_list(box, src=src, group=group)
        return cls.from_unique_id(box[0], rank, size, device)

    # ---- properties, MSCCL++'s names included ----
    @property
    def handle(self) -> int:
        if not self._h:
            raise RuntimeError("mscclrt: the communicator was destroyed")
        return self._h

    @property
    def communicator(self) -> "CommGroup":
        return self

    @property
    def my_rank(self) -> int:
        return self.rank

    @property
    def nranks(self) -> int:
        return self.size

    @property
    def nranks_per_node(self) -> int:
        """Ranks on each node (0 when nodes hold different numbers of ranks)."""
        v = c_int()
        _lib.check(_lib.runtime().mscclrt_comm_ranks_per_node(self.handle, byref(v)),
                   "mscclrt_comm_ranks_per_node")
        return v.value

    # ---- life ----
    def destroy(self) -> None:
        """Collective: every rank destroys together."""
        with self._lock:
            h, self._h = self._h, None
        if h:
            _lib.check(_lib.runtime().mscclrt_comm_destroy(h), "mscclrt_comm_destroy")

    def abort(self) -> None:
        """Stops the comm's kernels and releases it without talking to peers."""
        with self._lock:
            h, self._h = self._h, None
        if h:
            _lib.check(_lib.runtime().mscclrt_comm_abort(h), "mscclrt_comm_abort")

    def revoke(self) -> None:
        """From any thread: running kernels stop waiting and later calls fail."""
        h = self._h
        if h:
            _lib.check(_lib.runtime().mscclrt_comm_revoke(h), "mscclrt_comm_revoke")

    def async_error(self) -> Optional[_lib.MscclrtError]:
        r = _lib.runtime().mscclrt_comm_get_async_error(self.handle)
        return None if r == 0 else _lib.MscclrtError(r, _lib.last_error() or "communicator failed")

    def split(self, color: int, key: int = 0) -> Optional["CommGroup"]:
        h = c_void_p()
        _lib.check(_lib.runtime().mscclrt_comm_split(self.handle, int(color), int(key), byref(h)),
                   "mscclrt_comm_split")
        return CommGroup(h.value) if h.value else None

    def host_broadcast(self, data: bytes, root: int = 0) -> bytes:
        """Small host data from root to every rank over the bootstrap (every rank passes a
        buffer of the same length)."""
        buf = ctypes.create_string_buffer(bytes(data), len(data))
        _lib.check(_lib.runtime().mscclrt_comm_host_bcast(self.handle, buf, len(data), int(root)),
                   "mscclrt_comm_host_bcast")
        return buf.raw

    def __enter__(self) -> "CommGroup":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.destroy()

    def __repr__(self) -> str:
        return f"CommGroup(rank {self.rank} of {self.size}, device {self.device})"

    # ---- NCCL-shaped collectives on raw buffers (counts are elements) ----
    def _call(self, name: str, *args: Any) -> None:
        code = getattr(_lib.runtime(), name)(self.handle, *args)
        if code:   # the message only for a failure: formatting it cost each call about 1 us
            _lib.check(code, f"{name} (rank {self.rank})")

    def allreduce(self, sendbuf: Any, recvbuf: Any, count: int, dtype: Any, op: Any = ReduceOp.SUM,
                  stream: Any = None) -> None:
        self._call("mscclrt_allreduce", address(sendbuf), address(recvbuf), count,
                   int(parse_dtype(dtype)), parse_op(op), stream_handle(stream, sendbuf))

    def allgather(self, sendbuf: Any, recvbuf: Any, sendcount: int, dtype: Any,
                  stream: Any = None) -> None:
        self._call("mscclrt_allgather", address(sendbuf), address(recvbuf), sendcount,
                   int(parse_dtype(dtype)), stream_handle(stream, sendbuf))

    def reducescatter(self, sendbuf: Any, recvbuf: Any, recvcount: int, dtype: Any,
                      op: Any = ReduceOp.SUM, stream: Any = None) -> None:
        self._call("mscclrt_reducescatter", address(sendbuf), address(recvbuf), recvcount,
                   int(parse_dtype(dtype)), parse_op(op), stream_handle(stream, sendbuf))

    def broadcast(self, sendbuf: Any, recvbuf: Any, count: int, dtype: Any, root: int,
                  stream: Any = None) -> None:
        self._call("mscclrt_broadcast", address(sendbuf), address(recvbuf), count,
                   int(parse_dtype(dtype)), int(root), stream_handle(stream, recvbuf))

    def reduce(self, sendbuf: Any, recvbuf: Any, count: int, dtype: Any, op: Any, root: int,
               stream: Any = None) -> None:
        self._call("mscclrt_reduce", address(sendbuf), address(recvbuf), count,
                   int(parse_dtype(dtype)), parse_op(op), int(root), stream_handle(stream, sendbuf))

    def alltoall(self, sendbuf: Any, recvbuf: Any, count: int, dtype: Any,
                 stream: Any = None) -> None:
        self._call("mscclrt_alltoall", address(sendbuf), address(recvbuf), count,
                   int(parse_dtype(dtype)), stream_handle(stream, sendbuf))

    def gather(self, sendbuf: Any, recvbuf: Any, sendcount: int, dtype: Any, root: int,
               stream: Any = None) -> None:
        self._call("mscclrt_gather", address(sendbuf), address(recvbuf), sendcount,
                   int(parse_dtype(dtype)), int(root), stream_handle(stream, sendbuf))

    def scatter(self, sendbuf: Any, recvbuf: Any, recvcount: int, dtype: Any, root: int,
                stream: Any = None) -> None:
        self._call("mscclrt_scatter", address(sendbuf), address(recvbuf), recvcount,
                   int(parse_dtype(dtype)), int(root), stream_handle(stream, recvbuf))

    def send(self, buf: Any, count: int, dtype: Any, peer: int, stream: Any = None) -> None:
        self._call("mscclrt_send", address(buf), count, int(parse_dtype(dtype)), int(peer),
                   stream_handle(stream, buf))

    def recv(self, buf: Any, count: int, dtype: Any, peer: int, stream: Any = None) -> None:
        self._call("mscclrt_recv", address(buf), count, int(parse_dtype(dtype)), int(peer),
                   stream_handle(stream, buf))

    def premulsum(self, scalar: Any, dtype: Any, on_device: bool = False) -> int:
        """A PreMulSum operator (sum after multiplying each input by scalar): scalar is a host
        value (on_device False) or a device address of one element (on_device True)."""
        dt = parse_dtype(dtype)
        op = c_int()
        if on_device:
            ptr = ctypes.c_void_p(address(scalar, "scalar"))
            _lib.check(_lib.runtime().mscclrt_redop_create_premulsum(self.handle, byref(op), ptr,
                                                                      int(dt), 0), "premulsum")
        else:
            raw = _scalar_bytes(scalar, dt)
            buf = ctypes.create_string_buffer(raw, len(raw))
            _lib.check(_lib.runtime().mscclrt_redop_create_premulsum(self.handle, byref(op), buf,
                                                                      int(dt), 1), "premulsum")
        return op.value

    def destroy_op(self, op: int) -> None:
        _lib.check(_lib.runtime().mscclrt_redop_destroy(self.handle, int(op)), "mscclrt_redop_destroy")

    def register_window(self, buf: Any, nbytes: int) -> int:
        w = c_void_p()
        _lib.check(_lib.runtime().mscclrt_window_register(self.handle, address(buf), int(nbytes),
                                                          byref(w)), "mscclrt_window_register")
        return w.value

    def deregister_window(self, window: int) -> None:
        _lib.check(_lib.runtime().mscclrt_window_deregister(self.handle, window),
                   "mscclrt_window_deregister")


def _scalar_bytes(value: Any, dt: DataType) -> bytes:
    import struct
    v = float(value) if dt in (DataType.float16, DataType.float32, DataType.float64,
                               DataType.bfloat16) else int(value)
    if dt == DataType.float32:
        return struct.pack("<f", v)
    if dt == DataType.float64:
        return struct.pack("<d", v)
    if dt == DataType.float16:
        return struct.pack("<e", v)
    if dt == DataType.bfloat16:
        return struct.pack("<f", v)[2:]
    fmt = {DataType.int8: "<b", DataType.uint8: "<B", DataType.int32: "<i", DataType.uint32: "<I",
           DataType.int64: "<q", DataType.uint64: "<Q"}.get(dt)
    if fmt is None:
        raise TypeError(f"mscclrt: no PreMulSum scalar of type {dt.name} from the host")
    return struct.pack(fmt, v)


__all__ = ["CommGroup", "UniqueId", "get_unique_id"]
