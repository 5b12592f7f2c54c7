"""Host-side rendezvous and exchange among the ranks of one job, with a timeout on everything.

The autotuner (_tuner.py) uses it to agree on timings, drop candidates and hand out recovery
ids; it needs no GPU and no libmscclrt. Rank 0 is the hub: it listens on addr:port, the other
ranks connect to it (retrying until the timeout), and every operation is one numbered round:
each rank sends its part to the hub, the hub decides the round and sends the decision back.

Missing and late ranks. The hub waits for a round at most its timeout, counted from when the
hub itself enters the round. A rank that has not arrived by then is *missing*: the hub decides
without it, and every rank that was there gets that decision. When the missing rank finally
arrives it gets the same, already decided result, marked late, so it can catch up round by round
without blocking anyone. All ranks therefore see identical results:
  * allgather() returns a list with the MISSING sentinel in the slot of each missing rank (a
    late rank finds MISSING in its own slot);
  * barrier() returns the sorted tuple of missing ranks (it contains the caller's rank when the
    caller was late);
  * broadcast() returns the root's value, or raises SyncTimeout(ranks=(root,)) on every rank
    when the root was missing.
last_round (a RoundInfo) tells any rank which round it just finished, who was missing and
whether it was late itself.

The hub is answered in time or not at all: a non-hub rank waits for a decision at most twice
the round's timeout (the hub may enter the round up to one timeout after it, then waits one
more for the others) and then raises SyncTimeout(ranks=(0,)). The hub's timeout is the one that
decides rounds; the others' only bounds their wait. The hub serves its sockets only inside an
operation (one thread, select-based, no busy waiting): a late rank is answered at the hub's next
operation.

Death. A connection that closes (the process died, or called close() while the others still
need it) makes the operation in progress and every later one raise PeerDead naming the rank, on
every rank: the hub tells the others before raising. If the hub dies, the others raise
PeerDead(rank=0). After a PeerDead the object is broken: every operation re-raises it.

Wire format: frames of b"MSY1", a 4-byte big-endian length and UTF-8 JSON. A connection must
start with a hello carrying the job key's hash, its rank, the world size, host and pid; one
with another job key, a rank out of range or already taken, or another world size, is rejected
with a message that says why (the stranger raises SyncRejected), and the job goes on.
Costs are linear in the world size per round for barrier and broadcast (allgather sends each
rank the whole list, which is what it is for). Objects must be JSON-serialisable; tuples come
back as lists.

Why a rendezvous of its own, beside libmscclrt's bootstrap and torchrun's store (_launch.py)?
Issue 18 asked whether either could carry these rounds instead; neither can, for four reasons:
  * It must outlive the communicator. After a candidate hangs, the tuner rebuilds the
    communicator with a new unique id that it hands out through this object (_tuner.py,
    recover); the communicator's bootstrap is what is being replaced then, and may be wedged.
    Only the hub's address travels over it, once, before tuning (tuning.host_sync_for).
  * Missing and late ranks (above): a round is decided without the ranks that did not come, and
    a late rank gets the decided result. libmscclrt's bootstrap has no such round: a wait that
    times out fails the operation (MSCCLRT_ERR_TIMEOUT), and its Boot is not public API.
  * Death: a closed connection is PeerDead on every rank at once. torch's TCPStore is a key-value
    store with no notice of a client that died: a dead rank would look like a late one until
    every round's timeout, and every round would leave keys in torchrun's agent store.
  * torch is optional: mscclrt-tune also runs under mpirun and Slurm, where there is no store; a
    store-based version would be a second implementation beside this one, not a replacement.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import selectors
import socket
import struct
import time
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("mscclrt.sync")

_MAGIC = b"MSY1"
_HEADER = struct.Struct(">4sI")
_MAX_FRAME = 64 << 20              # a frame claiming more is garbage, not a message of ours


class _Missing:
    """The value of a missing rank's slot in allgather()'s result (a singleton)."""
    _instance: "_Missing | None" = None

    def __new__(cls) -> "_Missing":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"

    def __reduce__(self) -> str:
        return "MISSING"           # pickles as the module's singleton (results cross processes)


MISSING: Any = _Missing()


class SyncError(Exception):
    """Something went wrong in the exchange itself (protocol, mismatched calls, I/O)."""


class SyncRejected(SyncError):
    """The hub refused this process (another job key, a bad or taken rank, another world)."""


class SyncTimeout(SyncError):
    """Ranks that did not answer in time: the hub (0) when it did not decide a round, the root of
    a broadcast that was missing, or rank 0 when a rank could not connect."""

    def __init__(self, msg: str, ranks: tuple[int, ...], round: int) -> None:
        super().__init__(msg)
        self.ranks, self.round = ranks, round


class PeerDead(SyncError):
    """A rank's connection closed: "rank 3 (host:pid) closed its connection during round 17"."""

    def __init__(self, rank: int, who: str, round: int, why: str = "closed its connection") -> None:
        super().__init__(f"rank {rank} ({who}) {why} during round {round}")
        self.rank, self.who, self.round, self.why = rank, who, round, why


