#!/usr/bin/env bash
# README command 1: install, build, and run the main job on its built-in default.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
source scripts/env.sh
"$BUILD_DIR"/tools/quanta/quanta demo "$@"
