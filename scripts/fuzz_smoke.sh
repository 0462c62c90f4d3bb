#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) and runs each parser for a short while
# from the committed seed corpus; any crash, sanitizer report, leak, timeout or out-of-memory
# fails the script. Longer runs: FUZZ_SECONDS=600 scripts/fuzz_smoke.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
FUZZ_BUILD=${FUZZ_BUILD:-build-fuzz}

CC=clang CXX=clang++ "$CMAKE" -S . -B "$FUZZ_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DQUANTA_CUDA=OFF -DQUANTA_BUILD_FUZZERS=ON -DQUANTA_BUILD_TESTS=OFF -DQUANTA_BUILD_TOOLS=OFF \
  -DQUANTA_SANITIZE=address,undefined -DQUANTA_WERROR=OFF > /dev/null
"$CMAKE" --build "$FUZZ_BUILD" -j "$JOBS" --target fuzz_safetensors fuzz_gguf

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for target in safetensors gguf; do
  mkdir -p "$work/$target"
  echo "fuzz smoke: $target for ${FUZZ_SECONDS}s"
  # New inputs go to a scratch corpus; the committed seeds stay as they are. Crash inputs
  # are written to $FUZZ_BUILD/ (crash-*, timeout-*, oom-*) to reproduce with the binary.
  rc=0
  "$FUZZ_BUILD/fuzz/fuzz_$target" -max_total_time="$FUZZ_SECONDS" -timeout=10 \
    -rss_limit_mb=2048 -max_len=16384 -print_final_stats=1 -artifact_prefix="$FUZZ_BUILD/" \
    "$work/$target" "fuzz/corpus/$target" > "$work/$target.log" 2>&1 || rc=$?
  grep -E '^(stat::number_of_executed_units|Done )' "$work/$target.log" || true
  if [ "$rc" -ne 0 ]; then
    tail -n 60 "$work/$target.log"
    echo "fuzz smoke: fuzz_$target FAILED (exit $rc)"
    exit 1
  fi
done
echo "fuzz smoke: both parsers clean"
