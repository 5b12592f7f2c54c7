"""The value types of the API: data types, reduction operators, collectives, buffer modes, and
their mapping from PyTorch's dtypes and ReduceOps (imported lazily: torch is optional)."""
from __future__ import annotations

from enum import IntEnum
from typing import Any, Union


class DataType(IntEnum):
    """Same values as mscclrt_dtype and NCCL's ncclDataType_t."""
    int8 = 0
    uint8 = 1
    int32 = 2
    uint32 = 3
    int64 = 4
    uint64 = 5
    float16 = 6
    float32 = 7
    float64 = 8
    bfloat16 = 9
    fp8_e4m3 = 10
    fp8_e5m2 = 11

    @property
    def size(self) -> int:
        return _DTYPE_SIZE[self]


_DTYPE_SIZE = {DataType.int8: 1, DataType.uint8: 1, DataType.int32: 4, DataType.uint32: 4,
               DataType.int64: 8, DataType.uint64: 8, DataType.float16: 2, DataType.float32: 4,
               DataType.float64: 8, DataType.bfloat16: 2, DataType.fp8_e4m3: 1,
               DataType.fp8_e5m2: 1}


class ReduceOp(IntEnum):
    """Same values as mscclrt_redop. NOP is accepted by non-reducing collectives only."""
    SUM = 0
    PROD = 1
    MAX = 2
    MIN = 3
    AVG = 4
    NOP = 0   # alias of SUM for collectives that do not reduce (MSCCL++'s ReduceOp.NOP)


class Collective(IntEnum):
    """Same values as mscclrt_coll."""
    allreduce = 0
    allgather = 1
    reducescatter = 2
    broadcast = 3
    reduce = 4
    alltoall = 5
    gather = 6
    scatter = 7
    sendrecv = 8


class BufferMode(IntEnum):
    """Same values as mscclrt_buffer_mode."""
    any = 0
    in_place = 1
    out_of_place = 2


def parse_dtype(x: Union[DataType, str, int, Any]) -> DataType:
    """A DataType from ours, its name ("bfloat16", "fp16" and "bf16" too), or a torch.dtype."""
    if isinstance(x, DataType):
        return x
    if isinstance(x, int):
        return DataType(x)
    if isinstance(x, str):
        alias = {"fp16": "float16", "half": "float16", "bf16": "bfloat16", "fp32": "float32",
                 "float": "float32", "fp64": "float64", "double": "float64"}
        name = alias.get(x, x)
        try:
            return DataType[name]
        except KeyError:
            raise ValueError(f"unknown data type {x!r}; one of {', '.join(d.name for d in DataType)}") from None
    return torch_dtype_to_mscclrt_dtype(x)


def parse_op(x: Union[ReduceOp, str, int, Any]) -> int:
    """An operator value from ours, its name ("sum", ...), or a torch.distributed.ReduceOp."""
    if isinstance(x, ReduceOp):
        return int(x)
    if isinstance(x, int):
        return x
    if isinstance(x, str):
        try:
            return int(ReduceOp[x.upper()])
        except KeyError:
            raise ValueError(f"unknown reduction operator {x!r}; one of sum, prod, max, min, avg") from None
    return torch_op_to_mscclrt_op(x)


def parse_collective(x: Union[Collective, str, int]) -> Collective:
    if isinstance(x, Collective):
        return x
    if isinstance(x, int):
        return Collective(x)
    name = str(x).lower().replace("_", "")
    alias = {"allreduce": "allreduce", "allgather": "allgather", "reducescatter": "reducescatter",
             "alltoall": "alltoall", "sendrecv": "sendrecv"}
    try:
        return Collective[alias.get(name, name)]
    except KeyError:
        raise ValueError(f"unknown collective {x!r}; one of {', '.join(c.name for c in Collective)}") from None


def _torch_table() -> dict:
    """torch.dtype -> DataType, for the dtypes this torch has (bool travels as uint8)."""
    import torch
    table = {torch.int8: DataType.int8, torch.uint8: DataType.uint8, torch.bool: DataType.uint8,
             torch.int32: DataType.int32, torch.int64: DataType.int64,
             torch.float16: DataType.float16, torch.float32: DataType.float32,
             torch.float64: DataType.float64, torch.bfloat16: DataType.bfloat16}
    for attr, ours in (("uint32", DataType.uint32), ("uint64", DataType.uint64),
                       ("float8_e4m3fn", DataType.fp8_e4m3), ("float8_e5m2", DataType.fp8_e5m2)):
        t = getattr(torch, attr, None)
        if t is not None:
            table[t] = ours
    return table


def mscclrt_dtype_to_torch_dtype(dtype: Any) -> Any:
    """The torch.dtype of one of our data types (uint8 for uint8, never bool)."""
    ours = parse_dtype(dtype)
    for theirs, d in _torch_table().items():
        if d == ours and str(theirs) != "torch.bool":
            return theirs
    raise TypeError(f"mscclrt: this torch has no dtype for {ours.name}")


def torch_dtype_to_mscclrt_dtype(dtype: Any) -> DataType:
    """Our DataType for a torch.dtype (bool as uint8; fp8 e4m3fn/e5m2)."""
    table = _torch_table()
    try:
        return table[dtype]
    except KeyError:
        raise TypeError(f"mscclrt: no data type for {dtype} (supported: "
                        f"{', '.join(str(k) for k in table)})") from None


def torch_op_to_mscclrt_op(op: Any) -> int:
    """Our operator for a torch.distributed.ReduceOp (PREMUL_SUM is handled by the caller)."""
    import torch.distributed as dist
    R = dist.ReduceOp
    table = {R.SUM: ReduceOp.SUM, R.PRODUCT: ReduceOp.PROD, R.MAX: ReduceOp.MAX,
             R.MIN: ReduceOp.MIN, R.AVG: ReduceOp.AVG}
    key = op.op if hasattr(op, "op") and not isinstance(op, type(R.SUM)) else op
    for k, v in table.items():
        if key == k:
            return int(v)
    raise ValueError(f"mscclrt: reduction {op} is not supported here (sum, product, max, min, avg)")


__all__ = ["DataType", "ReduceOp", "Collective", "BufferMode", "parse_dtype", "parse_op",
           "parse_collective", "torch_dtype_to_mscclrt_dtype", "mscclrt_dtype_to_torch_dtype",
           "torch_op_to_mscclrt_op"]
