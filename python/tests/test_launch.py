"""Joining the launcher's rendezvous (python/mscclrt/_launch.py, issue 22 item 7): under torchrun,
MASTER_PORT is torchrun's own store, so mscclrt-tune's rank 0 could not listen there ("Address
already in use"). Without torch in the test environment, torchrun is played by a real TCP
key-value server that occupies MASTER_PORT and by a stand-in torch.distributed.TCPStore (on
PYTHONPATH) that talks to it; two rank processes must get the same unique id through it, made
by libmscclrt, and never bind MASTER_PORT. Outside torchrun the environment rendezvous is
kept (mpirun, Slurm)."""
import os
import socket
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from mscclrt import _launch

REPO = Path(__file__).resolve().parents[2]

FAKE_TORCH = '''
import socket
from datetime import timedelta


class TCPStore:
    """torch.distributed.TCPStore's client side, over the test's line protocol."""

    def __init__(self, host, port, world_size=None, is_master=False, timeout=timedelta(seconds=30),
                 wait_for_workers=True):
        assert not is_master, "mscclrt must join the launcher's store, not host one"
        self.sock = socket.create_connection((host, port), timeout=timeout.total_seconds())
        self.f = self.sock.makefile("rwb")

    def set(self, key, value):
        self.f.write(b"SET " + key.encode() + b" " + bytes(value).hex().encode() + b"\\n")
        self.f.flush()
        assert self.f.readline() == b"OK\\n"

    def get(self, key):
        self.f.write(b"GET " + key.encode() + b"\\n")
        self.f.flush()
        return bytes.fromhex(self.f.readline().decode().strip())
'''


class StoreServer:
    """The launcher's store: listens on MASTER_PORT; GET waits until the key is set."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.data, self.cv = {}, threading.Condition()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        f = c.makefile("rwb")
        for line in f:
            op, key, *rest = line.decode().split()
            with self.cv:
                if op == "SET":
                    self.data[key] = rest[0]
                    self.cv.notify_all()
                    reply = "OK"
                else:
                    self.cv.wait_for(lambda: key in self.data, timeout=30)
                    reply = self.data.get(key, "")
            f.write(reply.encode() + b"\n")
            f.flush()

    def close(self):
        self.sock.close()


@pytest.fixture
def store_server():
    s = StoreServer()
    yield s
    s.close()


def rank_env(tmp_path, port, rank, torch=True):
    fake = tmp_path / "fake"
    (fake / "torch" / "distributed").mkdir(parents=True, exist_ok=True)
    (fake / "torch" / "__init__.py").write_text("")
    (fake / "torch" / "distributed" / "__init__.py").write_text(FAKE_TORCH)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHELASTIC")}
    env.update(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(port), TORCHELASTIC_RUN_ID="tune-run", TORCHELASTIC_RESTART_COUNT="0",
               PYTHONPATH=os.pathsep.join(([str(fake)] if torch else []) + [str(REPO / "python")]))
    return env


RANK_MAIN = textwrap.dedent('''
    import os
    from mscclrt import _launch
    from mscclrt.comm import UniqueId
    store = _launch.launcher_store(os.environ, 30)
    rank, size = _launch.job_rank_size(os.environ)
    uid = _launch.share_unique_id(store, rank, _launch.store_key(os.environ, 0),
                                  lambda: bytes(UniqueId.new()))
    print(uid.hex())
''')


def test_ranks_meet_through_torchruns_store(tmp_path, store_server):
    procs = [subprocess.Popen([sys.executable, "-c", RANK_MAIN], env=rank_env(tmp_path, store_server.port, r),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in (1, 0)]            # rank 1 first: it must wait for rank 0's id
    outs = [p.communicate(timeout=60) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
    ids = {out.strip() for out, _ in outs}
    assert len(ids) == 1 and len(bytes.fromhex(ids.pop())) == 128
    assert list(store_server.data) == ["mscclrt/unique_id/tune-run/0/0"]


def test_torchrun_without_torch_names_the_store(tmp_path, store_server):
    r = subprocess.run([sys.executable, "-c", RANK_MAIN],
                       env=rank_env(tmp_path, store_server.port, 0, torch=False),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert f"cannot reach its store at 127.0.0.1:{store_server.port}" in r.stderr


def test_store_selection():
    assert not _launch.under_torchrun({"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "29500"})
    assert _launch.launcher_store({"MASTER_ADDR": "h", "MASTER_PORT": "1"}, 1) is None  # mpirun
    assert _launch.under_torchrun({"TORCHELASTIC_RUN_ID": "x"})
    assert _launch.under_torchrun({"TORCHELASTIC_USE_AGENT_STORE": "True"})
    with pytest.raises(RuntimeError, match="MASTER_ADDR/MASTER_PORT are not"):
        _launch.launcher_store({"TORCHELASTIC_RUN_ID": "x"}, 1)
    env = {"TORCHELASTIC_RUN_ID": "r", "TORCHELASTIC_RESTART_COUNT": "2"}
    assert _launch.store_key(env, 0) != _launch.store_key(env, 1)
    assert _launch.store_key(env, 0) != _launch.store_key(dict(env, TORCHELASTIC_RESTART_COUNT="3"), 0)
    with pytest.raises(RuntimeError, match="RANK 2 is not in WORLD_SIZE 2"):
        _launch.job_rank_size({"RANK": "2", "WORLD_SIZE": "2"})


def test_comm_from_launcher_picks_the_store_under_torchrun(monkeypatch):
    """The communicator is made from the store's id, never by the MASTER_PORT rendezvous."""
    from mscclrt import comm as comm_mod
    made = {}

    class DictStore(dict):
        def set(self, k, v):
            self[k] = v

        def get(self, k):
            return self[k]

    def from_unique_id(uid, rank, size, device=None):
        made.update(uid=uid, rank=rank, size=size)
        return "comm"

    def from_env(device=None):
        raise AssertionError("the environment rendezvous would bind torchrun's MASTER_PORT")

    monkeypatch.setattr(comm_mod.CommGroup, "from_unique_id", staticmethod(from_unique_id))
    monkeypatch.setattr(comm_mod.CommGroup, "from_env", staticmethod(from_env))
    monkeypatch.setattr(comm_mod.UniqueId, "new", classmethod(lambda cls: cls(b"\1" * 128)))
    env = {"TORCHELASTIC_RUN_ID": "r", "RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "h",
           "MASTER_PORT": "1"}
    assert _launch.comm_from_launcher(0, env=env, store=DictStore()) == "comm"
    assert made == {"uid": b"\1" * 128, "rank": 0, "size": 2}
    # and outside torchrun the environment rendezvous is used
    monkeypatch.setattr(comm_mod.CommGroup, "from_env", staticmethod(lambda device=None: "env"))
    assert _launch.comm_from_launcher(0, env={"RANK": "0", "WORLD_SIZE": "2"}) == "env"
