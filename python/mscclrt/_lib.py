"""Finding and loading the native libraries, and the ctypes declarations of their C API.

Two libraries: libmscclrt (the runtime: runs plans and collectives) and libmscclc (the compiler
as a library). When the NCCL drop-in (libmscclrt_nccl.so) is already loaded in this process
(``LD_PRELOAD``, the first approach of the torch integration), its copy of the runtime API is
used instead of loading libmscclrt: there must be exactly one algorithm registry per process, so
that algorithms and selectors registered from Python are the ones ``backend="nccl"`` selects
from.

Search order for each library: ``MSCCLRT_LIB_DIR``; the ``_libs`` folder beside this package (a
``pip install`` copies the built libraries there); the repository's ``build/lib`` when the
package runs from a source checkout (``pip install -e``); ``<sys.prefix>/lib``,
``/usr/local/lib`` and the dynamic loader's own search path.
"""
from __future__ import annotations

import ctypes
import os
import sys
import threading
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char_p, c_int,
                    c_longlong, c_size_t, c_uint64, c_void_p)
from pathlib import Path
from typing import Optional

_HERE = Path(__file__).resolve().parent

RUNTIME_SONAME = "libmscclrt.so.0"
COMPILER_SONAME = "libmscclc.so.0"
DROPIN_NAME = "libmscclrt_nccl.so"


class LibraryNotFound(ImportError):
    """A native library of the package could not be found or loaded; says where it looked."""


def search_dirs() -> list[Path]:
    """The existing folders where the libraries are looked for, in order (MSCCLRT_LIB_DIR first),
    before the dynamic loader's own search path."""
    dirs: list[Path] = []
    env = os.environ.get("MSCCLRT_LIB_DIR")
    if env:
        dirs += [Path(p) for p in env.split(os.pathsep) if p]
    dirs.append(_HERE / "_libs")
    repo_build = _HERE.parent.parent / "build" / "lib"   # python/mscclrt -> <repo>/build/lib
    dirs.append(repo_build)
    dirs.append(Path(sys.prefix) / "lib")
    dirs.append(Path("/usr/local/lib"))
    return [d for d in dirs if d.is_dir()]   # only folders that exist: a list to act on


def _load(soname: str, what: str) -> ctypes.CDLL:
    tried: list[str] = []
    for d in search_dirs():
        p = d / soname
        if p.exists():
            try:
                return ctypes.CDLL(str(p))
            except OSError as e:   # present but unloadable: say why, do not fall through silently
                raise LibraryNotFound(f"mscclrt: {what} {p} exists but cannot be loaded: {e}") from e
        tried.append(str(d))
    try:
        return ctypes.CDLL(soname)   # the loader's path (LD_LIBRARY_PATH, ldconfig)
    except OSError:
        tried.append("the dynamic loader's search path")
    raise LibraryNotFound(
        f"mscclrt: cannot find {what} ({soname}); looked in: {', '.join(tried)}. Build it with "
        f"'make' in the repository, or set MSCCLRT_LIB_DIR to the folder that holds it.")


def _preloaded_dropin() -> Optional[ctypes.CDLL]:
    """The NCCL drop-in if this process already holds it (it exports the whole mscclrt_* API)."""
    candidates = []
    try:
        candidates.append(ctypes.CDLL(None))          # the global scope: LD_PRELOAD lands here
    except OSError:
        pass
    for name in ("libnccl.so.2", DROPIN_NAME, DROPIN_NAME + ".2"):
        try:
            candidates.append(ctypes.CDLL(name, mode=os.RTLD_NOLOAD | os.RTLD_LAZY))
        except OSError:
            pass
    for lib in candidates:
        if hasattr(lib, "ncclMscclrtShim") and hasattr(lib, "mscclrt_algo_register"):
            return lib
    return None


# ---- C types ----------------------------------------------------------------------------------

class UniqueIdC(Structure):
    _fields_ = [("internal", ctypes.c_ubyte * 128)]   # bytes with NULs: not c_char


