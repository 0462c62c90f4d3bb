#!/usr/bin/env bash
# qmm_affine_rf at the other affine widths against the kernels the selector ran there before it
# (docs/PERF.md, "qmm_affine_rf at 2, 3, 5, 6 and 8 bits"): every kernel forced, one process per
# kernel, same machine and session. Logs to $OUT. Needs $DEVRUN (bench/cuda/make_devrun.sh).
source "$(dirname "$0")/devrun_env.sh"
P=$D/quanta_cuda_probe
M=5,8,9,16,24,32
p() {  # name, timeout, probe arguments
  local name=$1 t=$2
  shift 2
  timeout "$t" "$P" --dtypes f16,bf16 --replays 10 "$@" >"$OUT/rf_$name.log" 2>&1
  echo "$name rc=$?"
}
step=${1:-first}
if [ "$step" = first ]; then
# 2 and 8 bits, groups of 64, the three shapes: rf (with cuBLAS), then what ran before it:
# qmm_affine_i8 (2-bit M <= 8, 8-bit g64 M <= 16), qmm_affine_tc (M <= 23), wgmma (M >= 24).
W=affine-2b-g64,affine-8b-g64
p w28 90 --formats $W --m $M --kernel qmm_affine_rf --check
p w28_i8 60 --formats $W --m 5,8,9,16 --kernel qmm_affine_i8 --no-cublas
p w28_tc 60 --formats $W --m 9,16 --kernel qmm_affine_tc --no-cublas
p w28_wg 60 --formats $W --m 24,32 --kernel qmm_affine_wgmma --no-cublas
# 3, 5, 6 bits, groups of 64 (qmm_affine_i8 serves 6-bit g64 at M <= 7, 3/5-bit only g128),
# and 8-bit g128 / 2-bit g32 (the other groups of the two), on one shape.
S="--shapes 14336x5120"
O=affine-3b-g64,affine-5b-g64,affine-6b-g64,affine-8b-g128,affine-2b-g32
p o 60 --formats $O --m $M --kernel qmm_affine_rf --check $S
p o_tc 60 --formats $O --m $M --kernel qmm_affine_tc --no-cublas $S
p o_i8 60 --formats $O --m 5,8,9,16 --kernel qmm_affine_i8 --no-cublas $S
p o_wg 60 --formats affine-8b-g128,affine-2b-g32 --m 24,32 --kernel qmm_affine_wgmma --no-cublas $S
elif [ "$step" = final ]; then
# The selection with the final code (no kernel forced), and the edges of the new ranges against
# the kernel that runs next to them: 6-bit g32 M = 5, 7 and 3-bit g64 M = 7 (qmm_affine_tc before),
# 8-bit g32 M = 32 (qmm_affine_tc), 2-bit g128 M = 24, 32 (qmm_affine_wgmma before).
F=affine-2b-g64,affine-2b-g128,affine-3b-g64,affine-6b-g32,affine-6b-g64,affine-8b-g32,affine-8b-g64
p sel 90 --formats $F --m 5,7,8,9,16,20,24,25,32 --check
p edge_tc 60 --formats affine-6b-g32,affine-3b-g64,affine-8b-g32 --m 5,7,32 --kernel qmm_affine_tc --no-cublas
p edge_wg 60 --formats affine-2b-g128 --m 24,32 --kernel qmm_affine_wgmma --no-cublas
else
# Second pass, the three shapes: the groups not measured above (8-bit g32/g128, 2-bit g32/g128,
# 3-bit g32/g64, 6-bit g32/g64/g128) at the M where the first pass put rf near or ahead, M = 20
# for 8 bits (qmm_affine_tc's range), and qmm_affine_tc against wgmma for 2 bits at M = 24, 32.
E=affine-8b-g32,affine-8b-g64,affine-8b-g128
p e 60 --formats $E --m 5,8,16,20,24 --kernel qmm_affine_rf --check
p e_i8 60 --formats $E --m 5,8 --kernel qmm_affine_i8 --no-cublas
p e_tc 60 --formats $E --m 16,20,24 --kernel qmm_affine_tc --no-cublas
p e_wg 60 --formats affine-8b-g128 --m 24 --kernel qmm_affine_wgmma --no-cublas
T=affine-2b-g32,affine-2b-g128,affine-3b-g32,affine-3b-g64
p t 60 --formats $T --m 5,6,8 --kernel qmm_affine_rf --check
p t_i8 60 --formats $T --m 5,6,8 --kernel qmm_affine_i8 --no-cublas
p t_tc 60 --formats $T,affine-2b-g64 --m 5,6,8,24,32 --kernel qmm_affine_tc --no-cublas
X=affine-6b-g32,affine-6b-g64,affine-6b-g128
p x 60 --formats $X --m 8,16,24,32 --kernel qmm_affine_rf --check
p x_tc 60 --formats $X --m 8,16,24,32 --kernel qmm_affine_tc --no-cublas
fi
# One file back (the device tool returns at most 8), and the rows that ran on stdout.
cd "$OUT" && for f in rf_*.log; do echo "== $f"; cat "$f"; done >"rf_$step.txt" && rm -f rf_*.log
grep -E "^qmm_affine_[a-z0-9]+ +affine" "rf_$step.txt" | grep -v skipped |
  awk '{print $1,$2,$3,$4,$5,$7,$13,$14,$16}'
