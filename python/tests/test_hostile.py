"""Hostile inputs to the package (issue 22 items 4, 5, 9, 10): the plan cache trusts only this
user's private directories and entries (a planted valid plan is never used), heals from any
corrupt or odd entry (truncated, empty, not UTF-8, not a plan, a FIFO, a link to /dev/zero) by
compiling and rewriting it; program and plan files that are FIFOs or devices are refused at once;
integers out of their C type's range and integers passed as host buffers are refused with the
argument named."""
import json
import os
import signal
import stat
from contextlib import contextmanager

import pytest

import mscclrt
from mscclrt import cpu

PROG = "allreduce/allpair_packet"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MSCCLRT_CACHE_DIR", str(tmp_path / "cache"))
    mscclrt.compiler._mem_cache.clear()
    yield
    mscclrt.compiler._mem_cache.clear()


@contextmanager
def deadline(seconds=20):
    """Fails the test instead of hanging the suite when a read blocks."""
    def boom(*_):
        raise TimeoutError(f"blocked for {seconds} s")
    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def entry():
    """(source text, cache entry path) of the 2-rank allpair_packet plan."""
    src = mscclrt.stdlib_program(PROG).read_text()
    key = mscclrt.compiler.cache_key(src, {"N": 2}, False)
    return src, mscclrt.compiler.cache_dir() / f"{key}.json"


def planted(src, f):
    """Compiles once (so the entry exists), then plants a valid plan with a marker there."""
    p = mscclrt.compile(src, params={"N": 2})
    assert f.exists()
    f.write_text(p.json.replace('"name"', '"planted": 1, "name"', 1))
    mscclrt.compiler._mem_cache.clear()
    return p


def compile_again(src):
    mscclrt.compiler._mem_cache.clear()
    with deadline():
        return mscclrt.compile(src, params={"N": 2})


# ---- item 4: only this user's private cache is read -----------------------------------------------

def test_own_private_entry_is_read():
    src, f = entry()
    planted(src, f)
    assert '"planted"' in compile_again(src).json     # the control: a trusted entry is a hit


@pytest.mark.parametrize("where", ["root", "plans"])
@pytest.mark.parametrize("mode", [0o777, 0o775])
def test_untrusted_directory_is_not_read(where, mode):
    src, f = entry()
    planted(src, f)
    d = f.parent if where == "plans" else f.parent.parent
    d.chmod(mode)
    try:
        p = compile_again(src)
        assert '"planted"' not in p.json and p.nranks == 2
    finally:
        d.chmod(0o700)


def test_entry_others_may_write_is_not_read_and_is_rewritten():
    src, f = entry()
    planted(src, f)
    f.chmod(0o666)
    p = compile_again(src)
    assert '"planted"' not in p.json
    st = f.stat()
    assert not st.st_mode & 0o022 and '"planted"' not in f.read_text()   # healed


@pytest.mark.skipif(os.geteuid() != 0, reason="making another user's file needs root")
def test_entry_and_link_of_another_user_are_not_read(tmp_path, monkeypatch):
    src, f = entry()
    planted(src, f)
    os.chown(f, 12345, 12345)
    assert '"planted"' not in compile_again(src).json
    # the cache root as another user's link to a directory holding a planted plan
    theirs = tmp_path / "theirs"
    (theirs / "plans").mkdir(parents=True, mode=0o700)
    (theirs / "plans" / f.name).write_text(f.read_text().replace('"name"', '"planted": 1, "name"', 1))
    link = tmp_path / "link"
    link.symlink_to(theirs)
    os.lchown(link, 12345, 12345)
    monkeypatch.setenv("MSCCLRT_CACHE_DIR", str(link))
    assert '"planted"' not in compile_again(src).json


# ---- item 5: any bad entry is a miss, and rewritten ------------------------------------------------

@pytest.mark.parametrize("content", [b"", b'{"name": "trunc', b"\xff\xfe\x00garbage", b"[1, 2]",
                                     b"{}", b'{"name": "x", "gpus": "no"}'],
                         ids=["empty", "truncated", "not-utf8", "array", "empty-object", "not-a-plan"])
def test_corrupt_entry_heals(content):
    src, f = entry()
    good = mscclrt.compile(src, params={"N": 2})
    f.write_bytes(content)
    p = compile_again(src)
    assert p.json == good.json
    assert json.loads(f.read_text()) == json.loads(good.json)   # rewritten


def test_fifo_entry_does_not_block_and_heals():
    src, f = entry()
    good = mscclrt.compile(src, params={"N": 2})
    f.unlink()
    os.mkfifo(f)
    p = compile_again(src)
    assert p.json == good.json
    assert stat.S_ISREG(f.lstat().st_mode)