class AlgoDescC(Structure):
    _fields_ = [("name", c_char_p), ("collective", c_int), ("min_bytes", c_uint64),
                ("max_bytes", c_uint64), ("min_arch", c_int), ("max_arch", c_int),
                ("world_size", c_int), ("ranks_per_node", c_int), ("buffer_mode", c_int),
                ("tags", c_char_p)]


class RequestC(Structure):
    _fields_ = [("collective", c_int), ("message_bytes", c_uint64), ("in_bytes", c_uint64),
                ("out_bytes", c_uint64), ("dtype", c_int), ("op", c_int), ("world_size", c_int),
                ("ranks_per_node", c_int), ("rank", c_int), ("root", c_int), ("peer", c_int),
                ("sendbuf", c_void_p), ("recvbuf", c_void_p), ("stream", c_void_p),
                ("capturing", c_int), ("arch", c_int), ("inplace", c_int), ("symmetric", c_int)]


class ChoiceC(Structure):
    _fields_ = [("algo", c_void_p), ("blocks", c_int), ("threads", c_int)]


class PlanInfoC(Structure):
    _fields_ = [("name", c_char_p), ("collective", c_char_p), ("nranks", c_int),
                ("inplace", c_int), ("protocol_ll", c_int), ("threads_per_block", c_int),
                ("alignment", ctypes.c_uint32), ("min_message_size", c_uint64),
                ("max_message_size", c_uint64)]


SELECTOR_FN = CFUNCTYPE(c_int, POINTER(RequestC), POINTER(c_void_p), c_int, POINTER(ChoiceC),
                        c_void_p)

P = c_void_p   # every opaque handle (comm, plan, algo, window) travels as a void pointer