@dataclass(frozen=True)
class RoundInfo:
    round: int                     # 1 for the first operation, then one more per operation
    op: str                        # "allgather", "broadcast" or "barrier"
    missing: tuple[int, ...]       # ranks the hub decided without, sorted
    late: bool                     # this rank was one of them: it got an already decided result


def _key_hash(job_key: str) -> str:
    # only a fingerprint travels: enough to tell jobs apart, and printable in an error
    return hashlib.sha256(job_key.encode()).hexdigest()[:16]


def _frame(msg: dict[str, Any]) -> bytes:
    body = json.dumps(msg, separators=(",", ":"), allow_nan=True).encode()
    if len(body) > _MAX_FRAME:
        raise SyncError(f"message of {len(body)} bytes is over the {_MAX_FRAME >> 20} MiB limit")
    return _HEADER.pack(_MAGIC, len(body)) + body


class _Conn:
    """One socket with its input buffer; frames in, frames out, all non-blocking."""

    def __init__(self, sock: socket.socket, peer: str) -> None:
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock, self.peer = sock, peer
        self.buf = bytearray()
        self.rank = -1             # -1 until its hello is accepted (hub side)
        self.who = peer            # "host:pid" once known

    def fill(self) -> bool:
        """Reads what is there; False on end of file or a reset (the peer is gone)."""
        try:
            data = self.sock.recv(1 << 16)
        except (BlockingIOError, InterruptedError):
            return True
        except (ConnectionResetError, ConnectionAbortedError, TimeoutError):
            return False
        if not data:
            return False
        self.buf += data
        return True

    def next_msg(self) -> dict[str, Any] | None:
        """The next complete frame, or None; ValueError on garbage."""
        if len(self.buf) < _HEADER.size:
            return None
        magic, n = _HEADER.unpack_from(self.buf)
        if magic != _MAGIC:
            raise ValueError(f"not a sync frame (starts with {bytes(self.buf[:4])!r})")
        if n > _MAX_FRAME:
            raise ValueError(f"frame of {n} bytes is over the {_MAX_FRAME >> 20} MiB limit")
        if len(self.buf) < _HEADER.size + n:
            return None
        body = bytes(self.buf[_HEADER.size:_HEADER.size + n])
        del self.buf[:_HEADER.size + n]
        msg = json.loads(body)
        if not isinstance(msg, dict) or not isinstance(msg.get("t"), str):
            raise ValueError("frame is not a message object")
        return msg

    def send(self, msg: dict[str, Any], deadline: float) -> bool:
        """Sends one frame by the deadline; False if the peer is gone. Messages are small, so
        this normally never waits; a peer that stops reading for a whole timeout with a full
        socket buffer is treated as gone rather than blocking the hub."""
        data = memoryview(_frame(msg))
        with selectors.DefaultSelector() as sel:
            sel.register(self.sock, selectors.EVENT_WRITE)
            while data:
                try:
                    n = self.sock.send(data)
                    data = data[n:]
                    continue
                except (BlockingIOError, InterruptedError):
                    pass
                except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
                    return False
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    return False
        return True

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class HostSync:
    """Rendezvous and exchange for `world_size` ranks (see the module docstring).

    Rank 0 binds addr:port at construction (port 0: an ephemeral port, then in .port); the others
    connect, retrying until `timeout` seconds, and raise SyncTimeout(ranks=(0,)) if they cannot.
    Every operation must be called in the same order on every rank. Not thread-safe: one thread
    at a time per object.
    """

    def __init__(self, rank: int, world_size: int, addr: str, port: int, timeout: float = 30.0,
                 job_key: str = "") -> None:
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in a world of {world_size}")
        if timeout <= 0:
            raise ValueError(f"timeout {timeout} is not positive")
        self.rank, self.world_size, self.addr, self.timeout = rank, world_size, addr, timeout
        self.last_round: RoundInfo | None = None
        self._job = _key_hash(job_key)
        self._me = f"{socket.gethostname()}:{os.getpid()}"
        self._round = 0
        self._broken: SyncError | None = None
        self._closed = False
        if rank == 0:
            try:
                self._listen = socket.create_server((addr, port),
                                                    backlog=max(16, 2 * world_size))
            except OSError as e:
                raise SyncError(f"rank 0: cannot listen on {addr}:{port}: {e.strerror or e}") from e
            self._listen.setblocking(False)
            self.port: int = self._listen.getsockname()[1]
            self._sel = selectors.DefaultSelector()
            self._sel.register(self._listen, selectors.EVENT_READ, None)
            self._peers: dict[int, _Conn] = {}          # rank -> accepted connection
            self._gone: dict[int, str] = {}             # rank -> who, after a bye
            self._parts: dict[int, dict[int, dict[str, Any]]] = {}   # rank -> round -> "put"
            self._owed: dict[int, tuple[dict[str, Any], set[int]]] = {}  # decided rounds, and
            # the missing ranks that still have to be told (each is told when it arrives late)
        else:
            self.port = port
            self._hub_who = f"{addr}:{port}"            # until the hub's welcome says who it is
            self._conn = self._connect(port)

    # ---- public operations ----------------------------------------------------------------------

    def allgather(self, obj: Any, timeout: float | None = None) -> list[Any]:
        """Every rank's obj, in rank order; MISSING for each missing rank (see module doc)."""
        res = self._op("allgather", obj, 0, timeout)
        missing = set(res["missing"])
        return [MISSING if r in missing else v for r, v in enumerate(res["data"])]

    def broadcast(self, obj: Any, root: int = 0, timeout: float | None = None) -> Any:
        """root's obj on every rank (obj is ignored elsewhere); SyncTimeout if root was missing."""
        if not 0 <= root < self.world_size:
            raise ValueError(f"broadcast root {root} is not in a world of {self.world_size}")
        res = self._op("broadcast", obj if self.rank == root else None, root, timeout)
        if root in res["missing"]:
            raise SyncTimeout(f"rank {self.rank}: broadcast root {root} was missing from round "
                              f"{res['round']}", (root,), res["round"])
        return res["data"]

    def barrier(self, timeout: float | None = None) -> tuple[int, ...]:
        """Waits for every rank (at most the timeout); returns the ranks that were missing."""
        return tuple(self._op("barrier", None, 0, timeout)["missing"])

    def close(self) -> None:
        """Leaves the job: tells the hub (or the peers) and closes the sockets. Idempotent."""
        if self._closed:
            return
        self._closed = True
        deadline = time.monotonic() + min(1.0, self.timeout)
        if self.rank == 0:
            for c in self._peers.values():
                c.send({"t": "bye"}, deadline)
                c.close()
            for key in list(self._sel.get_map().values()):
                if key.data is not None and key.data.rank < 0:
                    key.data.close()
            self._sel.close()
            self._listen.close()
        else:
            self._conn.send({"t": "bye"}, deadline)
            self._conn.close()

    def __enter__(self) -> "HostSync":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- common -----------------------------------------------------------------------------------

    def _op(self, op: str, data: Any, root: int, timeout: float | None) -> dict[str, Any]:
        if self._broken is not None:
            raise self._broken
        if self._closed:
            raise SyncError(f"rank {self.rank}: {op} after close()")
        t = self.timeout if timeout is None else timeout
        if t <= 0:
            raise ValueError(f"timeout {t} is not positive")
        self._round += 1
        res = (self._hub_round if self.rank == 0 else self._peer_round)(op, data, root, t)
        self.last_round = RoundInfo(self._round, op, tuple(res["missing"]),
                                    self.rank in res["missing"])
        return res

    # ---- peers (rank > 0) --------------------------------------------------------------------------

    def _connect(self, port: int) -> _Conn:
        deadline = time.monotonic() + self.timeout
        delay, last = 0.02, "no attempt"
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise SyncTimeout(f"rank {self.rank}: could not connect to rank 0 at "
                                  f"{self.addr}:{port} within {self.timeout:g} s ({last})", (0,), 0)
            try:
                sock = socket.create_connection((self.addr, port), timeout=max(0.05, left))
                break
            except OSError as e:
                last = e.strerror or str(e)
            time.sleep(min(delay, max(0.0, deadline - time.monotonic())))   # rank 0 not up yet
            delay = min(delay * 2, 0.5)
        conn = _Conn(sock, f"{self.addr}:{port}")
        hello = {"t": "hello", "job": self._job, "rank": self.rank, "world": self.world_size,
                 "who": self._me}
        if not conn.send(hello, deadline + 1.0):
            raise PeerDead(0, conn.peer, 0, "closed its connection before the hello")
        return conn

    def _peer_round(self, op: str, data: Any, root: int, t: float) -> dict[str, Any]:
        r = self._round
        # the hub may enter the round up to one timeout after us, then waits one more
        deadline = time.monotonic() + 2 * t
        if not self._conn.send({"t": "put", "round": r, "op": op, "root": root, "data": data},
                               deadline):
            self._broken = PeerDead(0, self._hub_who, r)
            raise self._broken
        with selectors.DefaultSelector() as sel:
            sel.register(self._conn.sock, selectors.EVENT_READ)
            while True:
                msg = self._peer_next(r)
                if msg is not None:
                    if msg["t"] == "result":
                        if msg.get("round") != r or msg.get("op") != op:
                            raise self._fail(f"rank {self.rank}: expected the result of round "
                                             f"{r} ({op}), got round {msg.get('round')} "
                                             f"({msg.get('op')})")
                        return msg
                    continue
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    # the round numbers would no longer line up: nothing can follow this
                    self._broken = SyncTimeout(f"rank {self.rank}: rank 0 ({self._hub_who}) did "
                                               f"not decide round {r} ({op}) within {2 * t:g} s",
                                               (0,), r)
                    raise self._broken
                if not self._conn.fill():
                    self._broken = PeerDead(0, self._hub_who, r)
                    raise self._broken

    def _peer_next(self, r: int) -> dict[str, Any] | None:
        """The next message from the hub that the caller has to look at (a result), handling
        the others here; None when no complete frame is buffered."""
        while True:
            try:
                msg = self._conn.next_msg()
            except ValueError as e:
                raise self._fail(f"rank {self.rank}: garbage from rank 0 ({self._hub_who}): {e}")
            if msg is None or msg["t"] == "result":
                return msg
            if msg["t"] == "welcome":
                self._hub_who = str(msg.get("who", self._hub_who))
            elif msg["t"] == "reject":
                self._broken = SyncRejected(f"rank 0 at {self._conn.peer} rejected this process "
                                            f"(rank {self.rank}, {self._me}): {msg.get('why')}")
                raise self._broken
            elif msg["t"] == "dead":
                self._broken = PeerDead(int(msg["rank"]), str(msg["who"]), int(msg["round"]),
                                        str(msg.get("why", "closed its connection")))
                raise self._broken
            elif msg["t"] == "fail":
                raise self._fail(str(msg.get("why")))
            elif msg["t"] == "bye":
                self._broken = PeerDead(0, self._hub_who, r, "left the job (close())")
                raise self._broken
            else:
                raise self._fail(f"rank {self.rank}: unknown message '{msg['t']}' from rank 0")

    def _fail(self, why: str) -> SyncError:
        self._broken = SyncError(why)
        return self._broken

    # ---- the hub (rank 0) ---------------------------------------------------------------------------

    def _hub_round(self, op: str, data: Any, root: int, t: float) -> dict[str, Any]:
        r = self._round
        deadline = time.monotonic() + t
        parts: dict[int, dict[str, Any]] = {0: {"op": op, "root": root, "data": data}}
        while True:
            for k, q in self._parts.items():
                if r in q:
                    parts[k] = q.pop(r)
            left = deadline - time.monotonic()
            if len(parts) == self.world_size or left <= 0:
                break
            for key, _ in self._sel.select(left):
                if key.data is None:
                    self._accept()
                else:
                    self._serve(key.data, r, deadline)
        for k, p in parts.items():             # every rank must be doing the same thing
            if (p.get("op"), p.get("root")) != (op, root):
                self._hub_fail(f"round {r}: rank 0 called {op} (root {root}) but rank {k} "
                               f"called {p.get('op')} (root {p.get('root')})", deadline)
        missing = sorted(set(range(self.world_size)) - parts.keys())
        if op == "allgather":
            out: Any = [parts[k]["data"] if k in parts else None for k in range(self.world_size)]
        elif op == "broadcast":
            out = parts[root]["data"] if root in parts else None
        else:
            out = None
        res = {"t": "result", "round": r, "op": op, "root": root, "data": out,
               "missing": missing, "late": False}
        for k in parts:
            if k and not self._peers[k].send(res, deadline + t):
                self._peer_dead(k, r, "closed its connection")
        if missing:
            self._owed[r] = (res, set(missing))
            log.warning("round %d (%s): rank(s) %s missing after %g s", r, op,
                        ", ".join(map(str, missing)), t)
        return res

    def _accept(self) -> None:
        try:
            sock, a = self._listen.accept()
        except (BlockingIOError, InterruptedError):
            return
        c = _Conn(sock, f"{a[0]}:{a[1]}")
        self._sel.register(sock, selectors.EVENT_READ, c)

    def _serve(self, c: _Conn, r: int, deadline: float) -> None:
        """Reads from one connection and handles every complete message in it."""
        alive = c.fill()
        while True:
            try:
                msg = c.next_msg()
            except ValueError as e:
                if c.rank < 0:
                    log.warning("dropped a connection from %s: %s", c.peer, e)
                    self._drop(c)
                    return
                self._hub_fail(f"round {r}: garbage from rank {c.rank} ({c.who}): {e}", deadline)
            if msg is None:
                break
            if c.rank < 0:
                self._hello(c, msg, deadline)
                if c.rank < 0:
                    return                     # rejected and dropped
            else:
                self._message(c, msg, r, deadline)
        if not alive:
            if c.rank < 0:
                self._drop(c)                  # a stranger or a prober went away: not our business
            else:
                self._peer_dead(c.rank, r, "closed its connection")

    def _hello(self, c: _Conn, msg: dict[str, Any], deadline: float) -> None:
        k, who = msg.get("rank"), str(msg.get("who", c.peer))
        why = None
        if msg.get("t") != "hello":
            why = f"expected a hello, got '{msg.get('t')}'"
        elif msg.get("job") != self._job:
            why = f"job key differs (this job's key hash is {self._job}, yours {msg.get('job')})"
        elif msg.get("world") != self.world_size:
            why = f"world size {msg.get('world')} is not this job's {self.world_size}"
        elif not isinstance(k, int) or not 0 < k < self.world_size:
            why = f"rank {k} is not a rank 1..{self.world_size - 1} of this job"
        elif k in self._peers or k in self._gone:
            prev = self._peers[k].who if k in self._peers else self._gone[k]
            why = f"rank {k} is already taken by {prev}"
        if why is not None:
            log.warning("rejected a connection from %s (%s): %s", c.peer, who, why)
            c.send({"t": "reject", "why": why}, deadline)
            self._drop(c)
            return
        assert isinstance(k, int)
        c.rank, c.who = k, who
        self._peers[k] = c
        self._parts[k] = {}
        if not c.send({"t": "welcome", "who": self._me}, deadline):
            self._peer_dead(k, self._round, "closed its connection")

    def _message(self, c: _Conn, msg: dict[str, Any], r: int, deadline: float) -> None:
        k = c.rank
        if msg["t"] == "bye":
            self._gone[k] = c.who
            self._peer_dead(k, r, "left the job (close())")
        if msg["t"] != "put" or not isinstance(msg.get("round"), int):
            self._hub_fail(f"round {r}: unexpected message '{msg['t']}' from rank {k}", deadline)
        q = msg["round"]
        if q == r:
            self._parts[k][q] = msg
        elif q < r and q in self._owed and k in self._owed[q][1]:
            res, owed = self._owed[q]
            if (msg.get("op"), msg.get("root")) != (res["op"], res["root"]):
                self._hub_fail(f"round {q}: rank {k} called {msg.get('op')} (root "
                               f"{msg.get('root')}) late, but the round was {res['op']} (root "
                               f"{res['root']})", deadline)
            log.info("rank %d arrived late for round %d; sent it the decided result", k, q)
            if not c.send(dict(res, late=True), deadline):
                self._peer_dead(k, r, "closed its connection")
            owed.discard(k)
            if not owed:
                del self._owed[q]
        else:
            self._hub_fail(f"round {r}: rank {k} sent its part of round {q}, which is not due",
                           deadline)

    def _drop(self, c: _Conn) -> None:
        self._sel.unregister(c.sock)
        c.close()

    def _peer_dead(self, k: int, r: int, why: str) -> None:
        """Tells every other rank that k is gone, then raises PeerDead on the hub. The other
        sockets stay open until close(), so that nobody loses the news to a reset."""
        who = self._peers[k].who if k in self._peers else self._gone.get(k, "?")
        exc = PeerDead(k, who, r, why)
        note = {"t": "dead", "rank": k, "who": who, "round": r, "why": why}
        deadline = time.monotonic() + min(1.0, self.timeout)
        for j, c in self._peers.items():
            if j != k:
                c.send(note, deadline)
        if k in self._peers:
            self._drop(self._peers.pop(k))
        self._broken = exc
        raise exc

    def _hub_fail(self, why: str, deadline: float) -> None:
        """A protocol error: every rank raises SyncError with the same text."""
        for c in self._peers.values():
            c.send({"t": "fail", "why": why}, deadline)
        self._broken = SyncError(why)
        raise self._broken


__all__ = ["HostSync", "MISSING", "RoundInfo", "SyncError", "SyncRejected", "SyncTimeout",
           "PeerDead"]
