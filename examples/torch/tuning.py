"""Workflow 4 of the torch integration: a communicator with tuning.

    torchrun --nproc_per_node=8 examples/torch/tuning.py --min-size 1K --max-size 4M
    (one GPU for every rank: add --device 0)

Tunes allreduce for every power of two in the range (every applicable algorithm x blocks x
threads, timed by CUDA-graph replay, agreed across ranks with timeouts), writes the winners to a
tuning table and loads it, then runs allreduce at each size through the selector (which now
follows the table) and checks the sums.
"""
import sys

from _common import parse


def extra(p):
    p.add_argument("--min-size", default="1K")
    p.add_argument("--max-size", default="4M")
    p.add_argument("--table", default="mscclrt-tune.json", help="the tuning table to write")
    p.add_argument("--timeout", type=float, default=10.0, help="per-candidate deadline, seconds")


def main(argv=None):
    a = parse(__doc__.splitlines()[1], argv, extra)
    from mscclrt.tuning import _size
    try:
        lo, hi = _size(a.min_size), _size(a.max_size)
    except ValueError:
        print("tuning.py: --min-size/--max-size must be sizes like 1K, 4M", file=sys.stderr)
        return 2
    if not 0 < lo <= hi:
        print("tuning.py: need 0 < --min-size <= --max-size", file=sys.stderr)
        return 2
    import torch
    import mscclrt
    from _common import setup

    rank, world, dev = setup(a)
    comm = mscclrt.CommGroup.from_torch()
    res = mscclrt.tune(comm, ["allreduce"], lo, hi, a.dtype, "sum", a.timeout, table=a.table,
                       blocks=(8, 16, 32), threads=(512, 1024))
    comm = res.comm
    dtype = getattr(torch, a.dtype)
    size = lo
    while size <= hi:
        n = size // torch.tensor([], dtype=dtype).element_size()
        x = torch.full((n,), float(rank + 1), dtype=dtype, device=dev)
        comm.allreduce(x, x, n, a.dtype, "sum", torch.cuda.current_stream())
        torch.cuda.synchronize()
        if not torch.all(x == world * (world + 1) // 2):
            print(f"rank {rank}: wrong sum at {size} bytes", file=sys.stderr)
            return 1
        size *= 2
    if rank == 0:
        print(f"tuning: {len(res.winners)} sizes tuned, table {a.table}; allreduce checked at "
              "every size")
    comm.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