def test_dev_zero_link_entry_is_not_followed_and_heals():
    src, f = entry()
    good = mscclrt.compile(src, params={"N": 2})
    f.unlink()
    f.symlink_to("/dev/zero")
    p = compile_again(src)
    assert p.json == good.json
    assert stat.S_ISREG(f.lstat().st_mode)


def test_cache_none_and_unwritable_cache_still_compile(tmp_path, monkeypatch):
    src, _ = entry()
    monkeypatch.setenv("MSCCLRT_CACHE_DIR", "none")
    assert compile_again(src).nranks == 2
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("MSCCLRT_CACHE_DIR", str(blocker))
    assert compile_again(src).nranks == 2


# ---- item 10: program and plan files are read bounded and without blocking -------------------------

def test_sources_and_plans_from_fifo_or_device_are_refused(tmp_path):
    fifo = tmp_path / "prog.coll"
    os.mkfifo(fifo)
    with deadline():
        with pytest.raises(ValueError, match="FIFO"):
            mscclrt.compile(str(fifo))
        with pytest.raises(ValueError, match="FIFO"):
            mscclrt.compile(fifo)
        with pytest.raises(ValueError, match="FIFO"):
            mscclrt.Plan.load(fifo)
        with pytest.raises(ValueError, match="device"):
            mscclrt.compile("/dev/zero")
        with pytest.raises(ValueError, match="device"):
            mscclrt.Plan.load("/dev/zero")
        with pytest.raises(ValueError, match="directory"):
            mscclrt.Plan.load(tmp_path)
    bad = tmp_path / "bad.coll"
    bad.write_bytes(b"\xff\xfe program")
    with pytest.raises(ValueError, match="not UTF-8"):
        mscclrt.compile(bad)
    with pytest.raises(FileNotFoundError):
        mscclrt.Plan.load(tmp_path / "absent.json")


# ---- item 9: integers are checked before they reach C ------------------------------------------------

def test_compile_parameter_out_of_int64_range():
    for v in (2**64 + 4, 2**63, -(2**63) - 1):
        with pytest.raises(ValueError, match="compile parameter N"):
            mscclrt.compile(mscclrt.stdlib_program(PROG), params={"N": v})


def test_cpu_comm_size_out_of_int_range():
    for n in (2**32 + 2, 2**31, 0, -1):
        with pytest.raises(ValueError, match="CpuComm nranks"):
            cpu.CpuComm(n)
    with pytest.raises(TypeError, match="CpuComm nranks"):
        cpu.CpuComm(2.0)
    with pytest.raises(TypeError, match="CpuComm nranks"):
        cpu.CpuComm(True)


def test_cpu_execute_refuses_integers_as_buffers():
    p = mscclrt.compile(mscclrt.stdlib_program(PROG), params={"N": 2})
    ib, ob = p.call_sizes(1024)
    good = [bytearray(max(ib, ob)) for _ in range(2)]
    with cpu.CpuComm(2) as c:
        with pytest.raises(TypeError, match="rank 0's send buffer must be a writable buffer"):
            c.execute(p, [0x1000, 0x2000], good, ib, ob, "float32")
        with pytest.raises(TypeError, match="recv buffer must be a writable buffer"):
            c.execute(p, good, [good[0], 12345678], ib, ob, "float32")
        with pytest.raises(ValueError, match="in_bytes"):
            c.execute(p, good, good, 2**64 + ib, ob, "float32")
        with pytest.raises(ValueError, match="in_bytes"):
            c.execute(p, good, good, -1, ob, "float32")
        c.execute(p, good, good if p.inplace else [bytearray(ob) for _ in range(2)], ib, ob,
                  "float32")   # still usable


def test_plan_call_sizes_and_comm_ranks_checked():
    p = mscclrt.compile(mscclrt.stdlib_program(PROG), params={"N": 2})
    with pytest.raises(ValueError, match="nbytes"):
        p.call_sizes(2**64)
    with pytest.raises(ValueError, match="rank"):
        mscclrt.CommGroup.from_unique_id(bytes(128), 2**32, 2)
    with pytest.raises(ValueError, match="communicator size"):
        mscclrt.CommGroup.from_unique_id(bytes(128), 0, 2**32 + 2)


def test_read_text_file_bound(tmp_path):
    f = tmp_path / "p.coll"
    f.write_text("x" * 100)
    assert mscclrt.compiler.read_text_file(f, 100, "program") == "x" * 100
    with pytest.raises(ValueError, match="larger than the limit"):
        mscclrt.compiler.read_text_file(f, 99, "program")
