"""Workflow 2 of the torch integration: a communicator with an algorithm written in .coll.

    torchrun --nproc_per_node=8 examples/torch/coll_algorithm.py --size 256K
    (one GPU for every rank: add --device 0; another program: --program path.coll)

Compiles a .coll program in process for the job's rank count (the stdlib's one-shot packet
allreduce by default), wraps the plan as an algorithm, registers it with a selector that
prefers it where it fits, and runs allreduce through the communicator's selector; then checks.
"""
import sys

from _common import parse


def extra(p):
    p.add_argument("--program", default=None,
                   help="a .coll allreduce program taking -D N=<ranks> (default: the stdlib's "
                        "allreduce/allpair_packet)")


def main(argv=None):
    a = parse(__doc__.splitlines()[1], argv, extra)
    import torch
    import mscclrt
    from _common import setup

    rank, world, dev = setup(a)
    src = a.program or mscclrt.stdlib_program("allreduce/allpair_packet")
    plan = mscclrt.compile(src, params={"N": world}, rank=rank)
    algo = mscclrt.Algorithm.from_plan(plan, name="example/coll_allreduce", tags={"example": 1})
    mscclrt.register_algorithm(algo)
    mscclrt.register_selector(lambda req, cands: next(
        (c for c in cands if "example" in c.tags), None))
    comm = mscclrt.CommGroup.from_torch()
    dtype = getattr(torch, a.dtype)
    n = a.nbytes // torch.tensor([], dtype=dtype).element_size()
    # the plan's own buffer mode decides whether the call is in place
    x = torch.empty((n,), dtype=dtype, device=dev)
    y = x if plan.inplace else torch.empty_like(x)
    ch = mscclrt.select(comm, "allreduce", x, y, a.nbytes, a.nbytes, a.dtype)
    if ch.algorithm.name != "example/coll_allreduce":
        print(f"rank {rank}: the selector chose {ch.algorithm.name}, not the .coll algorithm "
              f"(does {src} serve {a.nbytes} bytes on {world} ranks?)", file=sys.stderr)
        return 1
    for it in range(a.iters):
        x.fill_(float(rank + it))
        comm.allreduce(x, y, n, a.dtype, "sum", torch.cuda.current_stream())
        torch.cuda.synchronize()
        if not torch.all(y == sum(r + it for r in range(world))):
            print(f"rank {rank}: iteration {it}: wrong sum", file=sys.stderr)
            return 1
    if rank == 0:
        print(f"coll_algorithm: {a.iters} allreduce calls of {a.nbytes} bytes correct; the "
              f"selector chose {ch.algorithm.name}")
    comm.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
