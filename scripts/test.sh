#!/usr/bin/env bash
# Runs every test: the HAL gtest suites, then the Python suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

echo "[test] HAL and compiler gtest suites"
cmake -S . -B build/hal-tests -G Ninja -DOPENNEURON_BUILD_TORCH=OFF >/dev/null
cmake --build build/hal-tests -j "$(nproc)"
ctest --test-dir build/hal-tests --output-on-failure -j 2

echo "[test] Python suite"
.venv/bin/python -m pytest -q -p no:cacheprovider tests/python "$@"
