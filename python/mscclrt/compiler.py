"""Compiling .coll programs in process (through libmscclc) into plans, with located errors and a
cache; and Plan, a loaded MSCCL++ execution plan.

The cache key covers everything that changes a plan: the compiler library's bytes, the source
text, the parameter overrides and the options. Plans are cached in memory and on disk under
``$MSCCLRT_CACHE_DIR/plans`` (default ``$XDG_CACHE_HOME/mscclrt/plans``, else
``~/.cache/mscclrt/plans``) through libmscclrt's cache helper (mscclrt_cache_read/_write), under
the same rules as its own caches: a directory or entry that is not this user's, or that others
may write, is not used (a warning with MSCCLRT_DEBUG=WARN); entries are read without following
links or blocking and bounded in size; an entry that is not a valid plan is a miss and is
rewritten; writes are atomic, so ranks compiling the same program at once never read a partial
file. Program and plan files are read the same bounded, non-blocking way (mscclrt_read_file):
a FIFO or a device such as /dev/zero is refused at once.
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
import tempfile
import threading
from ctypes import byref, c_char_p, c_int, c_longlong, c_size_t, c_void_p
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional, Union

from . import _lib
from ._ints import int64_arg, size_arg


@dataclass(frozen=True)
class Diagnostic:
    file: str
    line: int
    column: int
    severity: str     # "error", "warning" or "note"
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}: {self.severity}: {self.message}"


_DIAG_RE = re.compile(r"^(.*?):(\d+):(\d+): (error|warning|note): (.*)$")
# a diagnostic about the whole program (no position): "file: error: message"
_DIAG_FILE_RE = re.compile(r"^(.*?): (error|warning|note): (.*)$")


def parse_diagnostics(text: str) -> list[Diagnostic]:
    """The diagnostics of a compiler report; one about the whole program has line 0, column 0."""
    out = []
    for line in text.splitlines():
        m = _DIAG_RE.match(line)
        if m:
            out.append(Diagnostic(m.group(1), int(m.group(2)), int(m.group(3)), m.group(4),
                                  m.group(5)))
            continue
        m = _DIAG_FILE_RE.match(line)
        if m:
            out.append(Diagnostic(m.group(1), 0, 0, m.group(2), m.group(3)))
    return out


class CompileError(Exception):
    """mscclc rejected the program. ``file``, ``line``, ``column`` and ``message`` locate the first
    error; ``diagnostics`` is the whole list and ``text`` the compiler's full report (source
    lines and carets included)."""

    def __init__(self, text: str, filename: str):
        self.text = text
        self.diagnostics = parse_diagnostics(text)
        errs = [d for d in self.diagnostics if d.severity == "error"] or self.diagnostics
        first = errs[0] if errs else None
        self.file = first.file if first else filename
        self.line = first.line if first else 0
        self.column = first.column if first else 0
        self.message = first.message if first else (text.strip() or "compilation failed")
        super().__init__(f"{self.file}:{self.line}:{self.column}: {self.message}"
                         if first and first.line > 0 else f"{self.file}: {self.message}")


class Plan:
    """An MSCCL++ execution plan (JSON), validated by libmscclrt when first needed."""

    def __init__(self, json_text: str, source: str = "<plan>", rank: Optional[int] = None):
        self.json = json_text
        self.source = source
        self._handle: Optional[int] = None
        self._lock = threading.Lock()
        meta = json.loads(json_text)
        self.name: str = meta.get("name", "")
        self.collective: str = meta.get("collective", "")
        self.nranks: int = len(meta.get("gpus", []))
        self.inplace: bool = bool(meta.get("inplace", False))
        self.protocol: str = meta.get("protocol", "")
        self.min_message_size: int = int(meta.get("min_message_size", 0) or 0)
        self.max_message_size: int = int(meta.get("max_message_size", 0) or 0)
        self.tags = meta.get("tags", None)
        if rank is not None and not 0 <= rank < self.nranks:
            raise ValueError(f"{source}: rank {rank} is outside the plan's {self.nranks} ranks")
        self.rank = rank

    @classmethod
    def load(cls, path: Union[str, Path]) -> "Plan":
        p = Path(path)
        return cls(read_text_file(p, PLAN_MAX_BYTES, "plan"), str(p))

    def save(self, path: Union[str, Path]) -> None:
        _atomic_write(Path(path), self.json)

    @property
    def handle(self) -> int:
        """The mscclrt_plan (parsed and validated on first use; raises MscclrtError if bad)."""
        with self._lock:
            if self._handle is None:
                rt = _lib.runtime()
                h = c_void_p()
                data = self.json.encode()
                _lib.check(rt.mscclrt_plan_parse(byref(h), data, len(data), self.source.encode()),
                           "mscclrt_plan_parse")
                self._handle = h.value
            return self._handle

    def call_sizes(self, nbytes: int) -> tuple[int, int]:
        """Per-rank (input, output) bytes for a message of nbytes (as nccl-tests counts it)."""
        i, o = c_size_t(), c_size_t()
        nbytes = size_arg(nbytes, "call_sizes nbytes")
        _lib.check(_lib.runtime().mscclrt_plan_call_sizes(self.handle, nbytes, byref(i), byref(o)),
                   "mscclrt_plan_call_sizes")
        return i.value, o.value

    def __del__(self) -> None:
        h = getattr(self, "_handle", None)
        # Algorithms made from this plan hold a reference to it (Algorithm._plan), so a plan is
        # freed only once nothing in libmscclrt borrows it.
        if h:
            try:
                _lib.runtime().mscclrt_plan_free(h)
            except Exception:   # interpreter shutdown: the library may be gone already
                pass

    def __repr__(self) -> str:
        return f"Plan({self.name!r}, {self.collective}, {self.nranks} ranks)"


# ---- the cache ----------------------------------------------------------------------------------

_mem_cache: dict[str, str] = {}
_mem_lock = threading.Lock()
_compiler_digest: Optional[str] = None


def _compiler_id() -> str:
    """A digest of the compiler library file: a rebuilt compiler never reuses old plans."""
    global _compiler_digest
    if _compiler_digest is None:
        cc = _lib.compiler()
        path = _lib.library_path(cc)
        h = hashlib.sha256(cc.mscclc_version())
        try:
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
        except OSError:
            h.update(path.encode())   # loaded through the loader's path: its name and version
        _compiler_digest = h.hexdigest()
    return _compiler_digest


PLAN_MAX_BYTES = 256 << 20      # runtime/plan/plan.h PLAN_MAX_FILE_BYTES: larger never loads
SOURCE_MAX_BYTES = 64 << 20     # compiler/mscclc.h MSCCLC_MAX_INPUT


def read_text_file(path: Union[str, Path], limit: int, what: str) -> str:
    """A UTF-8 text file of at most limit bytes, read by libmscclrt without blocking: a FIFO, a
    device (/dev/zero) or a directory raises ValueError at once; a missing file
    FileNotFoundError; bytes that are not UTF-8 ValueError. Each error names the file."""
    rt = _lib.runtime()
    data, n = c_void_p(), c_size_t()
    p = os.fsencode(os.fspath(path))
    if rt.mscclrt_read_file(p, limit, byref(data), byref(n)) != 0:
        msg = _lib.last_error() or f"{os.fspath(path)}: cannot read"
        if not os.path.lexists(p):
            raise FileNotFoundError(f"mscclrt: no such {what} file: {os.fspath(path)}")
        raise ValueError(f"mscclrt: cannot read the {what} file {msg}")
    try:
        raw = ctypes.string_at(data.value, n.value) if n.value else b""
    finally:
        rt.mscclrt_free(data)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"mscclrt: the {what} file {os.fspath(path)} is not UTF-8 text "
                         f"(byte {e.start})") from None


def _cache_setting() -> bytes:
    # read now (not libmscclrt's copy from its first use), so that a changed variable counts
    return os.fsencode(os.environ.get("MSCCLRT_CACHE_DIR", ""))


def cache_dir() -> Path:
    """Where plans are cached (libmscclrt's rules: MSCCLRT_CACHE_DIR, XDG_CACHE_HOME, HOME)."""
    base = os.environ.get("MSCCLRT_CACHE_DIR")
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if base:
        root = Path(base)
    elif xdg.startswith("/"):
        root = Path(xdg) / "mscclrt"
    else:
        root = Path.home() / ".cache" / "mscclrt"
    return root / "plans"


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _disk_get(key: str) -> Optional[str]:
    """The cached plan text for key, or None: absent, refused, or not a plan that libmscclrt
    loads (truncated, empty, not UTF-8, not JSON...): the caller compiles and rewrites it."""
    if os.environ.get("MSCCLRT_CACHE_DIR") == "none":
        return None
    rt = _lib.runtime()
    data, n = c_void_p(), c_size_t()
    _lib.check(rt.mscclrt_cache_read(_cache_setting(), b"plans", f"{key}.json".encode(),
                                     PLAN_MAX_BYTES, byref(data), byref(n)),
               "mscclrt_cache_read")
    if not data.value:
        return None
    try:
        raw = ctypes.string_at(data.value, n.value)
    finally:
        rt.mscclrt_free(data)
    try:
        text = raw.decode("utf-8")
        meta = json.loads(text)
        if not isinstance(meta, dict):
            return None
        h = c_void_p()       # the loader's full validation: a valid plan, or a miss
        if rt.mscclrt_plan_parse(byref(h), raw, len(raw), b"<plan cache>") != 0:
            return None
        rt.mscclrt_plan_free(h)
        return text
    except ValueError:      # UnicodeDecodeError and json.JSONDecodeError are ValueErrors
        return None


def _disk_put(key: str, text: str) -> None:
    if os.environ.get("MSCCLRT_CACHE_DIR") == "none":
        return
    data = text.encode()
    _lib.check(_lib.runtime().mscclrt_cache_write(_cache_setting(), b"plans",
                                                  f"{key}.json".encode(), data, len(data), None),
               "mscclrt_cache_write")   # an unwritable cache is no error: only a compile lost


def cache_key(source: str, params: Mapping[str, int], no_fusion: bool,
              target: str = "mscclrt") -> str:
    h = hashlib.sha256()
    h.update(b"mscclrt-python-plan 1\0")
    h.update(_compiler_id().encode() + b"\0")
    h.update(source.encode() + b"\0")
    for k in sorted(params):
        h.update(f"{k}={int(params[k])}\0".encode())
    h.update(b"nofusion" if no_fusion else b"fusion")
    if target != "mscclrt":
        h.update(f"\0target={target}".encode())
    return h.hexdigest()


# ---- compile -------------------------------------------------------------------------------------

def _read_source(path_or_source: Union[str, Path]) -> tuple[str, str]:
    """(text, filename) from a path or from source text itself."""
    if isinstance(path_or_source, Path):
        return read_text_file(path_or_source, SOURCE_MAX_BYTES, "program"), str(path_or_source)
    s = str(path_or_source)
    if "\n" not in s and (s.endswith(".coll") or os.path.sep in s):
        if not os.path.lexists(s):
            raise FileNotFoundError(f"mscclrt.compile: no such program file: {s}")
        return read_text_file(s, SOURCE_MAX_BYTES, "program"), s
    return s, "<source>"


def compile(path_or_source: Union[str, Path], params: Optional[Mapping[str, int]] = None,
            rank: Optional[int] = None, *, no_fusion: bool = False, cache: bool = True,
            filename: Optional[str] = None, target: str = "mscclrt") -> Plan:
    """Compiles a .coll program (a path, or the source text itself) into a Plan.

    params: overrides of the program's ``param`` declarations (as ``mscclc -D NAME=VALUE``).
    rank: the calling rank, checked against the plan's rank count (a plan holds every rank's
    program; any rank may compile it, and the cache makes the others' compiles free).
    target: the runtime the plan is for, "mscclrt" (libmscclrt, the default) or "mscclpp"
    (MSCCL++'s executor, with its limits: 64 operations per thread block), as mscclc --target.
    Raises CompileError (with file, line, column) when the program has errors."""
    if target not in ("mscclrt", "mscclpp"):
        raise ValueError(f"mscclrt.compile: target {target!r}: expected 'mscclrt' or 'mscclpp'")
    text, fname = _read_source(path_or_source)
    if filename:
        fname = filename
    params = dict(params or {})
    for k, v in params.items():
        if not isinstance(k, str) or not k.isidentifier():
            raise ValueError(f"mscclrt.compile: parameter name {k!r} is not an identifier")
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"mscclrt.compile: parameter {k} must be an int, not {type(v).__name__}")
        params[k] = int64_arg(v, f"compile parameter {k}")
    key = cache_key(text, params, no_fusion, target) if cache else ""
    if cache:
        with _mem_lock:
            hit = _mem_cache.get(key)
        if hit is None:
            hit = _disk_get(key)
        if hit is not None:
            return Plan(hit, fname, rank)
    plan_json = _compile_now(text, fname, params, no_fusion, target)
    if cache:
        with _mem_lock:
            _mem_cache[key] = plan_json
        _disk_put(key, plan_json)
    return Plan(plan_json, fname, rank)


