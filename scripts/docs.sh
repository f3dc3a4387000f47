#!/usr/bin/env bash
# Builds the documentation site (docs/, Sphinx with MyST Markdown and the furo
# theme) into build/docs/. Warnings are errors and references are checked
# (-W -n), so a broken link, a missing reference or a docstring Sphinx cannot
# parse fails the build. -E reads every page afresh, so a warning is never
# hidden by an incremental build. Installs the pinned docs dependencies into .venv
# when they are missing (scripts/setup.sh installs them too).
# Usage: scripts/docs.sh [extra sphinx-build options]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
# Keep these pins equal to scripts/setup.sh's.
DOCS_DEPS=("sphinx==9.0.4" "myst-parser==5.2.0" "furo==2025.12.19")
if ! $PY -c "import sphinx, myst_parser, furo" 2>/dev/null; then
  echo "[docs] installing ${DOCS_DEPS[*]}"
  $PY -m pip install -q "${DOCS_DEPS[@]}"
fi
exec $PY -m sphinx -E -W --keep-going -n -b html docs build/docs "$@"
