#!/usr/bin/env bash
# Incremental rebuild for development: recompiles the extension and the
# compiler library in the build tree scripts/setup.sh made and refreshes the
# installed copies (by rename, so running processes keep their old copy).
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(ls -d build/cp3*/ | head -1)
ninja -C "$build" -j 2 _C openneuron_compiler_c
site=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
for lib in "$build"/csrc/torch/_C*.so "$build"/csrc/compiler/libopenneuron_compiler.so; do
  cp "$lib" "$site/openneuron/.$(basename "$lib").new"
  mv -f "$site/openneuron/.$(basename "$lib").new" "$site/openneuron/$(basename "$lib")"
done
