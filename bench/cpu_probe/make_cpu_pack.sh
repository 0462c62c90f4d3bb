#!/usr/bin/env bash
# Packs a CPU-only build's tests and probe (build-cpu: -DQUANTA_CUDA=OFF) as devpack/cpu.tar.xz for
# the device machine's host CPU (bench/cpu_probe/host_avx_vnni.sh); unpack with
# `tar -C build-cuda -xJf devpack/cpu.tar.xz`.
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${BUILD:-build-cpu}
ninja -C "$B" quanta_tests quanta_cpu_probe
rm -rf "$B/cpu" && mkdir -p "$B/cpu" devpack
cp "$B/tests/quanta_tests" "$B/bench/cpu_probe/quanta_cpu_probe" "$B/cpu/"
strip "$B/cpu/quanta_tests" "$B/cpu/quanta_cpu_probe"
tar -C "$B" -cf - cpu | xz -T2 -6 >devpack/cpu.tar.xz
ls -la devpack/cpu.tar.xz