def _compile_now(text: str, fname: str, params: Mapping[str, int], no_fusion: bool,
                 target: str = "mscclrt") -> str:
    cc = _lib.compiler()
    src = text.encode()
    names = (c_char_p * max(1, len(params)))(*[k.encode() for k in params])
    values = (c_longlong * max(1, len(params)))(*[int(v) for v in params.values()])
    out, diag = c_void_p(), c_void_p()
    nerr, nwarn = c_int(), c_int()
    rc = cc.mscclc_compile_json(src, len(src), fname.encode(), names, values, len(params),
                                (1 if no_fusion else 0) | (4 if target == "mscclpp" else 0),
                                byref(out), byref(diag), byref(nerr),
                                byref(nwarn))
    try:
        diag_text = ctypes.string_at(diag.value).decode(errors="replace") if diag.value else ""
        if rc != 0:
            if rc == 1:
                # the compiler speaks of the command's -D NAME; here the override is params[NAME]
                for k in params:
                    diag_text = diag_text.replace(f"error: -D {k}: ", f"error: params[{k!r}]: ")
                raise CompileError(diag_text, fname)
            raise RuntimeError(f"mscclrt.compile: {fname}: compiler failed (code {rc}): "
                               f"{diag_text.strip() or 'internal error'}")
        return ctypes.string_at(out.value).decode()
    finally:
        if out.value:
            cc.mscclc_free(out)
        if diag.value:
            cc.mscclc_free(diag)


def stdlib_dir() -> Path:
    """The stdlib's .coll programs: the source checkout's stdlib/, else the installed copy."""
    here = Path(__file__).resolve().parent
    # checkout, wheel, `make install` (PREFIX/lib/mscclrt/python/mscclrt -> PREFIX/share), default
    dirs = [here.parent.parent / "stdlib", here / "_libs" / "stdlib"]
    if len(here.parents) > 3:
        dirs.append(here.parents[3] / "share" / "mscclc" / "stdlib")
    dirs.append(Path("/usr/local/share/mscclc/stdlib"))
    for d in dirs:
        if d.is_dir():
            return d
    raise FileNotFoundError("mscclrt: the stdlib programs were not found (checkout or install)")


def stdlib_program(name: str) -> Path:
    """The path of a stdlib program, e.g. stdlib_program("allreduce/hier")."""
    p = stdlib_dir() / (name if name.endswith(".coll") else name + ".coll")
    if not p.exists():
        raise FileNotFoundError(f"mscclrt: no stdlib program {name!r} in {stdlib_dir()}")
    return p


__all__ = ["compile", "CompileError", "Diagnostic", "Plan", "stdlib_program", "stdlib_dir",
           "cache_dir"]
