"""Integer arguments on their way to C: ctypes converts a Python int to c_int, c_longlong or
c_size_t by silently keeping the low bits (2**32 + 2 becomes 2), so every integer the package
hands to libmscclrt or libmscclc goes through checked() first, which raises TypeError for a
non-integer (bool included) and ValueError for a value outside the C type's range or the
caller's, naming the argument either way."""
from __future__ import annotations

import operator
from typing import Any, Optional

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
SIZE_MAX = (1 << 64) - 1


def checked(value: Any, what: str, lo: int, hi: int, hint: Optional[str] = None) -> int:
    """value as an int in [lo, hi] (numpy integers and other __index__ types are accepted)."""
    if isinstance(value, bool):
        raise TypeError(f"mscclrt: {what} must be an int, not bool")
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"mscclrt: {what} must be an int, not {type(value).__name__}") from None
    if not lo <= v <= hi:
        raise ValueError(f"mscclrt: {what} is {v}, outside {hint or f'[{lo}, {hi}]'}")
    return v


def c_int_arg(value: Any, what: str, lo: int = INT_MIN, hi: int = INT_MAX) -> int:
    return checked(value, what, max(lo, INT_MIN), min(hi, INT_MAX))


def int64_arg(value: Any, what: str) -> int:
    return checked(value, what, INT64_MIN, INT64_MAX, "the 64-bit signed range")


def size_arg(value: Any, what: str) -> int:
    return checked(value, what, 0, SIZE_MAX, "0 to 2**64 - 1")
