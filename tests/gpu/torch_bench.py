"""PyTorch timing rows of the 8-GPU run (issue "The 8-GPU run"), one configuration per torchrun:
dist.all_reduce from 1 KB to 1 GiB (fp16 and bf16), eager and inside a CUDA graph;
all_gather_into_tensor and reduce_scatter_tensor at 1 MB and 256 MB; every ReduceOp checked;
destroy_process_group timed. argv: BACKEND (nccl | mscclrt) [MAX_BYTES]. Under LD_PRELOAD of the
drop-in, backend nccl is ours; without it, PyTorch's NCCL. Rank 0 prints one table row per
measurement: "row <what> <dtype> <bytes> <mode> <us>"; tests/gpu/torch_bench.sh collects them."""
import os
import sys
import time

import torch
import torch.distributed as dist

BACKEND = sys.argv[1] if len(sys.argv) > 1 else "nccl"
MAX = int(sys.argv[2]) if len(sys.argv) > 2 else 1 << 30
RANK, WORLD = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
LOCAL = int(os.environ.get("LOCAL_RANK", "0"))
dev_index = int(os.environ.get("BENCH_DEVICE", LOCAL % torch.cuda.device_count()))
torch.cuda.set_device(dev_index)
DEV = torch.device("cuda", dev_index)
if BACKEND == "mscclrt":
    import mscclrt.torch  # noqa: F401
dist.init_process_group(BACKEND)


def row(what, dtype, nbytes, mode, us):
    if RANK == 0:
        print(f"row {what} {str(dtype).replace('torch.', '')} {nbytes} {mode} {us:.2f}", flush=True)


def timed(fn, iters, graph):
    """Mean microseconds per call of fn, eager or as one captured graph of `iters` calls."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    dist.barrier()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    if graph:
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s), torch.cuda.graph(g, stream=s):
            for _ in range(iters):
                fn()
        torch.cuda.current_stream().wait_stream(s)
        g.replay()
        torch.cuda.synchronize()
        start.record()
        g.replay()
        end.record()
    else:
        start.record()
        for _ in range(iters):
            fn()
        end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / iters


size = 1 << 10
while size <= MAX:
    for dt in (torch.float16, torch.bfloat16):
        x = torch.ones((size // 2,), dtype=dt, device=DEV)
        iters = 100 if size <= (1 << 20) else 20 if size <= (64 << 20) else 5
        for graph in (False, True):
            us = timed(lambda: dist.all_reduce(x), iters, graph)
            row("all_reduce", dt, size, "graph" if graph else "eager", us)
    size *= 2 if size < (1 << 20) else 4

for nbytes in (1 << 20, 256 << 20):
    if nbytes > MAX:
        continue
    inp = torch.ones((nbytes // 2 // WORLD,), dtype=torch.bfloat16, device=DEV)
    out = torch.empty((nbytes // 2,), dtype=torch.bfloat16, device=DEV)
    row("all_gather_into_tensor", torch.bfloat16, nbytes, "eager",
        timed(lambda: dist.all_gather_into_tensor(out, inp), 20, False))
    big = torch.ones((nbytes // 2,), dtype=torch.bfloat16, device=DEV)
    small = torch.empty((nbytes // 2 // WORLD,), dtype=torch.bfloat16, device=DEV)
    row("reduce_scatter_tensor", torch.bfloat16, nbytes, "eager",
        timed(lambda: dist.reduce_scatter_tensor(small, big), 20, False))

ok = True
for op, want in ((dist.ReduceOp.SUM, WORLD * (WORLD + 1) / 2), (dist.ReduceOp.AVG, (WORLD + 1) / 2),
                 (dist.ReduceOp.MAX, WORLD), (dist.ReduceOp.MIN, 1),
                 (dist.ReduceOp.PRODUCT, float(torch.prod(torch.arange(1, WORLD + 1))))):
    x = torch.full((4096,), float(RANK + 1), dtype=torch.float32, device=DEV)
    dist.all_reduce(x, op=op)
    ok &= bool(torch.allclose(x, torch.full_like(x, want)))
x = torch.full((4096,), float(RANK + 1), dtype=torch.float32, device=DEV)
dist.all_reduce(x, op=dist._make_nccl_premul_sum(0.5))
ok &= bool(torch.allclose(x, torch.full_like(x, 0.5 * WORLD * (WORLD + 1) / 2)))
if RANK == 0:
    print(f"testing torch_bench/{BACKEND}/every_reduce_op ... {'passed' if ok else 'failed'}", flush=True)
t0 = time.monotonic()
dist.destroy_process_group()
if RANK == 0:
    print(f"testing torch_bench/{BACKEND}/destroy_process_group ... passed "
          f"({(time.monotonic() - t0) * 1e3:.0f} ms)", flush=True)
sys.exit(0 if ok else 1)
