"""PyTorch integration: ``import mscclrt.torch`` registers ``backend="mscclrt"`` for
torch.distributed (a ProcessGroup over libmscclrt, see backend.py) and the ``mscclrt::*`` custom
ops for torch.compile (ops.py)."""
from .backend import MscclrtProcessGroup, MscclrtWork, comm_of, register
from .ops import all_gather_into_tensor, all_reduce, reduce_scatter_tensor

register()

__all__ = ["MscclrtProcessGroup", "MscclrtWork", "comm_of", "register", "all_reduce",
           "all_gather_into_tensor", "reduce_scatter_tensor"]