# name: (restype, argtypes); every function returning mscclrt_result has restype c_int
_RUNTIME_API = {
    "mscclrt_version": (c_char_p, []),
    "mscclrt_result_string": (c_char_p, [c_int]),
    "mscclrt_last_error": (c_char_p, []),
    "mscclrt_dtype_name": (c_char_p, [c_int]),
    "mscclrt_dtype_size": (c_size_t, [c_int]),
    "mscclrt_cache_read": (c_int, [c_char_p, c_char_p, c_char_p, c_size_t, POINTER(c_void_p),
                                   POINTER(c_size_t)]),
    "mscclrt_cache_write": (c_int, [c_char_p, c_char_p, c_char_p, c_char_p, c_size_t,
                                    POINTER(c_int)]),
    "mscclrt_read_file": (c_int, [c_char_p, c_size_t, POINTER(c_void_p), POINTER(c_size_t)]),
    "mscclrt_free": (None, [c_void_p]),
    "mscclrt_plan_parse": (c_int, [POINTER(P), c_char_p, c_size_t, c_char_p]),
    "mscclrt_plan_load": (c_int, [POINTER(P), c_char_p]),
    "mscclrt_plan_free": (None, [P]),
    "mscclrt_plan_get_info": (c_int, [P, POINTER(PlanInfoC)]),
    "mscclrt_plan_call_sizes": (c_int, [P, c_size_t, POINTER(c_size_t), POINTER(c_size_t)]),
    "mscclrt_plan_min_bytes": (c_int, [P, POINTER(c_size_t)]),
    "mscclrt_cpu_check_plan": (c_int, [P, c_int, c_void_p, POINTER(ctypes.c_double)]),
    "mscclrt_cpu_comm_create": (c_int, [POINTER(P), c_int]),
    "mscclrt_cpu_comm_destroy": (None, [P]),
    "mscclrt_cpu_execute": (c_int, [P, P, POINTER(c_void_p), POINTER(c_void_p), c_size_t,
                                    c_size_t, c_int, c_int, c_int]),
    "mscclrt_get_unique_id": (c_int, [POINTER(UniqueIdC)]),
    "mscclrt_comm_init_rank": (c_int, [POINTER(P), c_int, UniqueIdC, c_int, c_int]),
    "mscclrt_comm_init_env": (c_int, [POINTER(P), c_int]),
    "mscclrt_comm_destroy": (c_int, [P]),
    "mscclrt_comm_abort": (c_int, [P]),
    "mscclrt_comm_revoke": (c_int, [P]),
    "mscclrt_comm_get_async_error": (c_int, [P]),
    "mscclrt_comm_split": (c_int, [P, c_int, c_int, POINTER(P)]),
    "mscclrt_comm_host_bcast": (c_int, [P, c_void_p, c_size_t, c_int]),
    "mscclrt_comm_rank": (c_int, [P, POINTER(c_int)]),
    "mscclrt_comm_size": (c_int, [P, POINTER(c_int)]),
    "mscclrt_comm_device": (c_int, [P, POINTER(c_int)]),
    "mscclrt_comm_ranks_per_node": (c_int, [P, POINTER(c_int)]),
    "mscclrt_group_start": (c_int, []),
    "mscclrt_group_end": (c_int, []),
    "mscclrt_coll_name": (c_char_p, [c_int]),
    "mscclrt_algo_from_plan": (c_int, [POINTER(P), P, POINTER(AlgoDescC)]),
    "mscclrt_algo_from_source": (c_int, [POINTER(P), c_char_p, c_char_p, POINTER(AlgoDescC)]),
    "mscclrt_algo_from_file": (c_int, [POINTER(P), c_char_p, c_char_p, POINTER(AlgoDescC)]),
    "mscclrt_algo_free": (None, [P]),
    "mscclrt_algo_get_desc": (c_int, [P, POINTER(AlgoDescC)]),
    "mscclrt_algo_kind_of": (c_int, [P]),
    "mscclrt_algo_clean_cached_contexts": (c_int, [P]),
    "mscclrt_algo_register": (c_int, [P]),
    "mscclrt_algo_unregister": (c_int, [c_char_p]),
    "mscclrt_algo_list": (c_int, [c_int, POINTER(c_void_p), c_int, POINTER(c_int)]),
    "mscclrt_algo_find": (P, [c_char_p]),
    "mscclrt_comm_algorithms": (c_int, [P, c_int, POINTER(c_void_p), c_int, POINTER(c_int)]),
    "mscclrt_set_selector": (c_int, [SELECTOR_FN, c_void_p]),
    "mscclrt_select": (c_int, [P, POINTER(RequestC), POINTER(ChoiceC)]),
    "mscclrt_tuning_load": (c_int, [c_char_p]),
    "mscclrt_tuning_validate": (c_int, [c_char_p, c_char_p, c_size_t, POINTER(c_int)]),
    "mscclrt_algo_fits": (c_int, [P, POINTER(RequestC), POINTER(c_char_p)]),
    "mscclrt_select_among": (c_int, [POINTER(RequestC), POINTER(c_void_p), c_int, POINTER(ChoiceC)]),
    "mscclrt_algo_run": (c_int, [P, P, POINTER(RequestC), c_int, c_int, c_void_p, c_size_t]),
    "mscclrt_allreduce": (c_int, [P, c_void_p, c_void_p, c_size_t, c_int, c_int, c_void_p]),
    "mscclrt_allgather": (c_int, [P, c_void_p, c_void_p, c_size_t, c_int, c_void_p]),
    "mscclrt_reducescatter": (c_int, [P, c_void_p, c_void_p, c_size_t, c_int, c_int, c_void_p]),
    "mscclrt_broadcast": (c_int, [P, c_void_p, c_void_p, c_size_t, c_int, c_int, c_void_p]),
    "mscclrt_reduce": (c_int, [P, c_void_p, c_void_p, c_size_t, c_int, c_int, c_int, c_void_p]),
    "mscclrt_alltoall": (c_int, [P, c_void_p, c_void_p, c_size_t, c_int, c_void_p]),
    "mscclrt_gather": (c_int, [P, c_void_p, c_void_p, c_size_t, c_int, c_int, c_void_p]),
    "mscclrt_scatter": (c_int, [P, c_void_p, c_void_p, c_size_t, c_int, c_int, c_void_p]),
    "mscclrt_send": (c_int, [P, c_void_p, c_size_t, c_int, c_int, c_void_p]),
    "mscclrt_recv": (c_int, [P, c_void_p, c_size_t, c_int, c_int, c_void_p]),
    "mscclrt_redop_create_premulsum": (c_int, [P, POINTER(c_int), c_void_p, c_int, c_int]),
    "mscclrt_redop_destroy": (c_int, [P, c_int]),
    "mscclrt_window_register": (c_int, [P, c_void_p, c_size_t, POINTER(P)]),
    "mscclrt_window_deregister": (c_int, [P, P]),
}

