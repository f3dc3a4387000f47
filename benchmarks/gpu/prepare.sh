#!/bin/bash
# Run here, before the GPU machine: builds gpu_bench (no PyTorch) and puts
# it in .gpu/ with the Vulkan loader it opens (the GPU machine has no Vulkan
# loader package, and no package registry). Carry .gpu to that machine and
# run benchmarks/gpu/run_on_gpu.sh there.
set -euo pipefail
cd "$(dirname "$0")/../.."
cmake -S . -B build/gpu-bench -G Ninja -DOPENNEURON_BUILD_TORCH=OFF -DOPENNEURON_BUILD_TESTS=OFF >/dev/null
cmake --build build/gpu-bench --target gpu_bench
rm -rf .gpu && mkdir -p .gpu/lib
cp build/gpu-bench/benchmarks/gpu/gpu_bench .gpu/
loader=$(ldconfig -p | awk '/libvulkan.so.1 .*x86-64/ {print $NF; exit}')
[ -n "$loader" ] || { echo "prepare.sh: no libvulkan.so.1 here (apt-get install libvulkan1)" >&2; exit 1; }
cp -L "$loader" .gpu/lib/libvulkan.so.1
du -sh .gpu
