"""Joining the rendezvous of the job a launcher started, for mscclrt-tune and CommGroup users
that have no torch.distributed process group.

Under torchrun, MASTER_ADDR:MASTER_PORT is not free: it is torchrun's own TCPStore (hosted by
its elastic agent, or by the c10d rendezvous of a multi-node job), so libmscclrt's environment
rendezvous, whose rank 0 listens on MASTER_PORT, failed there with "rank 0 cannot run the root
on port ... (Address already in use)". So when the launcher is torchrun, rank 0 makes a unique id
(its rendezvous root listens on a port of its own) and publishes it through torchrun's store,
whose client every rank opens; the others read it from there. Elsewhere (mpirun, Slurm, a
MASTER_PORT that a script chose) MASTER_PORT is ours, and libmscclrt's environment
rendezvous runs as before (CommGroup.from_env).

The store is anything with set(key, bytes) and a get(key) that waits for the key (torch's
TCPStore); tests pass their own.
"""
from __future__ import annotations

import itertools
import logging
import os
from datetime import timedelta
from typing import Any, Callable, Mapping, Optional

log = logging.getLogger("mscclrt.launch")

_KEY_PREFIX = "mscclrt/unique_id"
_calls = itertools.count()      # several communicators in one process get several keys


def under_torchrun(env: Mapping[str, str]) -> bool:
    """Whether this process was started by torchrun (torch.distributed.run): it sets
    TORCHELASTIC_RUN_ID for every worker, and its store then holds MASTER_PORT."""
    return bool(env.get("TORCHELASTIC_RUN_ID")) or \
        env.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() in ("1", "true")


def launcher_store(env: Mapping[str, str], timeout_s: float) -> Optional[Any]:
    """A client of torchrun's TCPStore (MASTER_ADDR:MASTER_PORT), or None when the launcher is
    not torchrun. Raises RuntimeError naming the address when the store cannot be reached."""
    if not under_torchrun(env):
        return None
    addr, port = env.get("MASTER_ADDR"), env.get("MASTER_PORT")
    if not addr or not port:
        raise RuntimeError("mscclrt: started by torchrun (TORCHELASTIC_RUN_ID is set) but "
                           "MASTER_ADDR/MASTER_PORT are not: cannot reach its store")
    try:
        from torch.distributed import TCPStore
    except ImportError as e:
        raise RuntimeError(f"mscclrt: started by torchrun but torch.distributed cannot be "
                           f"imported ({e}): cannot reach its store at {addr}:{port}") from e
    try:
        return TCPStore(addr, int(port), is_master=False, timeout=timedelta(seconds=timeout_s),
                        wait_for_workers=False)
    except Exception as e:   # torch raises RuntimeError or its DistStoreError
        raise RuntimeError(f"mscclrt: cannot connect to torchrun's store at {addr}:{port}: "
                           f"{e}") from e


def store_key(env: Mapping[str, str], call: int) -> str:
    """The key of one communicator's unique id: distinct per torchrun run, restart and call (the
    agent's store outlives worker restarts)."""
    return (f"{_KEY_PREFIX}/{env.get('TORCHELASTIC_RUN_ID', '')}/"
            f"{env.get('TORCHELASTIC_RESTART_COUNT', '0')}/{call}")


def share_unique_id(store: Any, rank: int, key: str, make: Callable[[], bytes]) -> bytes:
    """Rank 0 makes the unique id and sets it under key; every rank gets it back (store.get
    waits for it, up to the store's timeout)."""
    if rank == 0:
        store.set(key, bytes(make()))
    got = store.get(key)
    return bytes(got)


def job_rank_size(env: Mapping[str, str]) -> tuple[int, int]:
    """(RANK, WORLD_SIZE) as torchrun sets them, checked."""
    try:
        rank, size = int(env["RANK"]), int(env["WORLD_SIZE"])
    except (KeyError, ValueError) as e:
        raise RuntimeError(f"mscclrt: RANK and WORLD_SIZE must be set to integers under torchrun "
                           f"({e})") from None
    if size < 1 or not 0 <= rank < size:
        raise RuntimeError(f"mscclrt: RANK {rank} is not in WORLD_SIZE {size}")
    return rank, size


def comm_from_launcher(device: Optional[int] = None, timeout_s: float = 300.0,
                       env: Optional[Mapping[str, str]] = None,
                       store: Optional[Any] = None) -> Any:
    """The job's CommGroup: through torchrun's store when torchrun started this process (or
    through `store` when given), else from the environment (mpirun, Slurm, MASTER_ADDR/PORT)."""
    from .comm import CommGroup, UniqueId
    env = os.environ if env is None else env
    if store is None:
        store = launcher_store(env, timeout_s)
    if store is None:
        return CommGroup.from_env(device)
    rank, size = job_rank_size(env)
    key = store_key(env, next(_calls))
    uid = share_unique_id(store, rank, key, lambda: bytes(UniqueId.new()))
    log.info("rank %d of %d: unique id from the launcher's store (%s)", rank, size, key)
    return CommGroup.from_unique_id(uid, rank, size, device)


__all__ = ["comm_from_launcher", "launcher_store", "share_unique_id", "store_key",
           "under_torchrun", "job_rank_size"]
