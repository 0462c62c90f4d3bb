#!/usr/bin/env bash
# Builds the GPU binaries that bench/cuda/h200_run.sh runs on the device machine (the GPU test
# subset and quanta_cuda_probe) into $B/devrun, linking the library's objects directly so
# other engineers' work in progress elsewhere cannot block the link; carries libfmt along.
# Needs a configured build-cuda (see docs/perf-cuda.md).
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${BUILD:-build-cuda}
L=src/CMakeFiles/quanta.dir
objs="$(for f in src/cuda/*.cu src/cuda/*.cpp; do echo $L/cuda/$(basename $f).o; done) $L/format/quantize.cpp.o"
T=tests/CMakeFiles/quanta_tests.dir
ninja -C $B -j2 $objs $T/gpu/test_cuda_affine.cpp.o $T/gpu/test_cuda_generic.cpp.o \
  $T/gpu/test_cuda_errors.cpp.o $T/gpu/test_cuda_quantize.cpp.o $T/test_select_cuda.cpp.o \
  bench/CMakeFiles/quanta_bench.dir/cuda/gpu_timing.cu.o \
  bench/CMakeFiles/quanta_cuda_probe.dir/cuda/probe_main.cpp.o 2>&1 | grep -E "error|FAILED" -A3 | head -20
mkdir -p $B/devrun $B/devlib
rm -f $B/devlib/libq.a
ar rcs $B/devlib/libq.a $(find $B/$L -name '*.o')
O=$B/$T
LIBS="$B/devlib/libq.a -lfmt -L/usr/local/cuda/lib64 -lcudart -lcublas -lpthread"
g++ -o $B/devrun/quanta_gpu_tests $O/gpu/*.o $O/test_select_cuda.cpp.o $LIBS -lgtest_main -lgtest
g++ -o $B/devrun/quanta_cuda_probe $B/bench/CMakeFiles/quanta_cuda_probe.dir/cuda/probe_main.cpp.o \
  $B/bench/CMakeFiles/quanta_bench.dir/cuda/gpu_timing.cu.o $LIBS
strip $B/devrun/quanta_gpu_tests $B/devrun/quanta_cuda_probe
cp -L /lib/x86_64-linux-gnu/libfmt.so.9 $B/devrun/
ls -la $B/devrun
