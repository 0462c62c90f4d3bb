#!/usr/bin/env bash
# README command 2: install, build and run every test (GPU cases skip without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
source scripts/env.sh
"$CTEST" --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS"
