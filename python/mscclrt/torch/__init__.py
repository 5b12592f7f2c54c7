"""PyTorch integration: ``import mscclrt.torch`` registers ``backend="mscclrt"`` for
torch.distributed (a ProcessGroup over libmscclrt, see backend.py) and the ``mscclrt::*`` custom
ops for torch.compile (ops.py)."""
try:
    import torch as _torch  # noqa: F401  (the integration needs it; say so plainly)
except ModuleNotFoundError as _e:
    if _e.name != "torch":
        raise
    raise ImportError("mscclrt.torch needs PyTorch, which is not installed: pip install torch "
                      "(the rest of mscclrt works without it)") from None

from .backend import MscclrtProcessGroup, MscclrtWork, comm_of, register
from .ops import all_gather_into_tensor, all_reduce, reduce_scatter_tensor

register()

__all__ = ["MscclrtProcessGroup", "MscclrtWork", "comm_of", "register", "all_reduce",
           "all_gather_into_tensor", "reduce_scatter_tensor"]
