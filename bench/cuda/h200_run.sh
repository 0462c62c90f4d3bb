#!/usr/bin/env bash
# One call on the GPU machine: the CUDA tests, compute-sanitizer, and the probe tables. The
# binaries are built on the dev machine and carried in $DEVRUN (with libfmt); see
# docs/perf-cuda.md for how they are made. Steps: any of tests sanitizer m1 all large wgmma dq
# m1_warps wgmma_sweep quick prof stalls source api extra wgrf wgrfprof rf ksrc l1 ab knpack small checkonly gguf agather agather_cross
# (default: tests sanitizer m1 all
# large). Logs go to $OUT (one file per step).
source "$(dirname "$0")/devrun_env.sh"
T=$D/quanta_gpu_tests
P=$D/quanta_cuda_probe
steps=${*:-tests sanitizer m1 all large}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu \
  --format=csv >"$OUT/smi.txt" 2>&1
for s in $steps; do
  start=$(date +%s)
  case $s in
    tests)
      timeout 420 "$T" --gtest_brief=1 >"$OUT/tests.log" 2>&1
      echo "tests rc=$?"
      grep -E "^\[  (FAILED|PASSED|SKIPPED)|Failure|rel_l2" "$OUT/tests.log" | head -40
      ;;
    sanitizer)
      f='CudaErrors*:All/CudaAffine.TensorCoreKernelEveryM/b4_g64:All/CudaAffine.TensorCoreKernelSplitK/b3_g32'
      f="$f:All/CudaAffine.QvmKernel/b4_g64:All/CudaAffine.F32Kernel/b5_g128:All/CudaAffine.AutoSelectionEveryM/b4_g64"
      f="$f:All/CudaGeneric.*/q4_K:All/CudaGeneric.*/affine_3b_g32:All/CudaGeneric.*/nvfp4"
      f="$f:All/CudaQuantize.*/affine_4b_g64:All/CudaQuantize.*/mxfp4:All/CudaQuantize.*/nvfp4"
      f="$f:All/CudaAffine.IntegerMmaQmv/b4_g64:All/CudaAffine.IntegerMmaQmv/b4_g128:All/CudaAffine.IntegerMmaQmv/b2_g32:All/CudaAffine.IntegerMmaQmv/b5_g128:All/CudaAffine.RegisterDirectQmv/b3_g64:All/CudaAffine.IntegerMmaSmallM/b4_g64:All/CudaAffine.IntegerMmaSmallM/b8_g128:All/CudaAffine.DequantizeThenCublas/b4_g64:CudaAffineDq.*:CudaDequantize.*:All/CudaAffine.WgmmaKernel/b4_g64:All/CudaAffine.RegisterFedQmm/b4_g64:All/CudaAffine.WgmmaRegisterFed/b4_g32"
      f="$f:All/CudaGeneric.ScaledGemv/mxfp4:All/CudaGeneric.ScaledGemv/nvfp4:All/CudaGeneric.ScaledGemv/mxfp8:All/CudaGeneric.ScaledGemv/e4m3_channel"
      f="$f:All/CudaGeneric.ScaledGather/mxfp4:All/CudaGeneric.ScaledGather/nvfp4:All/CudaGeneric.ScaledGather/e5m2_channel"
      f="$f:All/CudaGeneric.ScaledRegisterFed/nvfp4:All/CudaGeneric.ScaledRegisterFed/mxfp4:All/CudaGeneric.ScaledRegisterFed/e5m2_channel:All/CudaGeneric.DequantizeThenCublas/mxfp8:All/CudaAffine.GatherKernel/b4_g64:All/CudaAffine.GatherKernel/b3_g32"
      f="$f:All/CudaGeneric.GgufGemv/q4_0:All/CudaGeneric.GgufGemv/q5_1:All/CudaGeneric.GgufGemv/q8_0:All/CudaGeneric.GgufGemv/q3_K:All/CudaGeneric.GgufGemv/q6_K:All/CudaGeneric.GgufGather/q4_K:All/CudaGeneric.GgufGather/q5_0"
      f="$f:All/CudaGeneric.GgufMma/q4_0:All/CudaGeneric.GgufMma/q8_0:All/CudaGeneric.GgufMma/q2_K:All/CudaGeneric.GgufMma/q6_K"
      f="$f:All/CudaGeneric.GgufGroupedGather/q4_0:All/CudaGeneric.GgufGroupedGather/q6_K:All/CudaGeneric.GgufGroupedGather/q3_K"
      f="$f:All/CudaAffine.GroupedGather/b4_g64:All/CudaAffine.GroupedGather/b3_g128:All/CudaAffine.GroupedGather/b8_g32"
      f="$f:All/CudaAffine.GatherI8Kernel/b4_g64:All/CudaAffine.GatherI8Kernel/b3_g128:All/CudaAffine.GatherI8Kernel/b6_g32"
      f="$f:All/CudaGeneric.ScaledGroupedGather/mxfp4:All/CudaGeneric.ScaledGroupedGather/nvfp4:All/CudaGeneric.ScaledGroupedGather/e4m3_channel"
      f="$f:All/CudaAffine.RepackedKnRunsTheNkKernels/b2_g64:All/CudaAffine.RepackedKnRunsTheNkKernels/b8_g128"
      f="$f:All/CudaAffine.RepackedKnRunsTheNkKernels/b4_g64:All/CudaAffine.RepackedKnRunsTheNkKernels/b3_g32:All/CudaAffine.RegisterFedQmm/b2_g32:All/CudaAffine.RegisterFedQmm/b3_g64:All/CudaAffine.RegisterFedQmm/b6_g32:All/CudaAffine.RegisterFedQmm/b8_g64"
      timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 "$T" --gtest_brief=1 \
        --gtest_filter="$f" >"$OUT/sanitizer.log" 2>&1
      echo "memcheck rc=$?"
      timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 "$T" --gtest_brief=1 \
        --gtest_filter='All/CudaAffine.TensorCoreKernelSplitK/b4_g64:All/CudaAffine.AutoSelectionEveryM/b4_g64:All/CudaAffine.IntegerMmaQmv/b8_g128:All/CudaAffine.IntegerMmaSmallM/b4_g32:All/CudaAffine.RegisterFedQmm/b4_g128:All/CudaAffine.RegisterFedQmm/b8_g128:All/CudaGeneric.ScaledRegisterFed/nvfp4:All/CudaGeneric.ScaledRegisterFed/mxfp8:All/CudaGeneric.GgufMma/q4_0:All/CudaGeneric.GgufMma/q4_K:All/CudaGeneric.GgufGroupedGather/q4_K' \
        >>"$OUT/sanitizer.log" 2>&1
      echo "racecheck rc=$?"
      grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Invalid|Race" "$OUT/sanitizer.log" | sort | uniq -c | head -20
      ;;
    m1)  # the headline shapes: int4 g64, M = 1 .. 32, with cuBLAS and a check against generic
      timeout 200 "$P" --m 1,2,3,4,5,8,9,16,32 --check >"$OUT/probe_m1.log" 2>&1
      echo "probe m1 rc=$?"; cat "$OUT/probe_m1.log"
      ;;
    all)  # every affine width x group at M = 1 (bf16)
      timeout 200 "$P" --formats affine-all --dtypes bf16 --m 1 --no-cublas >"$OUT/probe_all.log" 2>&1
      echo "probe all rc=$?"; cat "$OUT/probe_all.log"
      ;;
    large)  # prefill: the MMA kernel against cuBLAS
      timeout 200 "$P" --m 64,128,256,1024,4096 --dtypes f16,bf16 >"$OUT/probe_large.log" 2>&1
      echo "probe large rc=$?"; cat "$OUT/probe_large.log"
      ;;
    wgmma)  # M = 16 .. 4096 as the selector runs it, and the kernels it replaced, same run
      timeout 240 "$P" --m 16,24,32,33,48,64,96,128,192,256,384,512,1024,2048,4096 --dtypes f16,bf16 \
        --check >"$OUT/probe_wgmma.log" 2>&1
      echo "probe wgmma rc=$?"; cat "$OUT/probe_wgmma.log"
      timeout 120 "$P" --formats affine-2b-g64,affine-8b-g64,affine-4b-g128 --m 64,512 --dtypes f16 \
        --check >"$OUT/probe_wgmma_widths.log" 2>&1
      echo "probe wgmma widths rc=$?"; cat "$OUT/probe_wgmma_widths.log"
      timeout 120 "$P" --formats affine-2b-g64,affine-8b-g64 --kernel qmm_affine_mma --m 64 --dtypes f16 \
        --no-cublas >"$OUT/probe_mma_widths.log" 2>&1
      echo "probe mma widths rc=$?"; cat "$OUT/probe_mma_widths.log"
      for k in qmm_affine_tc:16,24,32 qmm_affine_mma:64,256 \
               qmm_affine_dq:512,1024,4096; do
        timeout 120 "$P" --kernel "${k%%:*}" --m "${k#*:}" --dtypes f16 --no-cublas \
          >"$OUT/probe_${k%%:*}.log" 2>&1
        echo "probe ${k%%:*} rc=$?"; cat "$OUT/probe_${k%%:*}.log"
      done
      ;;
    dq)  # dequantize + cuBLAS for the other formats and for f32 activations, against matmul_generic
      f=mxfp4,nvfp4,mxfp8,e4m3-channel
      timeout 200 "$P" --formats $f --m 1,2,4,8,16,32 --dtypes bf16,f16 --check >"$OUT/probe_scaled.log" 2>&1
      echo "probe scaled rc=$?"; cat "$OUT/probe_scaled.log"
      f=mxfp4,nvfp4,mxfp8,e4m3-channel,q4_0,q4_K,q6_K
      timeout 200 "$P" --formats $f --shapes 14336x5120 --m 1,2,4,8,16,64,512 --dtypes bf16 --check \
        >"$OUT/probe_dq.log" 2>&1
      echo "probe dq rc=$?"; cat "$OUT/probe_dq.log"
      timeout 200 "$P" --formats $f --shapes 14336x5120 --kernel matmul_generic --m 2,4,8,16,64 \
        --dtypes bf16 --no-cublas --replays 3 >"$OUT/probe_dq_generic.log" 2>&1
      echo "probe generic rc=$?"; cat "$OUT/probe_dq_generic.log"
      timeout 200 "$P" --formats affine-4b-g64 --m 9,16,64,512 --dtypes f32 --check \
        >"$OUT/probe_dq_f32.log" 2>&1
      echo "probe dq f32 rc=$?"; cat "$OUT/probe_dq_f32.log"
      timeout 200 "$P" --formats affine-4b-g64 --kernel matmul_generic --m 9,16,64 --dtypes f32 \
        --no-cublas --replays 3 >"$OUT/probe_dq_f32_generic.log" 2>&1
      echo "probe f32 generic rc=$?"; cat "$OUT/probe_dq_f32_generic.log"
      ;;
    m1_warps)  # every width x group at M = 1: warps per block of qmv_affine_i8 / qmv_affine_rd
      for w in default 1 2 4 8; do
        if [ $w = default ]; then unset QUANTA_QMV_I8_WARPS QUANTA_QMV_RD_WARPS
        else export QUANTA_QMV_I8_WARPS=$w QUANTA_QMV_RD_WARPS=$w; fi
        timeout 120 "$P" --formats affine-all --dtypes f16 --m 1 --no-cublas >"$OUT/m1_warps_$w.log" 2>&1
        echo "m1 warps $w rc=$?"
      done
      unset QUANTA_QMV_I8_WARPS QUANTA_QMV_RD_WARPS
      ;;
    i8_counts)  # every warp count 1..8 forced beside auto (twice), for the fallback's rule, and the
                # registers of every instance (their occupancy); I8C_COUNTS / I8C_SHAPES / I8C_FORMATS /
                # I8C_M narrow it, I8C_CHECK=1 checks every row against the oracle, I8C_KERNEL=
                # qmm_affine_i8 (with I8C_ENV=QUANTA_QMM_I8_WARPS) sweeps that kernel instead
      k=${I8C_KERNEL:-qmv_affine_i8} e=${I8C_ENV:-QUANTA_QMV_I8_WARPS}
      cuobjdump --dump-resource-usage "$P" 2>/dev/null | grep --no-group-separator -A1 "${k}_kernel" \
        | paste - - | sed -E 's/.*Function ([^:]*):.*REG:([0-9]+).*SHARED:([0-9]+).*/\1 \2 \3/' \
        | c++filt >"$OUT/i8_regs.txt"
      echo "$k instances: $(wc -l <"$OUT/i8_regs.txt")"
      f=${I8C_FORMATS:-affine-2b-g32,affine-2b-g64,affine-2b-g128,affine-3b-g32,affine-3b-g64,affine-3b-g128,affine-4b-g32,affine-4b-g64,affine-4b-g128,affine-5b-g32,affine-5b-g64,affine-5b-g128,affine-6b-g32,affine-6b-g64,affine-6b-g128}
      for w in ${I8C_COUNTS:-auto 1 2 3 4 5 6 8 auto}; do
        if [ $w = auto ]; then unset $e; else export $e=$w; fi
        timeout 100 "$P" --formats $f --shapes ${I8C_SHAPES:-27648x5120,14336x5120} --m ${I8C_M:-1,2} --dtypes bf16 \
          --kernel $k --no-cublas ${I8C_CHECK:+--check} 2>&1 | grep -vE '^device|^kernel' | sed "s|^|w=$w |"
      done | tee "$OUT/i8_counts.log" | tail -3
      unset $e
      ;;
    wgmma_sweep)  # qmm_affine_wgmma's work split: CUTLASS's heuristic, data-parallel, stream-K, split-K
      for cfg in D0 D1 D2 S2 S3 S4 S6 S8; do
        case $cfg in D*) export QUANTA_QMM_WGMMA_DECOMPOSITION=${cfg#D} QUANTA_QMM_WGMMA_SPLITS=1 ;;
                     S*) export QUANTA_QMM_WGMMA_DECOMPOSITION=0 QUANTA_QMM_WGMMA_SPLITS=${cfg#S} ;; esac
        timeout 120 "$P" --kernel qmm_affine_wgmma --m 24,33,64,96,128,256,512 --dtypes f16 --no-cublas \
          >"$OUT/sweep_$cfg.log" 2>&1
        echo "sweep $cfg rc=$?"
      done
      unset QUANTA_QMM_WGMMA_DECOMPOSITION QUANTA_QMM_WGMMA_SPLITS
      ;;
    quick)  # the tensor-core family's tests only
      timeout 240 "$T" --gtest_brief=1 --gtest_filter='All/CudaAffine.Tensor*:All/CudaAffine.Auto*:CudaErrors*:SelectCuda*' \
        >"$OUT/tests.log" 2>&1
      echo "quick tests rc=$?"
      grep -E "^\[  (FAILED|PASSED|SKIPPED)|Failure|rel_l2" "$OUT/tests.log" | head -40
      ;;
    prof)  # Nsight Compute on one M = 1 launch, and the SASS of the int4 kernels
      timeout 240 ncu --clock-control none --kernel-name regex:qmm_affine_tc --launch-skip 10 --launch-count 1 \
        --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
        --section SchedulerStats --section MemoryWorkloadAnalysis --section InstructionStats \
        "$P" --shapes 14336x5120 --m 1 --dtypes bf16 --no-cublas --replays 2 >"$OUT/ncu.log" 2>&1
      echo "ncu rc=$?"
      grep -vE "^==PROF==" "$OUT/ncu.log" | grep -E "Duration|Throughput|Issue|Warp Cycles|Occupancy|Eligible|Active Warps|Registers|Shared Memory|Stall|Executed Ipc|L1|L2|DRAM|Block Limit|Waves|Grid" | head -60
      cuobjdump -sass -fun '_ZN6quanta4cuda20qmm_affine_tc_kernelI13__nv_bfloat16Li4ELi1EEEvNS0_6TcArgsE' "$P" >"$OUT/sass_tc4.txt" 2>&1
      echo "sass lines: $(wc -l <"$OUT/sass_tc4.txt")"
      ;;
    stalls)  # why warps wait: stall reasons per issued instruction, and the SM clock
      timeout 240 ncu --clock-control none --kernel-name regex:qmm_affine_tc --launch-skip 10 --launch-count 1 \
        --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,sm__cycles_elapsed.avg.per_second,smsp__inst_executed.sum,gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_active' \
        "$P" --shapes 14336x5120 --m 1 --dtypes bf16 --no-cublas --replays 2 >"$OUT/stalls.log" 2>&1
      echo "ncu stalls rc=$?"
      grep -E "stalled|cycles_elapsed|inst_executed|duration|dram__|issue_active" "$OUT/stalls.log" | awk '$NF+0 > 0.05 || /elapsed|inst|duration|dram|issue/' | head -40
      ;;
    source)  # per-SASS-instruction stall samples of the M = 1 kernel (CSV)
      timeout 300 ncu --clock-control none --kernel-name regex:qmm_affine_tc --launch-skip 10 --launch-count 1 \
        --section SourceCounters --section WarpStateStats --page source --print-source sass --csv \
        "$P" --shapes 14336x5120 --m 1 --dtypes bf16 --no-cublas --replays 2 >"$OUT/source.csv" 2>&1
      echo "ncu source rc=$? lines $(wc -l <"$OUT/source.csv")"
      ;;
    rf)  # qmm_affine_rf / qmm_scaled_rf: their tests, the int4 and fp4 tables, stall reasons at M = 16
      timeout 240 "$T" --gtest_brief=1 \
        --gtest_filter='*RegisterFed*:*AutoSelectionEveryM*:*RepackedKnRunsTheNkKernels/b4*:*RepackedKnRunsTheNkKernels/b6*' \
        >"$OUT/rf_tests.log" 2>&1
      echo "rf tests rc=$?"
      grep -E "^\[  (FAILED|PASSED|SKIPPED)|Failure|rel_l2" "$OUT/rf_tests.log" | head -30
      timeout 200 "$P" --formats affine-4b-g64,affine-4b-g128,affine-8b-g64 --m 5,8,9,16,17,24,32 \
        --dtypes f16,bf16 --kernel qmm_affine_rf --check --no-cublas >"$OUT/probe_rf.log" 2>&1
      echo "probe rf rc=$?"; cat "$OUT/probe_rf.log"
      timeout 200 "$P" --formats mxfp4,nvfp4,e4m3-channel --m 4,8,16,32 --dtypes bf16 \
        --kernel qmm_scaled_rf --check --no-cublas >"$OUT/probe_srf.log" 2>&1
      echo "probe srf rc=$?"; cat "$OUT/probe_srf.log"
      timeout 200 ncu --clock-control none --kernel-name regex:qmm_affine_rf --launch-skip 5 --launch-count 1 \
        --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__inst_executed.sum,gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_active,l1tex__throughput.avg.pct_of_peak_sustained_active,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum' \
        "$P" --kernel qmm_affine_rf --shapes 14336x5120 --m 16 --dtypes f16 --no-cublas --replays 2 \
        >"$OUT/rf_stalls.log" 2>&1
      echo "ncu rf stalls rc=$?"
      grep -E "stalled|inst_executed|duration|dram__|issue_active|l1tex" "$OUT/rf_stalls.log" | awk '$NF+0 > 0.05 || /inst|duration|dram|issue|l1tex/' | head -40
      ;;
    wgrf)  # qmm_affine_wgrf: its tests (+ memcheck, racecheck), then the selection at M = 33..64 (4-bit,
           # every group, cuBLAS beside) against the kernels it replaced there, forced, same run
      timeout 200 "$T" --gtest_brief=1 --gtest_filter='All/CudaAffine.WgmmaRegisterFed/*' >"$OUT/wgrf_tests.log" 2>&1
      echo "wgrf tests rc=$?"; grep -E "^\[  (FAILED|PASSED|SKIPPED)|Failure|rel_l2" "$OUT/wgrf_tests.log" | head -30
      timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 "$T" --gtest_brief=1 \
        --gtest_filter='All/CudaAffine.WgmmaRegisterFed/b4_g64' >"$OUT/wgrf_sanitizer.log" 2>&1
      echo "wgrf memcheck rc=$?"
      timeout 200 compute-sanitizer --tool racecheck --error-exitcode 9 "$T" --gtest_brief=1 \
        --gtest_filter='All/CudaAffine.WgmmaRegisterFed/b4_g128' >>"$OUT/wgrf_sanitizer.log" 2>&1
      echo "wgrf racecheck rc=$?"
      grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/wgrf_sanitizer.log" | sort | uniq -c
      M=${WGRF_M:-33,48,64}
      timeout 150 "$P" --formats affine-4b-g32,affine-4b-g64,affine-4b-g128 --m $M --dtypes f16,bf16 --check \
        2>&1 | tee "$OUT/wgrf_probe.log"
      timeout 100 "$P" --formats affine-4b-g64,affine-4b-g128 --kernel qmm_affine_wgmma --m $M --dtypes f16,bf16 \
        --no-cublas 2>&1 | tee -a "$OUT/wgrf_probe.log"
      timeout 100 "$P" --formats affine-4b-g32 --kernel qmm_affine_mma --m $M --dtypes f16,bf16 \
        --no-cublas 2>&1 | tee -a "$OUT/wgrf_probe.log"
      ;;
    wgrfprof)  # Nsight Compute on qmm_affine_wgrf at M = 64 (14336 x 5120 f16): throughput, stalls, source
      timeout 200 ncu --clock-control none --kernel-name regex:qmm_affine_wgrf --launch-skip 3 --launch-count 1 \
        --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats \
        --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
        "$P" --kernel qmm_affine_wgrf --formats affine-4b-g64 --shapes 14336x5120 --m ${WGRF_PROF_M:-64} \
        --dtypes f16 --no-cublas --replays 2 >"$OUT/wgrf_ncu.txt" 2>&1
      echo "ncu wgrf rc=$?"; grep -E "Duration|Throughput|Registers|Achieved Occupancy|Theoretical Occupancy|Stall|Issue Slots|Executed Ipc|Block Limit" "$OUT/wgrf_ncu.txt" | head -40
      timeout 200 ncu --clock-control none --kernel-name regex:qmm_affine_wgrf --launch-skip 3 --launch-count 1 \
        --section SourceCounters --section WarpStateStats --page source --print-source sass --csv \
        "$P" --kernel qmm_affine_wgrf --formats affine-4b-g64 --shapes 14336x5120 --m ${WGRF_PROF_M:-64} \
        --dtypes f16 --no-cublas --replays 2 >"$OUT/wgrf_source.csv" 2>&1
      echo "ncu wgrf source rc=$? lines $(wc -l <"$OUT/wgrf_source.csv")"
      ;;
    knpack)  # [K, N] with and without quanta::prepack's [N, K] copy, alternating; its tests first
      timeout 100 "$T" --gtest_brief=1 --gtest_filter='*KnDevicePack*:*RepackedKn*:SelectCuda*' \
        >"$OUT/tests_knpack.log" 2>&1
      echo "knpack tests rc=$?"; tail -3 "$OUT/tests_knpack.log"
      timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 "$T" --gtest_brief=1 \
        --gtest_filter='All/CudaAffine.KnDevicePack/b4_g64:All/CudaAffine.KnDevicePack/b3_g32' \
        >"$OUT/sanitizer_knpack.log" 2>&1
      echo "knpack memcheck rc=$?"; grep "ERROR SUMMARY" "$OUT/sanitizer_knpack.log"
      a="--layout kn --formats affine-4b-g64,affine-2b-g64,affine-8b-g64,affine-3b-g64"
      a="$a --m 1,2,4,8,16,64,256 --dtypes f16,bf16 --check --no-cublas"
      for r in 1 2; do
        timeout 150 "$P" $a | sed "s/^/plain /"
        timeout 150 "$P" $a --prepack | sed "s/^/packed /"
      done >"$OUT/probe_knpack.log" 2>&1
      echo "probe knpack done"; grep -cE "^(plain|packed) " "$OUT/probe_knpack.log"
      ;;
    small)  # qmm_affine_wgmma's work split on the small seed shapes (N <= 5120 lose to cuBLAS from
            # M = 8 on packed weights): heuristic, data-parallel, stream-K, split-K 2..8
      for cfg in D0 D1 D2 S2 S3 S4 S8; do
        case $cfg in D*) export QUANTA_QMM_WGMMA_DECOMPOSITION=${cfg#D} QUANTA_QMM_WGMMA_SPLITS=1 ;;
                     S*) export QUANTA_QMM_WGMMA_DECOMPOSITION=0 QUANTA_QMM_WGMMA_SPLITS=${cfg#S} ;; esac
        timeout 60 "$P" --kernel qmm_affine_wgmma --shapes 4096x4096,5120x5120,14336x5120 \
          --m 32,64,128,512 --dtypes f16 --no-cublas --prepack 2>&1 | grep -vE '^device|^kernel' |
          sed "s/^/$cfg /" >>"$OUT/small_sweep.log"
        echo "small sweep $cfg rc=$?"
      done
      unset QUANTA_QMM_WGMMA_DECOMPOSITION QUANTA_QMM_WGMMA_SPLITS
      timeout 60 "$P" --shapes 4096x4096,5120x5120 --m 8,16,32,64,128 --dtypes f16 --prepack \
        >"$OUT/small_auto.log" 2>&1
      echo "small auto rc=$?"; cat "$OUT/small_auto.log"
      ;;
    checkonly)  # `quanta bench --device cuda --check-only` with the command packed by PACK_CLI=1
      C=${CLI:-build-cuda/cli}
      LD_LIBRARY_PATH=$PWD/$C:$LD_LIBRARY_PATH timeout 500 "$C/quanta" bench --device cuda --check-only \
        >"$OUT/checkonly.log" 2>&1
      echo "check-only rc=$?"; grep -vE '^\s*$' "$OUT/checkonly.log" | tail -4
      ;;
    srf64)  # microscaled / fp8 at M = 33..64: qmm_scaled_rf in passes of 32 rows against dequantize + cuBLAS
      for k in qmm_scaled_rf qmm_generic_dq; do
        timeout 200 "$P" --formats mxfp4,nvfp4,e4m3-channel --m 32,33,48,64,96 --dtypes bf16 --kernel $k \
          --check --no-cublas 2>&1 | grep -vE '^device|^kernel' | tee -a "$OUT/probe_srf64.log"
      done
      ;;
    gguf)  # the GGUF kernels: their tests, then qmv_gguf / qmm_gguf_mma / dequantize + cuBLAS over M
           # (GGUF_FORMATS, GGUF_DTYPES; one log, the small M first)
      timeout 120 "$T" --gtest_brief=1 --gtest_filter='*Gguf*:SelectCuda*' 2>&1 | grep -E "^\[  (FAILED|PASSED)|Failure" | tee "$OUT/gguf.log"
      G=${GGUF_FORMATS:-q4_0,q4_1,q5_0,q5_1,q8_0,q2_K,q3_K,q4_K,q5_K,q6_K}
      for k in qmv_gguf qmm_gguf_mma; do
        timeout 120 "$P" --formats "$G" --shapes 14336x5120,5120x14336,27648x5120 --m 1,2,3,4,5,8 \
          --dtypes "${GGUF_DTYPES:-bf16,f16}" --kernel $k --check --no-cublas 2>&1 | grep -vE '^device|^kernel' | tee -a "$OUT/gguf.log"
      done
      for k in qmm_gguf_mma qmm_generic_dq; do
        timeout 200 "$P" --formats "$G" --shapes 14336x5120,5120x14336,27648x5120 --m 16,32,48,64,96,128 \
          --dtypes "${GGUF_DTYPES:-bf16,f16}" --kernel $k --check --no-cublas 2>&1 | grep -vE '^device|^kernel' | tee -a "$OUT/gguf.log"
      done
      for k in gather_qmm_gguf_mma gather_qmv_gguf; do  # expert stacks: 8 of Mixtral's, 128 of Qwen3-30B's
        timeout 150 "$P" --experts 8 --formats q4_0,q4_K,q6_K,q8_0 --shapes 14336x4096,4096x14336 --m 8,16,32,128,512 \
          --dtypes bf16 --kernel $k --check --no-cublas --replays 10 2>&1 | grep -vE '^device|^kernel' | tee -a "$OUT/gguf.log"
        timeout 100 "$P" --experts 128 --formats q4_0,q4_K,q6_K,q8_0 --shapes 768x2048,2048x768 --m 64,256,1024,4096 \
          --dtypes bf16 --kernel $k --check --no-cublas --replays 10 2>&1 | grep -vE '^device|^kernel' | tee -a "$OUT/gguf.log"
      done
      ;;
    agather)  # affine / scaled expert stacks: rows grouped by expert (gather_qmm_affine_mma,
              # gather_qmm_scaled_mma) against the one-row / two-row passes (gather_qmv_affine_i8,
              # gather_qmv_affine, gather_qmv_scaled); rows an expert = M / experts
      for k in gather_qmm_affine_mma gather_qmv_affine_i8 gather_qmv_affine; do  # 8 of Mixtral's experts, 128 of Qwen3-30B's
        [ $k = gather_qmv_affine ] && ms=8,16,32 || ms=8,16,32,48,64,80,96,128
        timeout 200 "$P" --experts 8 --formats affine-2b-g64,affine-4b-g64,affine-8b-g64,affine-3b-g64 --shapes 14336x4096,4096x14336 \
          --m $ms --dtypes bf16 --kernel $k --check --no-cublas --replays 10 2>&1 | grep -vE '^device|^kernel' | tee -a "$OUT/agather.log"
        [ $k = gather_qmv_affine ] && ms=128,512 || ms=128,256,512,768,1024,1536
        timeout 150 "$P" --experts 128 --formats affine-2b-g64,affine-4b-g64,affine-8b-g64,affine-3b-g64 --shapes 768x2048,2048x768 \
          --m $ms --dtypes bf16 --kernel $k --check --no-cublas --replays 10 2>&1 | grep -vE '^device|^kernel' | tee -a "$OUT/agather.log"
      done
      for k in gather_qmm_scaled_mma gather_qmv_scaled; do  # 32 of gpt-oss-20b's experts, 8 of Mixtral's shape
        timeout 200 "$P" --experts 32 --formats mxfp4,nvfp4,mxfp8,e4m3-channel --shapes 2880x2880 \
          --m 32,128,512,2048 --dtypes bf16 --kernel $k --check --no-cublas --replays 10 2>&1 | grep -vE '^device|^kernel' | tee -a "$OUT/agather.log"
        timeout 200 "$P" --experts 8 --formats mxfp4,nvfp4,mxfp8,e4m3-channel --shapes 14336x4096,4096x14336 \
          --m 8,32,128,512 --dtypes bf16 --kernel $k --check --no-cublas --replays 10 2>&1 | grep -vE '^device|^kernel' | tee -a "$OUT/agather.log"
      done
      ;;
    agather_cross)  # where the tile gather overtakes the pairs: 6..14 rows an expert, both kernels, for the
                    # widths in $AG_FORMATS (default: the groups of 32 / 128 of 5-, 6- and 8-bit codes)
      f=${AG_FORMATS:-affine-5b-g32,affine-5b-g128,affine-6b-g32,affine-6b-g128,affine-8b-g32,affine-8b-g128}
      for k in gather_qmm_affine_mma gather_qmv_affine_i8; do
        timeout 200 "$P" --experts 8 --formats $f --shapes 14336x4096 --m 48,64,80,96,112 --dtypes bf16 \
          --kernel $k --check --no-cublas --replays 10 2>&1 | grep -vE '^device|^kernel' | tee -a "$OUT/agather_cross.log"
        timeout 200 "$P" --experts 128 --formats $f --shapes 768x2048 --m 768,1024,1280,1536,1792 --dtypes bf16 \
          --kernel $k --check --no-cublas --replays 10 2>&1 | grep -vE '^device|^kernel' | tee -a "$OUT/agather_cross.log"
      done
      ;;
    ksrc)  # one kernel under Nsight Compute: stall reasons per issued instruction, and per-SASS-instruction
           # samples (CSV); KSRC_KERNEL (default qmm_affine_rf), KSRC_M (16), KSRC_FORMAT (affine-4b-g64),
           # KSRC_DTYPE (f16), KSRC_SHAPE (14336x5120)
      k=${KSRC_KERNEL:-qmm_affine_rf} m=${KSRC_M:-16}
      args="--kernel $k --formats ${KSRC_FORMAT:-affine-4b-g64} --shapes ${KSRC_SHAPE:-14336x5120} --m $m"
      args="$args --dtypes ${KSRC_DTYPE:-f16} --no-cublas --replays 2"
      timeout 200 ncu --clock-control none --kernel-name regex:"${k}_kernel" --launch-skip 5 --launch-count 1 \
        --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,sm__cycles_elapsed.avg.per_second,smsp__inst_executed.sum,gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.per_cycle_active,launch__registers_per_thread' \
        "$P" $args >"$OUT/${k}_m${m}_stalls.log" 2>&1
      echo "ncu $k M=$m stalls rc=$?"
      grep -E "stalled|cycles_elapsed|inst_executed|duration|dram__|issue_active|warps_active|registers" "$OUT/${k}_m${m}_stalls.log" \
        | awk '$NF+0 > 0.05 || /elapsed|inst|duration|dram|issue|warps_active|registers/' | head -40
      timeout 300 ncu --clock-control none --kernel-name regex:"${k}_kernel" --launch-skip 5 --launch-count 1 \
        --section SourceCounters --section WarpStateStats --page source --print-source sass --csv \
        "$P" $args >"$OUT/${k}_m${m}_source.csv" 2>&1
      echo "ncu $k M=$m source rc=$? lines $(wc -l <"$OUT/${k}_m${m}_source.csv")"
      ;;
    ab)  # the same probe rows from the binary in $OLD (an earlier commit's build) and this one, alternating
         # (AB_M: the rows of x, default 5,8,16,32 for int4 and 4,8,16,32 for fp4)
      for r in 1 2; do
        for b in "$OLD" "$D"; do
          for args in "--formats affine-4b-g64 --kernel qmm_affine_rf --m ${AB_M:-5,8,16,32} --dtypes f16" \
                      "--formats mxfp4,nvfp4 --kernel qmm_scaled_rf --m ${AB_M:-4,8,16,32} --dtypes bf16"; do
            LD_LIBRARY_PATH=$PWD/$b:$LD_LIBRARY_PATH timeout 120 "$b/quanta_cuda_probe" $args --no-cublas \
              --shapes 14336x5120,27648x5120 2>&1 | grep -vE '^device|^kernel' | sed "s|^|$b |"
          done
        done
      done | tee "$OUT/ab.log"
      ;;
    l1)  # where the small-M kernels' load instructions go: L1 wavefronts per kind of access
      for km in qmm_affine_rf:8 qmm_affine_rf:16 qmm_affine_rf:32 qmv_affine_i8:1; do
        k=${km%%:*}; m=${km#*:}
        timeout 200 ncu --clock-control none --kernel-name regex:"${k}" --launch-skip 5 --launch-count 1 \
          --section SpeedOfLight --section MemoryWorkloadAnalysis_Tables --section WarpStateStats \
          --section LaunchStats --section Occupancy \
          --metrics l1tex__data_pipe_lsu_wavefronts_mem_lg_cmd_read.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,smsp__inst_executed_op_global_ld.sum,sm__cycles_elapsed.avg.per_second \
          "$P" --kernel "$k" --formats affine-4b-g64 --shapes 14336x5120 --m "$m" --dtypes f16 \
          --no-cublas --replays 2 >"$OUT/l1_${k}_$m.log" 2>&1
        echo "ncu $k M=$m rc=$?"
        grep -vE "^==PROF==" "$OUT/l1_${k}_$m.log" | grep -E "Duration|L1/TEX Cache Throughput|DRAM Throughput|Global Load|Shared Load|Stall|Issued Ipc|Registers|Achieved Occupancy|wavefronts|requests|sectors|inst_executed|per_second" | head -30
      done
      ;;
    api)  # the adapter API bench/device_cuda.cpp calls
      timeout 120 "$P" --api >"$OUT/api.log" 2>&1
      echo "api rc=$?"; cat "$OUT/api.log"
      ;;
    extra)  # the other fast paths at M = 1: [K, N] (qvm), f32 activations, split vs dequantizing
      timeout 200 "$P" --layout kn --dtypes bf16,f16,f32 --m 1,4 >"$OUT/probe_extra.log" 2>&1
      timeout 200 "$P" --dtypes f32 --m 1,2,8 >>"$OUT/probe_extra.log" 2>&1
      timeout 200 "$P" --kernel qmm_affine_tc --dtypes bf16,f16 --m 1 >>"$OUT/probe_extra.log" 2>&1
      echo "probe extra rc=$?"; grep -vE "^device|^kernel" "$OUT/probe_extra.log"
      ;;
    *)
      echo "unknown step $s"
      ;;
  esac
  echo "step $s took $(($(date +%s) - start)) s"
done
