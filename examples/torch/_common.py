"""Shared by the examples: argument parsing (before torch is imported, so --help works anywhere)
and the process setup torchrun gives every example."""
import argparse
import os


def parse(description, argv=None, extra=None):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--size", default="1M", help="message bytes per rank (K/M/G suffixes; 1M)")
    p.add_argument("--dtype", default="float16", choices=["float16", "bfloat16", "float32"])
    p.add_argument("--iters", type=int, default=5, help="calls to run and check (5)")
    p.add_argument("--device", type=int, default=None,
                   help="CUDA device (default: LOCAL_RANK; 0 puts every rank on one GPU)")
    if extra:
        extra(p)
    a = p.parse_args(argv)
    try:
        s = a.size.strip().upper()
        mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1:], 1)
        a.nbytes = int(float(s[:-1] if s[-1:] in "KMG" else s) * mult)
    except ValueError:
        p.error(f"--size: not a size: {a.size!r}")
    if a.nbytes <= 0:
        p.error("--size must be positive")
    if a.iters < 1:
        p.error("--iters must be at least 1")
    for v in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        if v not in os.environ:
            p.error(f"{v} is not set: run this under torchrun (see the command at the top)")
    return a


def setup(a):
    """torch.distributed's default group (gloo, for setup only) and this rank's device."""
    import torch
    import torch.distributed as dist
    local = int(os.environ.get("LOCAL_RANK", "0"))
    dev = a.device if a.device is not None else local % torch.cuda.device_count()
    torch.cuda.set_device(dev)
    dist.init_process_group("gloo")
    return dist.get_rank(), dist.get_world_size(), torch.device("cuda", dev)
