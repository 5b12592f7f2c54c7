"""The torch examples' argument handling, without torch or a GPU: each answers --help with its
torchrun command, rejects bad arguments with a message and exit status 2, and refuses to run
outside torchrun naming the missing variable."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

EX = Path(__file__).resolve().parents[2] / "examples" / "torch"
EXAMPLES = ["default_algorithms.py", "coll_algorithm.py", "native_algorithm.py", "tuning.py"]


def run(name, *args, env=None):
    e = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR",
                                                          "MASTER_PORT")}
    e["PYTHONPATH"] = str(EX.parents[1] / "python")
    e.update(env or {})
    return subprocess.run([sys.executable, str(EX / name), *args], capture_output=True,
                          text=True, env=e, timeout=60)


@pytest.mark.parametrize("name", EXAMPLES)
def test_help_and_torchrun_line(name):
    r = run(name, "--help")
    assert r.returncode == 0, r.stderr
    assert "--size" in r.stdout
    top = (EX / name).read_text().split('"""')[1]
    assert "torchrun --nproc_per_node=" in top and f"examples/torch/{name}" in top


@pytest.mark.parametrize("name", EXAMPLES)
def test_bad_arguments(name):
    r = run(name, "--size", "lots")
    assert r.returncode == 2 and "--size: not a size: 'lots'" in r.stderr
    r = run(name, "--iters", "0")
    assert r.returncode == 2 and "--iters must be at least 1" in r.stderr
    r = run(name, "--dtype", "int3")
    assert r.returncode == 2 and "invalid choice" in r.stderr


@pytest.mark.parametrize("name", EXAMPLES)
def test_needs_torchrun(name):
    r = run(name)
    assert r.returncode == 2 and "RANK is not set: run this under torchrun" in r.stderr


def test_example_specific_checks():
    env = {"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}
    r = run("native_algorithm.py", "--blocks", "64", env=env)
    assert r.returncode == 2 and "--blocks must be 1..32" in r.stderr
    r = run("tuning.py", "--min-size", "8M", "--max-size", "1M", env=env)
    assert r.returncode == 2 and "need 0 < --min-size <= --max-size" in r.stderr
    r = run("tuning.py", "--min-size", "big", env=env)
    assert r.returncode == 2 and "must be sizes like" in r.stderr
