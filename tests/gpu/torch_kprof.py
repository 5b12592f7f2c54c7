"""Device time of each collective's kernel, alone: torchrun with one process per GPU captures 40
calls of one collective in a CUDA graph, replays it once to warm up and once under torch.profiler
(which reads every kernel's start and end on the device through CUPTI), and rank 0 prints per
kernel name the median duration and the median start-to-start interval. Apart from launch gaps
and host time, so a slow kernel shows as itself.
  LD_PRELOAD=<guard>:$BUILD/lib/nccl/libnccl.so.2 torchrun --standalone --nproc_per_node 2 \\
      tests/gpu/torch_kprof.py TAG        (without the drop-in: PyTorch's NCCL)
Rows: "row TAG <collective> <bytes> <kernel> n=<count> median_dur=<us> median_interval=<us>";
a "categories" row counts the graph's kernels, copies and memsets (an extra node shows there)."""
import json
import os
import sys
import tempfile

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile

RANK, WORLD = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
DEV = torch.device("cuda", RANK % torch.cuda.device_count())
torch.cuda.set_device(DEV)
dist.init_process_group("nccl", device_id=DEV)
CALLS = 40
TAG = sys.argv[1] if len(sys.argv) > 1 else "x"


def halves(nbytes):
    return torch.ones(nbytes // 2, dtype=torch.half, device=DEV)


def sendrecv(nbytes):
    a, b = halves(nbytes), halves(nbytes)

    def f():
        ops = [dist.P2POp(dist.isend, a, (RANK + 1) % WORLD),
               dist.P2POp(dist.irecv, b, (RANK - 1) % WORLD)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
    return f


def alltoall(nbytes):
    a, b = halves(nbytes), halves(nbytes)
    return lambda: dist.all_to_all_single(b, a)


def allreduce(nbytes):
    a = halves(nbytes)
    return lambda: dist.all_reduce(a)


def broadcast(nbytes):
    a = halves(nbytes)
    return lambda: dist.broadcast(a, 0)


def median(v):
    v = sorted(v)
    return v[len(v) // 2] if v else 0.0


def timeline(fn):
    """The graph's device events (kernels, copies, memsets), in start order."""
    g, s = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), torch.cuda.graph(g, stream=s):
        for _ in range(CALLS):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    for _ in range(2):   # the first profile also starts CUPTI, which a peer waits out
        g.replay()
        torch.cuda.synchronize()
        dist.barrier()
        with profile(activities=[ProfilerActivity.CUDA]) as p:
            g.replay()
            torch.cuda.synchronize()
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    p.export_chrome_trace(path)
    with open(path) as f:
        events = json.load(f).get("traceEvents", [])
    os.unlink(path)
    return sorted((e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")),
                  key=lambda e: e["ts"])


for name, make in (("sendrecv", sendrecv), ("alltoall", alltoall), ("allreduce", allreduce),
                   ("broadcast", broadcast)):
    for nbytes in (1024, 65536):
        fn = make(nbytes)
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
        dist.barrier()
        ev = timeline(fn)
        if RANK != 0:
            continue
        cats = {}
        for e in ev:
            cats[e["cat"]] = cats.get(e["cat"], 0) + 1
        print(f"row {TAG} {name} {nbytes} categories {cats}", flush=True)
        by = {}
        for e in ev:
            by.setdefault(e["name"][:40], []).append(e)
        for k, v in by.items():
            gaps = [v[i + 1]["ts"] - v[i]["ts"] for i in range(len(v) - 1)]
            print(f"row {TAG} {name} {nbytes} {k} n={len(v)} "
                  f"median_dur={median([e['dur'] for e in v]):.2f} median_interval={median(gaps):.2f}",
                  flush=True)
sys.stdout.flush()
os._exit(0)   # destroy_process_group waited out NCCL's own teardown in one run
