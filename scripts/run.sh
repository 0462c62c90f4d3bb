#!/usr/bin/env bash
# README command 1: install, build, and run the main job on its built-in default: the quick
# bench suite on the best available device (the GPU when one is present and the build has
# CUDA bench support, else the CPU). Extra arguments go to `quanta bench`, e.g.
#   scripts/run.sh --suite seeds --json out.jsonl --report bench-report
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
source scripts/env.sh
suite=(--suite quick)
for a in "$@"; do [[ "$a" == --suite* ]] && suite=(); done
"$BUILD_DIR"/tools/quanta/quanta bench "${suite[@]}" "$@"
