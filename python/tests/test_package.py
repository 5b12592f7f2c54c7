"""The package's logic on the CPU: compiling in process with located errors and the plan cache,
algorithms and their descriptions, the collection, selector replacement and failures, the tuning
table reload, the CPU reference backend running compiled plans, and the library search."""
import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import mscclrt
from mscclrt import cpu
from mscclrt._lib import MscclrtError

BAD_SOURCE = "param N = 2\nprogram x {\n  collective allreduce\n  ranks N\n}\nfoo bar\n"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MSCCLRT_CACHE_DIR", str(tmp_path / "cache"))
    mscclrt.compiler._mem_cache.clear()
    yield
    mscclrt.register_selector(None)


def floats(vals):
    return bytearray(struct.pack(f"<{len(vals)}f", *vals))


def unfloats(buf):
    return list(struct.unpack(f"<{len(buf) // 4}f", bytes(buf)))


# ---- compile -------------------------------------------------------------------------------------

def test_compile_stdlib_program_with_params():
    p = mscclrt.compile(mscclrt.stdlib_program("allreduce/allpair_packet"), params={"N": 4}, rank=3)
    assert p.collective == "allreduce" and p.nranks == 4 and p.rank == 3
    p8 = mscclrt.compile(mscclrt.stdlib_program("allreduce/allpair_packet"), params={"N": 8})
    assert p8.nranks == 8


def test_compile_error_is_located():
    with pytest.raises(mscclrt.CompileError) as ei:
        mscclrt.compile(BAD_SOURCE, filename="bad.coll")
    e = ei.value
    assert (e.file, e.line, e.column) == ("bad.coll", 6, 5)
    assert "syntax error" in e.message
    assert "foo bar" in e.text            # the compiler's report, source line included
    assert str(e).startswith("bad.coll:6:5:")


def test_compile_error_from_file_names_the_file(tmp_path):
    f = tmp_path / "prog.coll"
    f.write_text(BAD_SOURCE)
    with pytest.raises(mscclrt.CompileError) as ei:
        mscclrt.compile(str(f))
    assert ei.value.file == str(f) and ei.value.line == 6


def test_compile_param_errors():
    with pytest.raises(mscclrt.CompileError) as ei:
        mscclrt.compile(mscclrt.stdlib_program("allreduce/allpair_packet"), params={"N": 1})
    assert ei.value.line > 0 and "N" in ei.value.message
    with pytest.raises(ValueError, match="not an identifier"):
        mscclrt.compile(mscclrt.stdlib_program("allreduce/allpair_packet"), params={"N-1": 2})
    with pytest.raises(TypeError, match="must be an int"):
        mscclrt.compile(mscclrt.stdlib_program("allreduce/allpair_packet"), params={"N": "4"})
    with pytest.raises(FileNotFoundError, match="no such program file"):
        mscclrt.compile("/nonexistent/x.coll")
    with pytest.raises(ValueError, match="outside the plan's 4 ranks"):
        mscclrt.compile(mscclrt.stdlib_program("allreduce/allpair_packet"), params={"N": 4}, rank=4)


def test_compile_unknown_param_says_params_once(tmp_path):
    f = tmp_path / "prog.coll"
    f.write_text("param N = 2\nprogram x {\n  collective allreduce\n  ranks N\n}\n")
    with pytest.raises(mscclrt.CompileError) as ei:
        mscclrt.compile(str(f), params={"X": 3})
    text = str(ei.value)
    assert text == f"{f}: params['X']: the program declares no 'param X'", text
    assert ei.value.line == 0 and ei.value.file == str(f)


def test_check_cpu_passes_and_explains_failures(tmp_path):
    plan = mscclrt.compile(mscclrt.stdlib_program("allreduce/allpair_packet"), params={"N": 4})
    assert mscclrt.check_cpu(plan, size=4096, dtype="bfloat16", op="max", iters=2) >= 0
    assert mscclrt.check_cpu(plan, ranks=4, size=0) == 0      # an empty call
    with pytest.raises(ValueError, match="ranks=2, but plan"):
        mscclrt.check_cpu(plan, ranks=2)
    # drop rank 1's last op: its output is never written, and the error says so
    import json
    p = json.loads(plan.json)
    p["gpus"][1]["threadblocks"][0]["ops"].pop()
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(p))
    with pytest.raises(MscclrtError, match="fill pattern .*so nothing wrote this element; output chunk 0 of rank 1 is written"):
        mscclrt.check_cpu(str(bad), size=4096)


