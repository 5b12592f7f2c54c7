# shellcheck shell=sh
# nccl_wheel.sh - sourced by the GPU scripts that run the real NCCL beside ours (nt_compare.sh,
# net_bench.sh): nccl_wheel_dir prints the lib directory of the nvidia-nccl wheel PyTorch
# installs (holding libnccl.so.2), or nothing without it.
nccl_wheel_dir() {
    python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null
}
