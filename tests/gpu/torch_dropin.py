"""torch_dropin.py - PyTorch's backend="nccl" on the drop-in (LD_PRELOAD=libmscclrt_nccl.so),
every rank on cuda:0, or one GPU per rank with GPU_PER_RANK=1 (run by tests/gpu/torch_dropin.sh
under torchrun). Each collective's result
is compared with what it must be, computed locally from every rank's deterministic input; eager
and inside a captured CUDA graph. Prints one "testing NAME ... passed|failed" line per check and
exits non-zero on any failure."""
import os
import sys

import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
# GPU_PER_RANK=1: rank r on GPU (local rank mod GPUs), one process per GPU; else all on cuda:0
each = os.environ.get("GPU_PER_RANK") == "1"
dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count() if each else 0)
torch.cuda.set_device(dev)
failures = 0


def report(name, ok, detail=""):
    global failures
    if rank == 0:
        print(f"testing torch {name} N={world} ... {'passed' if ok else 'failed'}"
              + (f" ({detail})" if detail and not ok else ""), flush=True)
    if not ok:
        failures += 1


def agree(ok):
    """every rank's verdict, so rank 0 reports a failure seen anywhere"""
    t = torch.tensor([0 if ok else 1], device=dev, dtype=torch.int32)
    dist.all_reduce(t)
    return int(t.item()) == 0


def data(r, n, dtype, salt=0):
    """rank r's input: small integers (exact in every dtype, no overflow for 8 ranks)"""
    idx = torch.arange(n, device=dev, dtype=torch.int64)
    v = (idx * 7 + r * 3 + salt) % 5 + 1
    return v.to(dtype)


def close(a, b, dtype):
    if dtype.is_floating_point:
        # fp8 sums round at every step (2-3 mantissa bits): a different order of the same terms
        # may land one step away
        tol = (0.55 if dtype == getattr(torch, "float8_e5m2", None) else 0.3) if dtype in FP8 else 1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-5
        return torch.allclose(a.double(), b.double(), rtol=tol, atol=tol)
    return torch.equal(a, b)


FP8 = tuple(t for t in (getattr(torch, "float8_e4m3fn", None), getattr(torch, "float8_e5m2", None)) if t)


def check_all_reduce():
    ops = {"sum": dist.ReduceOp.SUM, "product": dist.ReduceOp.PRODUCT, "min": dist.ReduceOp.MIN,
           "max": dist.ReduceOp.MAX, "avg": dist.ReduceOp.AVG}
    dtypes = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32,
              torch.int64, torch.uint8, torch.int8]
    for dt in dtypes:
        for name, op in ops.items():
            if name == "avg" and not dt.is_floating_point:
                continue   # PyTorch refuses avg on integers
            ok = True
            for n in (1, 1000, 65537):
                x = data(rank, n, dt)
                ins = [data(r, n, dt).double() for r in range(world)]
                if name == "sum":
                    want = sum(ins)
                elif name == "product":
                    want = torch.stack(ins).prod(0)
                elif name == "min":
                    want = torch.stack(ins).min(0).values
                elif name == "max":
                    want = torch.stack(ins).max(0).values
                else:
                    want = sum(ins) / world
                if not dt.is_floating_point:   # integers wrap as the GPU computes them
                    want = want.to(torch.int64).to(dt)
                dist.all_reduce(x, op=op)
                ok = ok and close(x, want.to(dt), dt)
            report(f"all_reduce {name} {str(dt)[6:]}", agree(ok))
    for dt in FP8:
        x = data(rank, 4096, torch.float32).to(dt)
        try:
            dist.all_reduce(x)
            want = data(0, 4096, torch.float32).to(dt)   # summed in fp8, rounding at each step
            for r in range(1, world):
                want = (want.float() + data(r, 4096, torch.float32).to(dt).float()).to(dt)
            report(f"all_reduce sum {str(dt)[6:]}", agree(close(x, want, dt)))
        except (RuntimeError, TypeError) as e:   # older PyTorch: no fp8 collectives
            report(f"all_reduce sum {str(dt)[6:]} (refused by PyTorch: {e})", True)
    # PreMulSum: a host scalar and a device tensor scalar
    for factor in (0.5, torch.tensor([0.25], device=dev)):
        x = data(rank, 3000, torch.float32)
        dist.all_reduce(x, op=dist._make_nccl_premul_sum(factor))
        f = factor if isinstance(factor, float) else float(factor.item())
        want = sum(data(r, 3000, torch.float32) * f for r in range(world))
        report(f"all_reduce premul_sum ({type(factor).__name__} scalar)", agree(close(x, want, torch.float32)))


