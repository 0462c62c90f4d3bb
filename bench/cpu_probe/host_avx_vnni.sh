#!/usr/bin/env bash
# On the device machine's host CPU (an Intel Xeon with AVX-VNNI): first the CPU test suite, then the
# avx2 level's packed GEMV with AVX-VNNI's vpdpbusd (QUANTA_CPU_AVX_VNNI=1) against vpmaddubsw (=0),
# same binary, alternating. Needs devpack/cpu.tar.xz (bench/cpu_probe/make_cpu_pack.sh) and
# devpack/cli.tar.xz (its OpenBLAS / fmt libraries) unpacked into build-cuda; BASE=<dir> also runs
# the suite of another CPU-only quanta_tests there (a build of main, say). Logs to $OUT.
set -uo pipefail
C=build-cuda/cpu
export LD_LIBRARY_PATH=$PWD/build-cuda/cli:${LD_LIBRARY_PATH:-}
{ grep -m1 "model name" /proc/cpuinfo; nproc
  grep -o -w 'avx_vnni\|avx512_vnni\|avx512f\|amx_int8' /proc/cpuinfo | sort | uniq -c; } | tee "$OUT/host.txt"
if ! grep -q -w avx_vnni /proc/cpuinfo; then echo "no AVX-VNNI on this host"; exit 0; fi
# The whole CPU suite at the host's own level, then with the avx2 level forced and AVX-VNNI on
# (--gtest_brief prints failures only as they happen: keep every FAILED line, not the tail).
for bin in $C ${BASE:-}; do
  for run in "own level:" "avx2 level, AVX-VNNI on:QUANTA_CPU_ISA=avx2 QUANTA_CPU_AVX_VNNI=1"; do
    echo "== $bin, ${run%%:*}" | tee -a "$OUT/tests.txt"
    env ${run#*:} timeout 200 $bin/quanta_tests --gtest_brief=1 >"$OUT/tests_full.log" 2>&1
    { grep -E "^\[  FAILED" "$OUT/tests_full.log"; grep -A6 "Failure" "$OUT/tests_full.log" | head -40
      tail -3 "$OUT/tests_full.log"; } | tee -a "$OUT/tests.txt"
  done
done
F=${FORMATS:-affine-4b-g64,q4_0,mxfp4,nvfp4,affine-2b-g128,affine-3b-g64,affine-6b-g64,q2_K,q3_K,q4_K,q6_K}
for round in 1 2; do
  for v in 0 1; do
    echo "== round $round QUANTA_CPU_AVX_VNNI=$v (one core hot)" | tee -a "$OUT/hot.txt"
    QUANTA_CPU_AVX_VNNI=$v QUANTA_CPU_PIN=1 timeout 120 $C/quanta_cpu_probe --isa avx2 --hot \
      --threads 1 --n 1024 --k 14336 --reps 51 --roof-mb 8 --prepack --formats $F 2>&1 |
      tee -a "$OUT/hot.txt" | grep -E "packed|isa"
  done
done
for round in 1 2; do
  for v in 0 1; do
    echo "== round $round QUANTA_CPU_AVX_VNNI=$v (2 threads, DRAM)" | tee -a "$OUT/dram.txt"
    QUANTA_CPU_AVX_VNNI=$v QUANTA_CPU_PIN=1 timeout 120 $C/quanta_cpu_probe --isa avx2 --threads 2 \
      --reps 7 --prepack --formats $F 2>&1 | tee -a "$OUT/dram.txt" | grep -E "packed|roof \("
  done
done
