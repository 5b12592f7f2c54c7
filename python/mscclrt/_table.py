"""The tuning table: read, validate, merge and write the JSON file that MSCCLRT_TUNING_FILE names.

The format is libmscclrt(3) TUNING TABLE. Its rules live in the C library only
(runtime/algo/algo_tuning.c): every table this module reads, parses or writes is checked by
mscclrt_tuning_validate through ctypes, so a table it writes is one the C side accepts and its
errors are the C reader's, word for word. Files are read with mscclrt_read_file, the library's
bounded reader, under the C reader's size limit. What stays here is what the library does not
do: turning winners into entries, merging and writing. The autotuner (_tuner.py) turns per-size
winners into entries with entries_from_winners() and writes them with write_table().

Size rule (entries_from_winners): the winner measured at size s serves every size above the
previous measured size up to s, i.e. a message is served by the winner of the next measured size
at or above it (the "round up to the next power of two" rule of a power-of-two grid). The first
measured size also covers [0, s]; the last one is open-ended (max_bytes 0). Adjacent ranges with
the same (algorithm, blocks, threads) are joined.

Merge rule (merge_entries, used by write_table): entries are keyed by (collective, world_size,
ranks_per_node, arch, dtype, op). A new entry replaces the parts of old entries with the same
key that overlap its range: old ranges are cut, not dropped whole. Because the last new entry
of a run is open-ended, a run replaces everything above its first measured size for its key.
New entries are written first, so that in the C reader's "first match in file order wins" they
also beat old entries of other keys with wildcards (an old dtype "any" row cannot shadow them).
"""
from __future__ import annotations

import ctypes
import json
import os
import re
import tempfile
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from . import _lib
from .types import Collective

COLLECTIVES = tuple(Collective.__members__)   # the names of mscclrt_coll, in its order

MAX_BYTES = 2 ** 53                # every size a JSON number (a double) holds exactly
MAX_FILE_BYTES = 16 << 20          # the C reader's limit, passed to mscclrt_read_file

# entry fields in the order they are written (the man page's order)
ENTRY_FIELDS = ("collective", "world_size", "ranks_per_node", "arch", "dtype", "op",
                "min_bytes", "max_bytes", "algorithm", "blocks", "threads")


class TableError(ValueError):
    """A tuning table that does not validate, or cannot be read or written.

    The message is the C reader's: "tune.json: entries[3].dtype: unknown data type 'bf17'
    (...)". path, index (None: not about one entry) and field ("" when none) say where; for a
    JSON syntax error path carries the position ("tune.json:2:1").
    """

    def __init__(self, path: str, index: int | None, field: str, msg: str) -> None:
        self.path, self.index, self.field = path, index, field
        if index is None:
            where = f"{path}: {field}: " if field else f"{path}: "
        else:
            where = f"{path}: entries[{index}]{'.' + field if field else ''}: "
        super().__init__(where + msg)

    @classmethod
    def from_library(cls, what: str, message: str) -> "TableError":
        """The error of mscclrt_tuning_validate for the table named what, its place read back
        from the message's fixed shape (efail in algo_tuning.c: "what: entries[i].field: msg",
        "what: field: msg", "what:line:col: msg" or "what: msg"). A message of another shape
        keeps its text whole."""
        if not message.startswith(what):
            return cls(what, None, "", message)
        rest = message[len(what):]
        m = re.fullmatch(r":(\d+):(\d+): (.*)", rest, re.S)
        if m:
            return cls(f"{what}:{m[1]}:{m[2]}", None, "", m[3])
        if not rest.startswith(": "):
            return cls(what, None, "", message)
        rest = rest[2:]
        m = (re.fullmatch(r"entries\[(\d+)\](?:\.(.*))?: (appears twice)", rest, re.S) or
             re.fullmatch(r"entries\[(\d+)\](?:\.(\w+))?: (.*)", rest, re.S))
        if m:
            return cls(what, int(m[1]), m[2] or "", m[3])
        m = (re.fullmatch(r"(.*): (appears twice)", rest, re.S) or
             re.fullmatch(r"(version|entries): (.*)", rest, re.S))
        if m:
            return cls(what, None, m[1], m[2])
        return cls(what, None, "", rest)


