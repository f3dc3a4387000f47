#!/usr/bin/env bash
# Incremental rebuild for development: recompiles the extension in the build
# tree scripts/setup.sh made and refreshes the installed copy.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(ls -d build/cp3*/ | head -1)
ninja -C "$build" -j 2 _C
site=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
cp "$build"/csrc/torch/_C*.so "$site/openneuron/"
