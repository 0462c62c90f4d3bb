# Sourced by the device-machine scripts (h200_run.sh, rf_widths.sh): the repo root, the carried
# binaries ($DEVRUN, from bench/cuda/make_devrun.sh) on the library path, and $OUT for the logs.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
D=${DEVRUN:-build-cuda/devrun}
OUT=${OUT:-/tmp/quanta-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$D:${LD_LIBRARY_PATH:-}
