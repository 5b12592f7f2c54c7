"""The tuning table: read, validate, merge and write the JSON file that MSCCLRT_TUNING_FILE names.

The format is libmscclrt(3) TUNING TABLE; runtime/algo/algo_tuning.c is the C reader, and
validate_table() mirrors its rules so that a table this module writes is one the C side accepts
(the one rule it cannot mirror: a "stdlib/..." name must be a program embedded in the library;
here only its "stdlib/<collective>/" prefix is checked). Pure Python, no dependency on the
library. The autotuner (_tuner.py) turns per-size winners into entries with
entries_from_winners() and writes them with write_table().

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

import json
import math
import os
import tempfile
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

COLLECTIVES = ("allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall",
               "gather", "scatter", "sendrecv")
DTYPES = ("float16", "bfloat16", "float32", "float64", "int8", "uint8", "int32", "uint32",
          "int64", "uint64", "fp8_e4m3", "fp8_e5m2")
REDOPS = ("sum", "prod", "max", "min", "avg")

MAX_BYTES = 2 ** 53                # every size a JSON number (a double) holds exactly
MAX_FILE_BYTES = 16 << 20          # the C reader refuses larger files
MAX_ENTRIES = 100000               # and more entries than this

# entry fields in the order they are written (the man page's order)
ENTRY_FIELDS = ("collective", "world_size", "ranks_per_node", "arch", "dtype", "op",
                "min_bytes", "max_bytes", "algorithm", "blocks", "threads")
# whole-number fields and their largest value, as algo_tuning.c's get_count() calls
_COUNT_MAX = {"world_size": 1 << 20, "ranks_per_node": 1 << 20, "arch": 10000,
              "min_bytes": MAX_BYTES, "max_bytes": MAX_BYTES, "blocks": 1024, "threads": 1024}


class TableError(ValueError):
    """A tuning table that does not validate, or cannot be read or written.

    The message has the C reader's shape: "tune.json: entries[3].dtype: unknown data type
    'bf17' (...)". path, index (None: not about one entry) and field ("" when none) say where.
    """

    def __init__(self, path: str, index: int | None, field: str, msg: str) -> None:
        self.path, self.index, self.field = path, index, field
        if index is None:
            where = f"{path}: {field}: " if field else f"{path}: "
        else:
            where = f"{path}: entries[{index}]{'.' + field if field else ''}: "
        super().__init__(where + msg)


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


# ---- validation ---------------------------------------------------------------------------------

def _json_type(x: Any) -> str:
    if isinstance(x, bool):
        return "a boolean"
    if isinstance(x, (int, float)):
        return "a number"
    if isinstance(x, str):
        return "a string"
    if isinstance(x, list):
        return "an array"
    if isinstance(x, dict):              # the reader's objects are a dict subclass
        return "an object"
    return "null" if x is None else type(x).__name__


def _count(x: Any, limit: int, what: str, idx: int | None, field: str) -> int:
    """A whole number in [0, limit]; 3.0 is whole, as it is for cJSON."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise TableError(what, idx, field, f"expected a number, got {_json_type(x)}")
    if x < 0:
        raise TableError(what, idx, field, f"{x!r} is negative")
    if x > MAX_BYTES:
        raise TableError(what, idx, field, f"{x!r} is larger than 2^53")
    if x != math.floor(x):
        raise TableError(what, idx, field, f"{x!r} is not an integer")
    if x > limit:
        raise TableError(what, idx, field, f"{x!r} is larger than {limit}")
    return int(x)


def _string(x: Any, what: str, idx: int | None, field: str) -> str:
    if not isinstance(x, str):
        raise TableError(what, idx, field, f"expected a string, got {_json_type(x)}")
    return x


def _check_algorithm(name: str, coll: str, what: str, idx: int) -> None:
    if not name:
        raise TableError(what, idx, "algorithm", "empty name")
    if name.startswith("stdlib/") and not name[7:].startswith(coll + "/"):
        raise TableError(what, idx, "algorithm", f"'{name}' does not serve {coll}")
    if name.startswith("native/") and not name[7:].startswith(coll):
        raise TableError(what, idx, "algorithm", f"'{name}' does not serve {coll} (native "
                         "algorithms are named native/<collective>)")


