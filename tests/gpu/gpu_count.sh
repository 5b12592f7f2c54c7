#!/bin/sh
# gpu_count.sh - prints how many GPUs the CUDA programs of this run see: the entries of
# CUDA_VISIBLE_DEVICES when it is set (CUDA_VISIBLE_DEVICES=0 on a 2-GPU machine gives the
# one-GPU mode, every rank sharing GPU 0), else what nvidia-smi lists. Run it, do not source it.
if [ -n "${CUDA_VISIBLE_DEVICES+x}" ]; then
    echo "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c .
else
    nvidia-smi -L 2>/dev/null | wc -l
fi