def check_gathers_and_scatters():
    n = 1001
    x = data(rank, n, torch.bfloat16)
    out = torch.empty(world * n, device=dev, dtype=torch.bfloat16)
    dist.all_gather_into_tensor(out, x)
    want = torch.cat([data(r, n, torch.bfloat16) for r in range(world)])
    report("all_gather_into_tensor", agree(torch.equal(out, want)))
    outs = [torch.empty(n, device=dev, dtype=torch.float32) for _ in range(world)]
    dist.all_gather(outs, data(rank, n, torch.float32))
    report("all_gather", agree(all(torch.equal(outs[r], data(r, n, torch.float32)) for r in range(world))))
    big = data(rank, world * n, torch.float32, salt=1)
    rs = torch.empty(n, device=dev, dtype=torch.float32)
    dist.reduce_scatter_tensor(rs, big)
    want = sum(data(r, world * n, torch.float32, salt=1) for r in range(world))[rank * n:(rank + 1) * n]
    report("reduce_scatter_tensor", agree(close(rs, want, torch.float32)))
    for root in range(min(world, 3)):
        b = data(rank, 777, torch.int64) if rank == root else torch.zeros(777, device=dev, dtype=torch.int64)
        dist.broadcast(b, src=root)
        ok = torch.equal(b, data(root, 777, torch.int64))
        r = data(rank, 555, torch.float32)
        dist.reduce(r, dst=root)
        if rank == root:
            ok = ok and close(r, sum(data(q, 555, torch.float32) for q in range(world)), torch.float32)
        report(f"broadcast and reduce root {root}", agree(ok))


def check_all_to_all():
    n = 300
    x = data(rank, world * n, torch.float32)
    y = torch.empty_like(x)
    dist.all_to_all_single(y, x)
    want = torch.cat([data(r, world * n, torch.float32)[rank * n:(rank + 1) * n] for r in range(world)])
    report("all_to_all_single even", agree(torch.equal(y, want)))
    # uneven: rank r sends (r + q + 1) * 17 elements to rank q
    sizes = lambda s, d: (s + d + 1) * 17
    send_splits = [sizes(rank, q) for q in range(world)]
    recv_splits = [sizes(q, rank) for q in range(world)]
    x = data(rank, sum(send_splits), torch.float32, salt=2)
    y = torch.empty(sum(recv_splits), device=dev, dtype=torch.float32)
    dist.all_to_all_single(y, x, output_split_sizes=recv_splits, input_split_sizes=send_splits)
    parts = []
    for q in range(world):
        xs = data(q, sum(sizes(q, d) for d in range(world)), torch.float32, salt=2)
        off = sum(sizes(q, d) for d in range(rank))
        parts.append(xs[off:off + sizes(q, rank)])
    report("all_to_all_single uneven", agree(torch.equal(y, torch.cat(parts))))


def check_p2p():
    nxt, prv = (rank + 1) % world, (rank - 1 + world) % world
    x = data(rank, 4099, torch.float16)
    y = torch.empty_like(x)
    if rank % 2 == 0:
        dist.send(x, nxt)
        dist.recv(y, prv)
    else:
        dist.recv(y, prv)
        dist.send(x, nxt)
    report("send/recv ring", agree(torch.equal(y, data(prv, 4099, torch.float16))))
    ops, bufs = [], {}
    for q in range(world):
        if q == rank:
            continue
        ops.append(dist.P2POp(dist.isend, data(rank, 100 + q, torch.int32, salt=q), q))
        bufs[q] = torch.empty(100 + rank, device=dev, dtype=torch.int32)
        ops.append(dist.P2POp(dist.irecv, bufs[q], q))
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    ok = all(torch.equal(bufs[q], data(q, 100 + rank, torch.int32, salt=rank)) for q in bufs)
    report("batch_isend_irecv", agree(ok))
    dist.barrier()
    report("barrier", True)


def check_groups():
    evens = [r for r in range(world) if r % 2 == 0]
    g = dist.new_group(evens)
    if rank in evens:
        x = torch.full((10,), float(rank), device=dev)
        dist.all_reduce(x, group=g)
        ok = torch.equal(x, torch.full((10,), float(sum(evens)), device=dev))
    else:
        ok = True
    report("new_group", agree(ok))
    if hasattr(dist, "split_group"):
        half = [list(range(0, (world + 1) // 2)), list(range((world + 1) // 2, world))]
        sg = dist.split_group(split_ranks=[h for h in half if h])
        mine = [h for h in half if rank in h][0]
        x = torch.full((5,), 1.0, device=dev)
        dist.all_reduce(x, group=sg)
        report("split_group", agree(torch.equal(x, torch.full((5,), float(len(mine)), device=dev))))


def check_graph():
    x = data(rank, 8192, torch.float32)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):   # warm up outside the capture (first calls set things up)
        for _ in range(3):
            y = x.clone()
            dist.all_reduce(y)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    y = x.clone()
    with torch.cuda.graph(g):
        dist.all_reduce(y)
    ok = True
    want = sum(data(r, 8192, torch.float32) for r in range(world))
    for _ in range(5):
        y.copy_(x)
        g.replay()
        torch.cuda.synchronize()
        ok = ok and close(y, want, torch.float32)
    report("all_reduce in a captured CUDA graph", agree(ok))


def main():
    dist.init_process_group(backend="nccl", device_id=dev)
    v = torch.cuda.nccl.version()
    report(f"NCCL version seen by PyTorch {v}", tuple(v)[:2] == (2, 28))
    for f in (check_all_reduce, check_gathers_and_scatters, check_all_to_all, check_p2p,
              check_groups, check_graph):
        try:
            f()
        except Exception as e:   # a failed call is a failed check, and the run goes on
            report(f"{f.__name__} raised {type(e).__name__}: {e}", False)
    torch.cuda.synchronize()
    dist.destroy_process_group()
    report("destroy_process_group returned", True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
