"""mscclrt: custom GPU collectives from Python.

Compile .coll programs in process (``compile``), wrap plans and native CUDA kernels as
algorithms (``Algorithm``), register them and one selector for the whole process (the NCCL
drop-in, when preloaded, selects from the same collection), make communicators (``CommGroup``),
run algorithms on the CPU reference backend (``mscclrt.cpu``), use the runtime as a PyTorch
backend (``import mscclrt.torch``), and autotune (``mscclrt.tune``).

The package is ctypes over libmscclrt and libmscclc; see ``mscclrt._lib`` for where it looks
for them.
"""
from ._lib import LibraryNotFound, MscclrtError, runtime_is_dropin, search_dirs, version
from .algorithm import (Algorithm, AlgorithmCollection, AlgorithmConstraint, Choice, Request,
                        default_algorithms, last_selector_error, load_tuning_table,
                        register_algorithm, register_selector, registered_algorithms, select,
                        select_among, unregister_algorithm)
from .comm import CommGroup, UniqueId, get_unique_id
from .compiler import CompileError, Diagnostic, Plan, compile, stdlib_dir, stdlib_program
from .cpu import check_cpu
from .types import (BufferMode, Collective, DataType, ReduceOp, torch_dtype_to_mscclrt_dtype)

__version__ = "0.1.0"


def tune(*args, **kwargs):
    """Autotunes collectives on a communicator; see mscclrt.tuning.tune."""
    from .tuning import tune as _tune
    return _tune(*args, **kwargs)


__all__ = ["Algorithm", "AlgorithmCollection", "AlgorithmConstraint", "BufferMode", "Choice",
           "Collective", "CommGroup", "CompileError", "DataType", "Diagnostic", "LibraryNotFound",
           "MscclrtError", "Plan", "ReduceOp", "Request", "UniqueId", "check_cpu", "compile",
           "default_algorithms", "get_unique_id", "last_selector_error", "load_tuning_table",
           "register_algorithm", "register_selector", "registered_algorithms", "runtime_is_dropin",
           "search_dirs", "select", "select_among", "stdlib_dir", "stdlib_program",
           "torch_dtype_to_mscclrt_dtype", "tune", "unregister_algorithm", "version"]
