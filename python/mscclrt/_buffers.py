"""Turning what callers pass as buffers and streams into raw addresses: ints, objects with
``data_ptr()`` (torch tensors), DLPack producers (``__dlpack__``) and DLPack capsules, objects with
``cuda_stream`` (torch streams)."""
from __future__ import annotations

import ctypes
from typing import Any

_PyCapsule_IsValid = ctypes.pythonapi.PyCapsule_IsValid
_PyCapsule_IsValid.restype = ctypes.c_int
_PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_PyCapsule_GetPointer = ctypes.pythonapi.PyCapsule_GetPointer
_PyCapsule_GetPointer.restype = ctypes.c_void_p
_PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


def _capsule_address(cap: Any) -> int:
    # DLManagedTensor starts with its DLTensor; a versioned one starts with a version and a
    # manager context and deleter and flags before it
    if _PyCapsule_IsValid(cap, b"dltensor"):
        t = _DLTensor.from_address(_PyCapsule_GetPointer(cap, b"dltensor"))
    elif _PyCapsule_IsValid(cap, b"dltensor_versioned"):
        base = _PyCapsule_GetPointer(cap, b"dltensor_versioned")
        t = _DLTensor.from_address(base + 8 + 2 * ctypes.sizeof(ctypes.c_void_p) + 8)
    else:
        raise TypeError("mscclrt: the capsule is not a DLPack tensor (or was already consumed)")
    return (t.data or 0) + t.byte_offset


def address(buf: Any, what: str = "buffer") -> int:
    """The device (or host) address of buf."""
    if buf is None:
        return 0
    if isinstance(buf, bool):
        raise TypeError(f"mscclrt: {what} must be an address, a tensor or a DLPack object, not bool")
    if isinstance(buf, int):
        if buf < 0:
            raise ValueError(f"mscclrt: {what} address {buf} is negative")
        return buf
    if hasattr(buf, "data_ptr"):
        return int(buf.data_ptr())
    if hasattr(buf, "__dlpack__"):
        return _capsule_address(buf.__dlpack__())
    if type(buf).__name__ == "PyCapsule":
        return _capsule_address(buf)
    raise TypeError(f"mscclrt: {what} must be an address (int), a tensor (data_ptr) or a DLPack "
                    f"object, not {type(buf).__name__}")


def nbytes_of(buf: Any) -> int:
    """The size in bytes of a tensor-like buffer, or -1 when it cannot tell."""
    n = getattr(buf, "nbytes", None)
    if isinstance(n, int):
        return n
    if hasattr(buf, "numel") and hasattr(buf, "element_size"):
        return int(buf.numel()) * int(buf.element_size())
    return -1


def current_stream_handle(device: Any) -> int:
    """torch's current stream on a CUDA device (a torch.device) as a CUstream, without making a
    torch.cuda.Stream where torch offers the raw handle (inductor's get_raw_stream):
    torch.cuda.current_stream() cost an eager collective a few microseconds."""
    import torch
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return int(raw(device.index if device.index is not None else torch.cuda.current_device()))
    return int(torch.cuda.current_stream(device).cuda_stream)


def stream_handle(stream: Any, like: Any = None) -> int:
    """A CUstream: an int, an object with cuda_stream; None: torch's current stream when `like` is
    a CUDA tensor (as PyTorch users expect), else the legacy default stream 0."""
    if stream is None:
        if like is not None and getattr(like, "is_cuda", False):
            return current_stream_handle(like.device)
        return 0
    if isinstance(stream, int):
        return stream
    if hasattr(stream, "cuda_stream"):
        return int(stream.cuda_stream)
    raise TypeError(f"mscclrt: stream must be an int handle or have .cuda_stream, not "
                    f"{type(stream).__name__}")