@dataclass(frozen=True)
class TableEntry:
    """One row of the table; 0 / "any" mean "any" (max_bytes 0: no upper bound; blocks and
    threads 0: the algorithm's own launch)."""
    collective: str
    algorithm: str
    world_size: int = 0
    ranks_per_node: int = 0
    arch: int = 0                  # compute capability times ten (90 for sm_90)
    dtype: str = "any"
    op: str = "any"
    min_bytes: int = 0             # both ends included
    max_bytes: int = 0
    blocks: int = 0
    threads: int = 0

    @property
    def key(self) -> tuple[str, int, int, int, str, str]:
        """What the merge groups by: everything but the size range and the choice."""
        return (self.collective, self.world_size, self.ranks_per_node, self.arch, self.dtype,
                self.op)

    def to_json(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in ENTRY_FIELDS}


@dataclass
class Table:
    entries: list[TableEntry]      # in file order: the C reader's first match wins
    meta: Any = None               # the tuner's notes; any JSON, ignored by the library


# ---- validation and reading: the C library's ----------------------------------------------------

def validate_text(data: bytes, what: str) -> int:
    """The number of entries of a table's text, or TableError (mscclrt_tuning_validate)."""
    n = ctypes.c_int(0)
    if _lib.runtime().mscclrt_tuning_validate(os.fsencode(what), data, len(data),
                                              ctypes.byref(n)) != 0:
        raise TableError.from_library(what, _lib.last_error())
    return n.value


def _entry(obj: dict[str, Any]) -> TableEntry:
    # validated: every field is known and every number whole (cJSON, like JSON, allows 4.0)
    return TableEntry(**{k: int(v) if isinstance(v, float) else v for k, v in obj.items()})


def _parse(data: bytes, what: str) -> Table:
    validate_text(data, what)
    try:
        doc = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:   # the library takes any bytes in a string; Python, UTF-8
        raise TableError(what, None, "", f"not UTF-8 at byte {e.start}") from None
    except ValueError as e:           # what cJSON accepts and Python's json does not (01)
        raise TableError(what, None, "", f"not JSON for Python ({e})") from None
    return Table([_entry(x) for x in doc["entries"]], doc.get("meta"))


def parse_table(text: str, what: str = "<tuning table>") -> Table:
    """Parses and validates the text of a table; what names it in errors (usually the path)."""
    return _parse(text.encode("utf-8", "surrogatepass"), what)


def read_table(path: str | os.PathLike[str]) -> Table:
    """Reads and validates a table file; TableError names the file, entry and field."""
    p = os.fspath(path)
    lib = _lib.runtime()
    data, n = ctypes.c_void_p(), ctypes.c_size_t(0)
    if lib.mscclrt_read_file(os.fsencode(p), MAX_FILE_BYTES, ctypes.byref(data),
                             ctypes.byref(n)) != 0:
        why = _lib.last_error()
        raise TableError(p, None, "", "cannot read: " + (why[len(p) + 2:]
                                                         if why.startswith(p + ": ") else why))
    try:
        raw = ctypes.string_at(data, n.value) if n.value else b""
    finally:
        lib.mscclrt_free(data)
    return _parse(raw, p)


# ---- merging and writing ------------------------------------------------------------------------

def _hi(e: TableEntry) -> int:
    """The inclusive upper end, with "no bound" as 2^53 so ranges compare as numbers."""
    return e.max_bytes if e.max_bytes else MAX_BYTES


def _with_range(e: TableEntry, lo: int, max_bytes: int) -> TableEntry:
    d = e.to_json()
    d["min_bytes"], d["max_bytes"] = lo, max_bytes
    return TableEntry(**d)


