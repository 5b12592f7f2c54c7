"""The tuning table: winners to ranges, write/read round trip, merge, atomic writes, and
validation errors, which come from libmscclrt's reader (mscclrt_tuning_validate): the file, the
entry and the field are named in the message and read back into TableError's attributes."""
from __future__ import annotations

import json
import os
from typing import Any

import pytest

from mscclrt import _table
from mscclrt._table import TableEntry, TableError

KEY: dict[str, Any] = dict(world_size=8, ranks_per_node=8, arch=90, dtype="bfloat16", op="sum")


def ranges(es: list[TableEntry]) -> list[tuple[str, int, int]]:
    return [(e.algorithm, e.min_bytes, e.max_bytes) for e in es]


def test_winners_become_contiguous_ranges() -> None:
    w = [("allreduce", 4096, "B", 16, 512), ("allreduce", 1024, "A", 0, 0),
         ("allreduce", 2048, "A", 0, 0), ("allreduce", 16384, "A", 0, 0),
         ("allgather", 1024, "native/allgather", 0, 0)]
    es = _table.entries_from_winners(w, **KEY)
    # 1024 and 2048 join into [0, 2048]; 8192 was not measured, so 16384's range starts at 4097
    assert ranges(es) == [("A", 0, 2048), ("B", 2049, 4096), ("A", 4097, 0),
                          ("native/allgather", 0, 0)]
    assert es[1].blocks == 16 and es[1].threads == 512 and es[1].key[1:] == (8, 8, 90,
                                                                             "bfloat16", "sum")
    with pytest.raises(ValueError, match="size 1024 has two winners"):
        _table.entries_from_winners([("allreduce", 1024, "A", 0, 0),
                                     ("allreduce", 1024, "B", 0, 0)])


def test_write_read_round_trip(tmp_path: "os.PathLike[str]") -> None:
    p = os.path.join(tmp_path, "tune.json")
    es = _table.entries_from_winners([("allreduce", 1024, "stdlib/allreduce/allpair_packet", 0,
                                       0), ("allreduce", 1 << 20, "x", 32, 1024)], **KEY)
    _table.write_table(p, es, meta={"tuner": "test", "date": "today"})
    t = _table.read_table(p)
    assert t.entries == es and t.meta == {"tuner": "test", "date": "today"}
    first = open(p, "rb").read()
    _table.write_table(p, es, meta={"tuner": "test", "date": "today"}, merge=False)
    assert open(p, "rb").read() == first                  # deterministic text
    doc = json.loads(first)
    assert doc["version"] == 1 and list(doc["entries"][0]) == list(_table.ENTRY_FIELDS)
    assert os.listdir(tmp_path) == ["tune.json"]          # no temporary file left


def test_merge_cuts_old_ranges_of_the_same_key_and_puts_new_first(tmp_path: "os.PathLike[str]") -> None:
    p = os.path.join(tmp_path, "tune.json")
    other = TableEntry("allreduce", "Z", **dict(KEY, dtype="any"))
    _table.write_table(p, [other, TableEntry("allreduce", "A", **KEY),
                           TableEntry("allgather", "G", **KEY, max_bytes=100)], meta="old")
    t = _table.write_table(p, [TableEntry("allreduce", "B", **KEY, min_bytes=1000,
                                          max_bytes=2000)])
    assert ranges(t.entries) == [("B", 1000, 2000), ("Z", 0, 0), ("A", 0, 999), ("A", 2001, 0),
                                 ("G", 0, 100)]
    assert t.meta == "old" and _table.read_table(p).entries == t.entries
    # an open-ended new entry replaces everything of its key above its start
    t = _table.write_table(p, [TableEntry("allreduce", "C", **KEY, min_bytes=1500)])
    assert ranges(t.entries) == [("C", 1500, 0), ("B", 1000, 1499), ("Z", 0, 0), ("A", 0, 999),
                                 ("G", 0, 100)]


def test_merge_drops_a_piece_that_would_be_size_zero_only() -> None:
    old = [TableEntry("allreduce", "A", min_bytes=0, max_bytes=10)]
    got = _table.merge_entries(old, [TableEntry("allreduce", "B", min_bytes=1, max_bytes=5)])
    assert ranges(got) == [("B", 1, 5), ("A", 6, 10)]