def validate_entry(obj: Any, what: str, idx: int) -> TableEntry:
    """One entry as a parsed JSON value -> TableEntry, or TableError naming the field."""
    if not isinstance(obj, dict):
        raise TableError(what, idx, "", f"expected an object, got {_json_type(obj)}")
    for k in getattr(obj, "dups", []):
        raise TableError(what, idx, k, "appears twice")
    vals: dict[str, Any] = {}
    for k, x in obj.items():
        if k == "collective":
            s = _string(x, what, idx, k)
            if s not in COLLECTIVES:
                raise TableError(what, idx, k, f"unknown collective '{s}' (expected "
                                 f"{', '.join(COLLECTIVES[:-1])} or {COLLECTIVES[-1]})")
            vals[k] = s
        elif k == "algorithm":
            vals[k] = _string(x, what, idx, k)
        elif k == "dtype":
            s = _string(x, what, idx, k)
            if s != "any" and s not in DTYPES:
                raise TableError(what, idx, k, f"unknown data type '{s}' (expected any, "
                                 f"{', '.join(DTYPES[:-1])} or {DTYPES[-1]})")
            vals[k] = s
        elif k == "op":
            s = _string(x, what, idx, k)
            if s != "any" and s not in REDOPS:
                raise TableError(what, idx, k, f"unknown operator '{s}' (expected any, "
                                 f"{', '.join(REDOPS[:-1])} or {REDOPS[-1]})")
            vals[k] = s
        elif k in _COUNT_MAX:
            v = _count(x, _COUNT_MAX[k], what, idx, k)
            if k == "threads" and v % 32:
                raise TableError(what, idx, k, f"{v} is not a multiple of 32")
            vals[k] = v
        else:
            raise TableError(what, idx, "", f"unknown field '{k}' (expected "
                             f"{', '.join(ENTRY_FIELDS[:-1])} or {ENTRY_FIELDS[-1]})")
    if "collective" not in vals:
        raise TableError(what, idx, "collective", "missing")
    if "algorithm" not in vals:
        raise TableError(what, idx, "algorithm", "missing")
    e = TableEntry(**vals)
    if e.max_bytes and e.min_bytes > e.max_bytes:
        raise TableError(what, idx, "min_bytes", f"{e.min_bytes} is above max_bytes "
                         f"{e.max_bytes}")
    if e.world_size and e.ranks_per_node and (e.ranks_per_node > e.world_size or
                                              e.world_size % e.ranks_per_node):
        raise TableError(what, idx, "ranks_per_node", f"{e.ranks_per_node} does not divide "
                         f"world_size {e.world_size}")
    _check_algorithm(e.algorithm, e.collective, what, idx)
    return e


def validate_table(doc: Any, what: str) -> Table:
    """A parsed JSON document -> Table, or TableError (the C reader's rules)."""
    if not isinstance(doc, dict):
        raise TableError(what, None, "", "expected a JSON object at the top level, got "
                         f"{_json_type(doc)}")
    for k in getattr(doc, "dups", []):
        raise TableError(what, None, k, "appears twice")
    for k in doc:
        if k not in ("version", "entries", "meta"):
            raise TableError(what, None, "", f"unknown field '{k}' (expected version, entries "
                             "or meta)")
    if "version" not in doc:
        raise TableError(what, None, "version", "missing")
    v = _count(doc["version"], 1 << 30, what, None, "version")
    if v != 1:
        raise TableError(what, None, "version", f"{v} is not supported (this library reads "
                         "version 1)")
    if "entries" not in doc:
        raise TableError(what, None, "entries", "missing")
    ents = doc["entries"]
    if not isinstance(ents, list):
        raise TableError(what, None, "entries", f"expected an array, got {_json_type(ents)}")
    if len(ents) > MAX_ENTRIES:
        raise TableError(what, None, "entries", f"{len(ents)} entries, more than the limit "
                         f"of {MAX_ENTRIES}")
    return Table([validate_entry(x, what, i) for i, x in enumerate(ents)], doc.get("meta"))


# ---- reading ------------------------------------------------------------------------------------

class _Obj(dict):  # type: ignore[type-arg]
    """A JSON object that remembers the keys it saw twice (json keeps only the last one, cJSON
    keeps both; which one counts would be a guess, so the reader refuses both)."""
    dups: list[str]


def _keep_dups(pairs: list[tuple[str, Any]]) -> _Obj:
    o = _Obj(pairs)
    seen: set[str] = set()
    o.dups = []
    for k, _ in pairs:
        if k in seen:
            o.dups.append(k)
        seen.add(k)
    return o


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")   # Python's json accepts NaN and Infinity; cJSON not


def parse_table(text: str, what: str = "<tuning table>") -> Table:
    """Parses and validates the text of a table; what names it in errors (usually the path)."""
    if "\0" in text:
        raise TableError(what, None, "", "contains a NUL byte (not JSON)")
    try:
        doc = json.loads(text, object_pairs_hook=_keep_dups, parse_constant=_no_constant)
    except json.JSONDecodeError as e:
        end = " at the end of the text" if e.pos >= len(text) else ""
        raise TableError(f"{what}:{e.lineno}:{e.colno}", None, "",
                         f"not JSON (syntax error{end}: {e.msg})") from None
    except ValueError as e:
        raise TableError(what, None, "", f"not JSON ({e})") from None
    return validate_table(doc, what)


def read_table(path: str | os.PathLike[str]) -> Table:
    """Reads and validates a table file; TableError names the file, entry and field."""
    p = os.fspath(path)
    try:
        with open(p, "rb") as f:
            st = os.fstat(f.fileno())
            if st.st_size > MAX_FILE_BYTES:
                raise TableError(p, None, "", "larger than 16 MiB")
            data = f.read()
    except OSError as e:
        raise TableError(p, None, "", f"cannot read: {e.strerror}") from e
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TableError(p, None, "", f"not UTF-8 at byte {e.start}") from None
    return parse_table(text, p)


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
    validate_table(json.loads(text), p)        # what we write must pass the reader's rules
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