def test_torch_missing_is_a_clear_import_error():
    code = ("import sys; sys.modules['torch'] = None\n"
            "try:\n    import mscclrt.torch\nexcept ImportError as e:\n    print(type(e).__name__, e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}).stdout
    assert "mscclrt.torch needs PyTorch" in out and "pip install torch" in out, out


def test_compile_target():
    src = Path(__file__).resolve().parents[2] / "examples" / "ring_allreduce_1tb.coll"
    plan = mscclrt.compile(src, {"N": 8})
    assert '"target": "mscclrt"' in plan.json
    assert mscclrt.check_cpu(plan, size=4096) >= 0
    with pytest.raises(mscclrt.CompileError, match="supports 64 per thread block"):
        mscclrt.compile(src, {"N": 8}, target="mscclpp")
    assert '"target": "mscclpp"' in mscclrt.compile(src, {"N": 4}, target="mscclpp").json
    with pytest.raises(ValueError, match="expected 'mscclrt' or 'mscclpp'"):
        mscclrt.compile(src, {"N": 4}, target="cuda")


def test_search_dirs_exist():
    assert all(d.is_dir() for d in mscclrt.search_dirs())


def test_compile_cache_key_and_disk(tmp_path):
    src = mscclrt.stdlib_program("allgather/fullmesh").read_text()
    k4 = mscclrt.compiler.cache_key(src, {"N": 4}, False)
    assert k4 == mscclrt.compiler.cache_key(src, {"N": 4}, False)
    assert k4 != mscclrt.compiler.cache_key(src, {"N": 8}, False)
    assert k4 != mscclrt.compiler.cache_key(src + "\n", {"N": 4}, False)
    assert k4 != mscclrt.compiler.cache_key(src, {"N": 4}, True)
    p = mscclrt.compile(src, params={"N": 4})
    f = mscclrt.compiler.cache_dir() / f"{k4}.json"
    assert f.exists()
    # a second process-level compile reads the disk copy: prove it by planting a marker there
    mscclrt.compiler._mem_cache.clear()
    f.write_text(p.json.replace('"name"', '"name_was_cached": 1, "name"', 1))
    again = mscclrt.compile(src, params={"N": 4})
    assert "name_was_cached" in again.json
    # cache=False compiles afresh
    fresh = mscclrt.compile(src, params={"N": 4}, cache=False)
    assert "name_was_cached" not in fresh.json


def test_plan_load_save_and_bad_plan(tmp_path):
    p = mscclrt.compile(mscclrt.stdlib_program("broadcast/direct"), params={"N": 2})
    path = tmp_path / "b.json"
    p.save(path)
    q = mscclrt.Plan.load(path)
    assert q.json == p.json and q.collective == "broadcast"
    bad = mscclrt.Plan('{"name": "x", "collective": "allreduce", "gpus": []}', "bad.json")
    with pytest.raises(MscclrtError) as ei:
        bad.handle
    assert "bad.json" in str(ei.value) and ei.value.name == "PLAN"


# ---- algorithms ------------------------------------------------------------------------------------

def test_algorithm_from_plan_properties():
    p = mscclrt.compile(mscclrt.stdlib_program("allreduce/allpair_packet"), params={"N": 4})
    a = mscclrt.Algorithm.from_plan(p, name="my_ar", tags={"small": 1, "ll": ""},
                                    min_size=1024, max_size=1 << 20, min_arch=80)
    assert a.name == "my_ar" and a.collective == "allreduce" and a.kind == "plan"
    assert a.size_range == (1024, 1 << 20)
    assert a.tags == {"small": "1", "ll": ""}
    assert a.architectures == (80, 0)
    assert a.constraint.world_size == 4
    assert a.is_dsl_based() and not a.is_kernel_based()
    # from plan JSON text and from a file
    b = mscclrt.Algorithm.from_plan(p.json)
    assert b.name == p.name


def test_algorithm_desc_contradiction_is_refused():
    p = mscclrt.compile(mscclrt.stdlib_program("allreduce/allpair_packet"), params={"N": 4})
    with pytest.raises(MscclrtError) as ei:
        mscclrt.Algorithm.from_plan(p, collective="allgather")
    assert "allgather" in str(ei.value)


def test_native_algorithm_from_source_and_file(tmp_path):
    src = 'extern "C" __global__ void k(MnArgs a) {}\n'
    a = mscclrt.Algorithm.from_native(name="nat", collective="allgather", kernel="k", source=src)
    assert a.kind == "native" and a.collective == "allgather"
    f = tmp_path / "k.cu"
    f.write_text(src)
    b = mscclrt.Algorithm.from_native(name="nat2", collective="allreduce", kernel="k", file=f)
    assert b.is_kernel_based()
    with pytest.raises(ValueError, match="exactly one"):
        mscclrt.Algorithm.from_native(name="x", collective="allreduce", kernel="k")
    with pytest.raises(MscclrtError):
        mscclrt.Algorithm.from_native(name="x", collective="allreduce", kernel="k",
                                      file=tmp_path / "missing.cu")


def test_collection_register_and_list():
    p = mscclrt.compile(mscclrt.stdlib_program("allreduce/allpair_packet"), params={"N": 4})
    a = mscclrt.Algorithm.from_plan(p, name="reg_a")
    g = mscclrt.Algorithm.from_native(name="reg_g", collective="allgather", kernel="k",
                                      source='extern "C" __global__ void k(MnArgs a) {}\n')
    coll = mscclrt.AlgorithmCollection([a, g])
    assert coll.get("reg_g") is g and [x.name for x in coll.get_algorithms("allreduce")] == ["reg_a"]
    with pytest.raises(KeyError, match="no algorithm named 'zz'"):
        coll.get("zz")
    coll.register_all()
    try:
        names = mscclrt.registered_algorithms().names()
        assert "reg_a" in names and "reg_g" in names
        assert mscclrt.registered_algorithms("allgather").names() == ["reg_g"]
        with pytest.raises(MscclrtError):
            mscclrt.register_algorithm(a)          # a name is unique in the collection
    finally:
        mscclrt.unregister_algorithm("reg_a")
        mscclrt.unregister_algorithm("reg_g")
    assert "reg_a" not in mscclrt.registered_algorithms().names()


# ---- the selector -------------------------------------------------------------------------------------

def _two_allreduce_algos():
    p = mscclrt.compile(mscclrt.stdlib_program("allreduce/allpair_packet"), params={"N": 4})
    small = mscclrt.Algorithm.from_plan(p, name="sel_small")
    big = mscclrt.Algorithm.from_native(name="sel_big", collective="allreduce", kernel="k",
                                        source='extern "C" __global__ void k(MnArgs a) {}\n')
    return small, big


def test_selector_python_function_and_replacement():
    small, big = _two_allreduce_algos()
    req = mscclrt.Request.make("allreduce", 4096, world_size=4)
    seen = []

    def by_size(r, cands):
        seen.append((r.collective, r.message_size, r.world_size, cands.names()))
        return cands.get("sel_big") if r.message_size > 2048 else None

    mscclrt.register_selector(by_size)
    ch = mscclrt.select_among(req, [small, big])
    assert ch.algorithm.name == "sel_big" and seen == [("allreduce", 4096, 4, ["sel_small", "sel_big"])]
    # no opinion: the default selector (registered plan first)
    ch = mscclrt.select_among(mscclrt.Request.make("allreduce", 1024, world_size=4), [small, big])
    assert ch.algorithm.name == "sel_small"
    # the last registration wins; tuples give blocks and threads
    mscclrt.register_selector(lambda r, c: (c.get("sel_small"), 4, 256))
    ch = mscclrt.select_among(req, [small, big])
    assert (ch.algorithm.name, ch.nblocks, ch.nthreads_per_block) == ("sel_small", 4, 256)
    # None restores the default selector
    mscclrt.register_selector(None)
    assert mscclrt.select_among(req, [small, big]).algorithm.name == "sel_small"


def test_selector_exception_fails_the_call_with_traceback(capfd):
    small, big = _two_allreduce_algos()

    def broken(r, cands):
        raise ZeroDivisionError("selector bug on purpose")

    mscclrt.register_selector(broken)
    with pytest.raises(MscclrtError) as ei:
        mscclrt.select_among(mscclrt.Request.make("allreduce", 4096, world_size=4), [small, big])
    assert "selector: failed" in str(ei.value) and ei.value.name == "INVALID_USAGE"
    err = capfd.readouterr().err
    assert "Traceback" in err and "ZeroDivisionError: selector bug on purpose" in err
    assert "selector bug on purpose" in mscclrt.last_selector_error()


def test_selector_bad_answers_are_errors(capfd):
    small, big = _two_allreduce_algos()
    req = mscclrt.Request.make("allreduce", 4096, world_size=4)
    mscclrt.register_selector(lambda r, c: 42)
    with pytest.raises(MscclrtError):
        mscclrt.select_among(req, [small, big])
    assert "expected None, an Algorithm" in capfd.readouterr().err
    mscclrt.register_selector(lambda r, c: (c.get("sel_small"), 3000, 0))
    with pytest.raises(MscclrtError, match="3000 blocks"):
        mscclrt.select_among(req, [small, big])
    with pytest.raises(TypeError):
        mscclrt.register_selector(17)


def test_tuning_table_reload(tmp_path):
    small, big = _two_allreduce_algos()
    req = mscclrt.Request.make("allreduce", 4096, world_size=4)
    t = tmp_path / "tune.json"
    t.write_text('{"version": 1, "entries": [{"collective": "allreduce", "algorithm": "sel_big",'
                 ' "blocks": 8, "threads": 512}]}')
    try:
        mscclrt.load_tuning_table(t)
        ch = mscclrt.select_among(req, [small, big])
        assert (ch.algorithm.name, ch.nblocks, ch.nthreads_per_block) == ("sel_big", 8, 512)
        bad = tmp_path / "bad.json"
        bad.write_text('{"version": 1, "entries": [{"collective": "allreduce"}]}')
        with pytest.raises(MscclrtError, match="entries\\[0\\]"):
            mscclrt.load_tuning_table(bad)
        assert mscclrt.select_among(req, [small, big]).algorithm.name == "sel_big"
    finally:
        mscclrt.load_tuning_table(None)
    assert mscclrt.select_among(req, [small, big]).algorithm.name == "sel_small"


# ---- the CPU backend ----------------------------------------------------------------------------------

@pytest.mark.parametrize("prog,n", [("allreduce/allpair_packet", 4), ("allreduce/rs_ag_simple", 3),
                                    ("allreduce/rs_ag_packet", 8)])
def test_cpu_allreduce(prog, n):
    p = mscclrt.compile(mscclrt.stdlib_program(prog), params={"N": n})
    nbytes = 64 * n * 4
    ib, ob = p.call_sizes(nbytes)
    cnt = ib // 4
    send = [floats([float(r + 1 + i % 7) for i in range(cnt)]) for r in range(n)]
    recv = send if p.inplace else [bytearray(ob) for _ in range(n)]
    expect = [sum(float(r + 1 + i % 7) for r in range(n)) for i in range(cnt)]
    with cpu.CpuComm(n) as c:
        c.execute(p, send, recv, ib, ob, "float32", "sum")
    for r in range(n):
        assert unfloats(recv[r]) == expect


def test_cpu_allgather_and_errors():
    p = mscclrt.compile(mscclrt.stdlib_program("allgather/fullmesh"), params={"N": 4})
    ib, ob = p.call_sizes(4 * 2048)
    send = [floats([float(r)] * (ib // 4)) for r in range(4)]
    recv = [bytearray(ob) for _ in range(4)]
    with cpu.CpuComm(4) as c:
        c.execute(p, send, recv, ib, ob, "float32")
        for r in range(4):
            assert unfloats(recv[r]) == sum(([float(k)] * (ib // 4) for k in range(4)), [])
        with pytest.raises(ValueError, match="rank 1's buffer has 4 bytes"):
            c.execute(p, send, [recv[0], bytearray(4), recv[2], recv[3]], ib, ob, "float32")
        with pytest.raises(ValueError, match="need 4 send and recv buffers"):
            c.execute(p, send[:2], recv, ib, ob, "float32")
        with pytest.raises(MscclrtError) as ei:
            big = [bytearray(ob + 64) for _ in range(4)]
            c.execute(p, big, big, ib + 4, ob + 16, "float32")   # sizes the plan cannot take
        assert ei.value.code != 0
    with pytest.raises(TypeError, match="writable"):
        with cpu.CpuComm(4) as c:
            c.execute(p, [bytes(ib)] * 4, recv, ib, ob, "float32")


# ---- types and the library search ---------------------------------------------------------------------

def test_types():
    assert mscclrt.DataType.bfloat16 == 9 and mscclrt.DataType.bfloat16.size == 2
    assert mscclrt.types.parse_dtype("bf16") == mscclrt.DataType.bfloat16
    assert mscclrt.types.parse_op("max") == 2
    assert mscclrt.types.parse_collective("all_gather") == mscclrt.Collective.allgather
    with pytest.raises(ValueError, match="unknown data type 'f17'"):
        mscclrt.types.parse_dtype("f17")
    with pytest.raises(ValueError, match="unknown collective"):
        mscclrt.types.parse_collective("allsum")


def test_missing_library_names_where_it_looked(tmp_path):
    code = textwrap.dedent("""
        import sys; sys.path.insert(0, %r)
        import mscclrt._lib as L
        L.search_dirs = lambda: [__import__('pathlib').Path(%r)]
        L.RUNTIME_SONAME = 'libmscclrt_nonexistent.so.0'
        try:
            L.runtime()
        except L.LibraryNotFound as e:
            print('MISSING:', e)
    """) % (str(Path(mscclrt.__file__).parent.parent), str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "LD_PRELOAD": ""}, timeout=60)
    assert "MISSING:" in out.stdout, out.stderr
    assert "libmscclrt_nonexistent.so.0" in out.stdout and str(tmp_path) in out.stdout
    assert "MSCCLRT_LIB_DIR" in out.stdout


def test_versions():
    assert mscclrt.version() == "0.1.0"
    assert mscclrt._lib.compiler().mscclc_version() == b"0.1.0"


# ---- the tuner's command line and its table, read by the C reader ------------------------------------

def test_tune_command_arguments():
    from mscclrt import tuning
    a = tuning.parse_args(["-c", "allreduce,allgather", "-b", "4K", "-e", "64M", "--blocks", "8,16"])
    assert a.collectives == ["allreduce", "allgather"] and (a.min_bytes, a.max_bytes) == (4096, 64 << 20)
    assert a.blocks == [8, 16]
    for bad, msg in ((["-c", "allsum"], "unknown collective 'allsum'"),
                     (["-b", "8M", "-e", "1M"], "need 0 < --min-bytes <= --max-bytes"),
                     (["--blocks", "x"], "comma-separated integers"),
                     (["--timeout", "0"], "--timeout must be positive")):
        with pytest.raises(SystemExit) as ei:
            tuning.parse_args(bad)
        assert ei.value.code == 2


def test_written_table_is_read_by_the_library(tmp_path):
    from mscclrt import _table
    small, big = _two_allreduce_algos()
    entries = _table.entries_from_winners(
        [("allreduce", 1024, "sel_small", 0, 0), ("allreduce", 65536, "sel_big", 16, 512)],
        world_size=4, ranks_per_node=4, arch=90, dtype="float32", op="sum")
    path = tmp_path / "t.json"
    _table.write_table(path, entries, meta={"tuner": "test"})
    try:
        mscclrt.load_tuning_table(path)          # the C reader validates it
        pick = lambda n: mscclrt.select_among(  # noqa: E731
            mscclrt.Request.make("allreduce", n, world_size=4, dtype="float32"), [small, big])
        assert pick(512).algorithm.name == "sel_small"
        ch = pick(32768)
        assert (ch.algorithm.name, ch.nblocks, ch.nthreads_per_block) == ("sel_big", 16, 512)
        assert pick(1 << 30).algorithm.name == "sel_big"   # the last winner is open-ended
    finally:
        mscclrt.load_tuning_table(None)