def test_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: "os.PathLike[str]",
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    p = os.path.join(tmp_path, "tune.json")
    _table.write_table(p, [TableEntry("allreduce", "A")])
    before = open(p, "rb").read()
    with pytest.raises(TypeError):                        # meta that is not JSON
        _table.write_table(p, [TableEntry("allreduce", "B")], meta={"x": {1, 2}})
    with pytest.raises(TableError, match=r"entries\[0\]\.threads: 100 is not a multiple of 32"):
        _table.write_table(p, [TableEntry("allreduce", "B", threads=100)])

    def no_rename(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "replace", no_rename)
    with pytest.raises(OSError, match="No space left"):
        _table.write_table(p, [TableEntry("allreduce", "B")])
    assert open(p, "rb").read() == before
    assert os.listdir(tmp_path) == ["tune.json"]


def test_a_broken_existing_table_is_not_replaced(tmp_path: "os.PathLike[str]") -> None:
    p = os.path.join(tmp_path, "tune.json")
    with open(p, "w") as f:
        f.write('{"version": 1, "entries": [{"collective": "allreduce"}]}')
    with pytest.raises(TableError) as ei:
        _table.write_table(p, [TableEntry("allreduce", "B")])
    assert str(ei.value) == f"{p}: entries[0].algorithm: missing"
    assert (ei.value.path, ei.value.index, ei.value.field) == (p, 0, "algorithm")
    _table.write_table(p, [TableEntry("allreduce", "B")], merge=False)   # an explicit overwrite
    assert ranges(_table.read_table(p).entries) == [("B", 0, 0)]


E = '{"collective": "allreduce", "algorithm": "x"'        # an entry to extend: E + ', ...}'
BAD = [
    (f'{{"version": 1, "entries": [{E}}}, {E}, "dtype": "bf17"}}]}}', 1, "dtype",
     "unknown data type 'bf17' (expected any, float16, bfloat16"),
    (f'{{"version": 1, "entries": [{E}, "op": "mean"}}]}}', 0, "op", "unknown operator 'mean'"),
    ('{"version": 1, "entries": [{"collective": "allreduse", "algorithm": "x"}]}', 0,
     "collective", "unknown collective 'allreduse'"),
    (f'{{"version": 1, "entries": [{E}, "root": 0}}]}}', 0, "", "unknown field 'root'"),
    ('{"version": 1, "entries": [{"collective": "allreduce"}]}', 0, "algorithm", "missing"),
    ('{"version": 1, "entries": [{"algorithm": "x"}]}', 0, "collective", "missing"),
    (f'{{"version": 1, "entries": [{E}, "threads": 100}}]}}', 0, "threads",
     "100 is not a multiple of 32"),
    (f'{{"version": 1, "entries": [{E}, "blocks": 2048}}]}}', 0, "blocks",
     "2048 is larger than 1024"),
    (f'{{"version": 1, "entries": [{E}, "arch": -1}}]}}', 0, "arch", "-1 is negative"),
    (f'{{"version": 1, "entries": [{E}, "min_bytes": 1.5}}]}}', 0, "min_bytes",
     "1.5 is not an integer"),
    (f'{{"version": 1, "entries": [{E}, "max_bytes": 9007199254740994}}]}}', 0, "max_bytes",
     "9007199254740994 is larger than 2^53"),
    (f'{{"version": 1, "entries": [{E}, "world_size": true}}]}}', 0, "world_size",
     "expected a number, got a boolean"),
    (f'{{"version": 1, "entries": [{E}, "dtype": 16}}]}}', 0, "dtype",
     "expected a string, got a number"),
    (f'{{"version": 1, "entries": [{E}, "min_bytes": 10, "max_bytes": 5}}]}}', 0, "min_bytes",
     "10 is above max_bytes 5"),
    (f'{{"version": 1, "entries": [{E}, "world_size": 8, "ranks_per_node": 3}}]}}', 0,
     "ranks_per_node", "3 does not divide world_size 8"),
    ('{"version": 1, "entries": [{"collective": "allreduce", '
     '"algorithm": "stdlib/allgather/ring"}]}', 0, "algorithm",
     "'stdlib/allgather/ring' does not serve allreduce"),
    ('{"version": 1, "entries": [{"collective": "allreduce", "algorithm": "native/broadcast"}]}',
     0, "algorithm", "native algorithms are named native/<collective>"),
    ('{"version": 1, "entries": [{"collective": "allreduce", "algorithm": ""}]}', 0,
     "algorithm", "empty name"),
    (f'{{"version": 1, "entries": [{E}, "op": "sum", "op": "max"}}]}}', 0, "op", "appears twice"),
    ('{"version": 1, "entries": [7]}', 0, "", "expected an object, got a number"),
    ('{"version": 1, "version": 1, "entries": []}', None, "version", "appears twice"),
    ('{"version": 2, "entries": []}', None, "version", "2 is not supported"),
    ('{"entries": []}', None, "version", "missing"),
    ('{"version": 1}', None, "entries", "missing"),
    ('{"version": 1, "entries": {}}', None, "entries", "expected an array, got an object"),
    ('{"version": 1, "entries": [], "notes": 1}', None, "", "unknown field 'notes'"),
    ('[1]', None, "", "expected a JSON object at the top level, got an array"),
    # rules only the C side had before it was the only validator: a stdlib program must exist
    ('{"version": 1, "entries": [{"collective": "allreduce", '
     '"algorithm": "stdlib/allreduce/nope"}]}', 0, "algorithm",
     "unknown algorithm 'stdlib/allreduce/nope' (no such stdlib program)"),
    (f'{{"version": 1, "entries": [{E}, "op": "sum", "dtype": "any", "op": "max"}}]}}', 0, "op",
     "appears twice"),
    ('{"version": 1, "entries": [], "meta": 1, "meta": 2}', None, "meta", "appears twice"),
]


