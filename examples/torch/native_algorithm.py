"""Workflow 3 of the torch integration: a communicator with a native CUDA algorithm.

    torchrun --nproc_per_node=8 examples/torch/native_algorithm.py --size 1M
    (one GPU for every rank: add --device 0)

Loads native_allgather.cu (beside this file) as a native allgather, compiled by NVRTC on first
use, and runs it directly with a chosen launch (blocks x threads); checks every rank's part.
"""
import os
import sys

from _common import parse


def extra(p):
    p.add_argument("--blocks", type=int, default=8, help="thread blocks (1..32; 8)")
    p.add_argument("--threads", type=int, default=512, help="threads per block (512)")


def main(argv=None):
    a = parse(__doc__.splitlines()[1], argv, extra)
    if not 1 <= a.blocks <= 32 or a.threads % 32 or not 32 <= a.threads <= 1024:
        print("native_algorithm.py: --blocks must be 1..32 and --threads a multiple of 32 up to "
              "1024", file=sys.stderr)
        return 2
    import torch
    import mscclrt
    from _common import setup

    rank, world, dev = setup(a)
    here = os.path.dirname(os.path.abspath(__file__))
    algo = mscclrt.Algorithm.from_native(name="example/native_allgather", collective="allgather",
                                         kernel="my_allgather",
                                         file=os.path.join(here, "native_allgather.cu"))
    comm = mscclrt.CommGroup.from_torch()
    per = max(1, a.nbytes // world)
    for it in range(a.iters):
        x = torch.full((per,), (rank * 7 + it) % 251, dtype=torch.uint8, device=dev)
        out = torch.empty((per * world,), dtype=torch.uint8, device=dev)
        algo.execute(comm, x, out, x.nbytes, out.nbytes, "uint8", stream=torch.cuda.current_stream(),
                     nblocks=a.blocks, nthreads_per_block=a.threads)
        torch.cuda.synchronize()
        for r in range(world):
            if not torch.all(out[r * per:(r + 1) * per] == (r * 7 + it) % 251):
                print(f"rank {rank}: iteration {it}: rank {r}'s part is wrong", file=sys.stderr)
                return 1
    if rank == 0:
        print(f"native_algorithm: {a.iters} allgather calls of {per * world} bytes correct "
              f"({a.blocks} x {a.threads})")
    comm.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