_COMPILER_API = {
    "mscclc_compile_json": (c_int, [c_char_p, c_size_t, c_char_p, POINTER(c_char_p),
                                    POINTER(c_longlong), c_int, c_int, POINTER(c_void_p),
                                    POINTER(c_void_p), POINTER(c_int), POINTER(c_int)]),
    "mscclc_free": (None, [c_void_p]),
    "mscclc_version": (c_char_p, []),
}


def _declare(lib: ctypes.CDLL, api: dict, what: str) -> None:
    missing = []
    for name, (res, args) in api.items():
        fn = getattr(lib, name, None)
        if fn is None:
            missing.append(name)
            continue
        fn.restype = res
        fn.argtypes = args
    if missing:
        raise LibraryNotFound(f"mscclrt: {what} ({getattr(lib, '_name', '?')}) lacks "
                              f"{', '.join(missing)}: it is older than this package; rebuild it")


_lock = threading.Lock()
_rt: Optional[ctypes.CDLL] = None
_cc: Optional[ctypes.CDLL] = None
_rt_is_dropin = False


def runtime() -> ctypes.CDLL:
    """The runtime API: the preloaded NCCL drop-in's when present, else libmscclrt's."""
    global _rt, _rt_is_dropin
    rt = _rt
    if rt is not None:   # loaded: no lock (every collective call comes here)
        return rt
    with _lock:
        if _rt is None:
            lib = _preloaded_dropin()
            _rt_is_dropin = lib is not None
            if lib is None:
                lib = _load(RUNTIME_SONAME, "the runtime library")
            _declare(lib, _RUNTIME_API, "the runtime library")
            _rt = lib
        return _rt


def runtime_is_dropin() -> bool:
    """True when the runtime API comes from the NCCL drop-in loaded in this process."""
    runtime()
    return _rt_is_dropin


def compiler() -> ctypes.CDLL:
    """libmscclc, the compiler (stateless: any copy serves)."""
    global _cc
    with _lock:
        if _cc is None:
            lib = _load(COMPILER_SONAME, "the compiler library")
            _declare(lib, _COMPILER_API, "the compiler library")
            _cc = lib
        return _cc


def library_path(lib: ctypes.CDLL) -> str:
    return getattr(lib, "_name", "") or ""


# ---- errors ---------------------------------------------------------------------------------------

RESULT_NAMES = ["SUCCESS", "INVALID_ARG", "INVALID_USAGE", "PLAN", "SYSTEM", "CUDA", "REMOTE",
                "TIMEOUT", "UNAVAILABLE", "INTERNAL"]


class MscclrtError(RuntimeError):
    """A libmscclrt call failed. ``code`` is the mscclrt_result value, ``name`` its name
    (e.g. "TIMEOUT"), and the message is the library's, which names what and where."""

    def __init__(self, code: int, message: str):
        self.code = code
        self.name = RESULT_NAMES[code] if 0 <= code < len(RESULT_NAMES) else f"result {code}"
        super().__init__(f"{message} [{self.name}]")


def last_error() -> str:
    s = runtime().mscclrt_last_error()
    return s.decode(errors="replace") if s else ""


def check(code: int, what: str) -> None:
    """Raises MscclrtError for a failed call, with the library's message for this thread."""
    if code != 0:
        msg = last_error() or f"{what} failed"
        raise MscclrtError(code, msg)


def version() -> str:
    return runtime().mscclrt_version().decode()


__all__ = ["LibraryNotFound", "MscclrtError", "runtime", "compiler", "check", "version",
           "runtime_is_dropin", "search_dirs"]