def _cut(old: TableEntry, lo: int, hi: int) -> list[TableEntry]:
    """old minus the inclusive range [lo, hi]: zero, one or two pieces.

    A lower piece that would be [0, 0] is dropped: max_bytes 0 means "no bound", so the table
    cannot say "size 0 only" (only an empty message could have used it).
    """
    out = []
    if old.min_bytes < lo and lo - 1 > 0:
        out.append(_with_range(old, old.min_bytes, lo - 1))
    if _hi(old) > hi:
        out.append(_with_range(old, hi + 1, old.max_bytes))
    return out


def merge_entries(old: Sequence[TableEntry], new: Sequence[TableEntry]) -> list[TableEntry]:
    """The merge rule of the module docstring: new first, then what survives of old."""
    kept: list[TableEntry] = []
    for o in old:
        pieces = [o]
        for n in new:
            if n.key != o.key:
                continue
            pieces = [q for p in pieces for q in
                      (_cut(p, n.min_bytes, _hi(n)) if p.min_bytes <= _hi(n) and
                       n.min_bytes <= _hi(p) else [p])]
        kept.extend(pieces)
    return list(new) + kept


def entries_from_winners(winners: Iterable[tuple[str, int, str, int, int]], *,
                         world_size: int = 0, ranks_per_node: int = 0, arch: int = 0,
                         dtype: str = "any", op: str = "any") -> list[TableEntry]:
    """(collective, size, algorithm, blocks, threads) winners -> contiguous entries.

    The size rule of the module docstring; each collective is handled on its own, in the order
    collectives first appear. A size listed twice for one collective is an error.
    """
    by_coll: dict[str, list[tuple[int, str, int, int]]] = {}
    for coll, size, algo, blocks, threads in winners:
        by_coll.setdefault(coll, []).append((size, algo, blocks, threads))
    out: list[TableEntry] = []
    for coll, rows in by_coll.items():
        rows.sort()
        for a, b in zip(rows, rows[1:]):
            if a[0] == b[0]:
                raise ValueError(f"{coll}: size {a[0]} has two winners ({a[1]}, {b[1]})")
        lo = 0
        run: list[TableEntry] = []
        for i, (size, algo, blocks, threads) in enumerate(rows):
            hi = 0 if i == len(rows) - 1 else size
            e = TableEntry(coll, algo, world_size, ranks_per_node, arch, dtype, op, lo, hi,
                           blocks, threads)
            if run and (run[-1].algorithm, run[-1].blocks, run[-1].threads) == (algo, blocks,
                                                                                threads):
                run[-1] = _with_range(run[-1], run[-1].min_bytes, hi)
            else:
                run.append(e)
            lo = size + 1
        out.extend(run)
    return out


def dump_table(table: Table) -> str:
    """The text write_table() writes: deterministic, one entry per line."""
    head: dict[str, Any] = {"version": 1}
    if table.meta is not None:
        head["meta"] = table.meta
    lines = [json.dumps(e.to_json(), allow_nan=False) for e in table.entries]
    top = json.dumps(head, allow_nan=False)[:-1]
    body = ",\n  ".join(lines)
    return f"{top},\n \"entries\": [\n  {body}\n ]}}\n" if lines else f"{top}, \"entries\": []}}\n"


def write_table(path: str | os.PathLike[str], entries: Sequence[TableEntry], meta: Any = None,
                merge: bool = True) -> Table:
    """Writes entries to path atomically (a temporary file in the same directory, then rename).

    With merge, an existing file is read (it must validate: a broken table is not silently
    replaced) and merged by the module docstring's rule; its meta is replaced by meta when meta
    is given. The result is validated before anything is written, and on any error the old file
    is untouched and no temporary file is left. Returns the table written.
    """
    p = os.fspath(path)
    old = Table([], None)
    if merge and os.path.exists(p):
        old = read_table(p)
    table = Table(merge_entries(old.entries, entries) if merge else list(entries),
                  meta if meta is not None else old.meta)
    text = dump_table(table)                   # raises before any file exists if meta is bad
    validate_text(text.encode("utf-8"), p)     # what we write must pass the reader's rules
    d = os.path.dirname(os.path.abspath(p))
    fd, tmp = tempfile.mkstemp(prefix=".tune-", suffix=".tmp", dir=d)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return table
