"""Workflow 1 of the torch integration: a communicator with the default algorithms.

    torchrun --nproc_per_node=8 examples/torch/default_algorithms.py --size 1M
    (one GPU for every rank: add --device 0)

Makes a CommGroup over torchrun's ranks, lists the default collection built for its layout,
picks an allreduce algorithm by message size (packets for small messages, else the built-in
native one, or the hierarchical programs across nodes) among those that serve the call, and
runs it on tensors, checking the sums.
"""
import sys

from _common import parse, setup


def main(argv=None):
    a = parse(__doc__.splitlines()[1], argv)
    import torch
    import mscclrt

    rank, world, dev = setup(a)
    comm = mscclrt.CommGroup.from_torch()
    algos = mscclrt.default_algorithms(comm, "allreduce")
    if rank == 0:
        print("default allreduce algorithms:", ", ".join(algos.names()))
    def pick(nbytes):
        """Packets for small messages, else the first that serves the call (the built-in native
        one on one node, the hierarchical programs across nodes)."""
        req = mscclrt.Request.make("allreduce", nbytes, dtype=a.dtype, world_size=world,
                                   ranks_per_node=comm.nranks_per_node, in_place=True)
        fitting = [x for x in algos if x.fits(req)[0]]
        if not fitting:
            raise SystemExit(f"no default algorithm serves an in-place allreduce of {nbytes} bytes")
        order = ("packet",) if nbytes <= (64 << 10) else ("native/", "hier", "simple")
        for key in order:
            for x in fitting:
                if key in x.name:
                    return x
        return fitting[0]

    dtype = getattr(torch, a.dtype)
    n = a.nbytes // torch.tensor([], dtype=dtype).element_size()
    algo = pick(n * torch.tensor([], dtype=dtype).element_size())
    for it in range(a.iters):
        x = torch.full((n,), float(rank + 1 + it), dtype=dtype, device=dev)
        algo.execute(comm, x, x, x.nbytes, x.nbytes, mscclrt.torch_dtype_to_mscclrt_dtype(dtype),
                     mscclrt.ReduceOp.SUM, torch.cuda.current_stream())
        torch.cuda.synchronize()
        want = sum(r + 1 + it for r in range(world))
        if not torch.all(x == want):
            print(f"rank {rank}: iteration {it}: wrong sum with {algo.name}", file=sys.stderr)
            return 1
    if rank == 0:
        print(f"default_algorithms: {a.iters} allreduce calls of {a.nbytes} bytes on {world} "
              f"ranks correct ({algo.name})")
    comm.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
