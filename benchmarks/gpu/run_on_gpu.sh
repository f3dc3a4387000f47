#!/bin/bash
# On the GPU machine, from the repository root, with .gpu carried
# (benchmarks/gpu/prepare.sh made it): gpu_bench on the GPU's Vulkan driver,
# then the same figures through that machine's PyTorch CUDA, and the
# ratios. Results go to $OUT (or /tmp/gpu-bench). Extra arguments go to
# both (--quick, --repeats N).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/gpu-bench}
mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# NVIDIA's ICD where that machine keeps it (no loader package registers it).
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f "$icd" ] && export VK_DRIVER_FILES="$icd"
export OPENNEURON_COMPILE_CACHE_DIR=/tmp/gpu-bench-kernels
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true
.gpu/gpu_bench --json "$out/ours.json" "$@" 2>&1 | tee "$out/ours.txt"
status=${PIPESTATUS[0]}
python3 benchmarks/gpu/cuda_reference.py --json "$out/cuda.json" --ours "$out/ours.json" "$@" 2>&1 |
  tee "$out/compare.txt"
exit "$status"