@pytest.mark.parametrize("text,index,field,msg", BAD)
def test_validation_errors_name_entry_and_field(text: str, index: int | None, field: str,
                                                msg: str) -> None:
    with pytest.raises(TableError) as ei:
        _table.parse_table(text, "tune.json")
    e = ei.value
    assert (e.path, e.index, e.field) == ("tune.json", index, field)
    where = (f"tune.json: entries[{index}]{'.' + field if field else ''}: " if index is not None
             else f"tune.json: {field + ': ' if field else ''}")
    assert str(e).startswith(where) and msg in str(e), str(e)


def test_syntax_errors_and_files(tmp_path: "os.PathLike[str]") -> None:
    with pytest.raises(TableError, match=r"^tune\.json:2:2: not JSON \(syntax error\)$") as ei:
        _table.parse_table('{"version": 1,\n]}', "tune.json")
    assert ei.value.path == "tune.json:2:2"
    with pytest.raises(TableError, match="at the end of the text"):
        _table.parse_table('{"version": 1', "tune.json")
    with pytest.raises(TableError, match="contains a NUL byte"):
        _table.parse_table('{"version": 1}\0', "tune.json")
    with pytest.raises(TableError, match=r"^tune\.json:1:\d+: not JSON") as ei:   # cJSON: no NaN
        _table.parse_table(f'{{"version": 1, "entries": [{E}, "arch": NaN}}]}}', "tune.json")
    assert (ei.value.index, ei.value.field) == (None, "")
    missing = os.path.join(tmp_path, "nope.json")
    with pytest.raises(TableError, match=f"^{missing}: cannot read: No such file"):
        _table.read_table(missing)
    with pytest.raises(TableError, match=f"^{tmp_path}: cannot read: a directory"):
        _table.read_table(tmp_path)
    big = os.path.join(tmp_path, "big.json")
    with open(big, "wb") as f:
        f.truncate(_table.MAX_FILE_BYTES + 1)
    with pytest.raises(TableError, match="cannot read: larger than the limit of 16777216 bytes"):
        _table.read_table(big)
    latin = os.path.join(tmp_path, "latin.json")
    with open(latin, "wb") as f:
        f.write(b'{"version": 1, "entries": [{"collective": "allreduce", "algorithm": "caf\xe9"}]}')
    with pytest.raises(TableError, match=r"latin\.json: not UTF-8 at byte 72$"):
        _table.read_table(latin)
    # what the C reader accepts beyond the obvious: whole floats, wildcards, meta of any shape
    t = _table.parse_table('{"meta": [1, {"a": null}], "version": 1.0, "entries": [{"collective":'
                           ' "sendrecv", "algorithm": "mine", "world_size": 4.0, "dtype": "any",'
                           ' "op": "any", "threads": 0}]}')
    assert t.entries == [TableEntry("sendrecv", "mine", world_size=4)]
    assert isinstance(t.entries[0].world_size, int)
