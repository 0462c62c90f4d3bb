#!/usr/bin/env bash
# Builds the GPU binaries that bench/cuda/h200_run.sh runs on the device machine (the GPU test
# subset and quanta_cuda_probe) into build-cuda/devrun, linking the library's objects directly so
# other engineers' work in progress elsewhere cannot block the link; carries libfmt along.
# Needs a configured build-cuda (see docs/perf-cuda.md).
set -uo pipefail
cd "$(dirname "$0")/../.."
L=src/CMakeFiles/quanta.dir
objs="$(for f in src/cuda/*.cu src/cuda/*.cpp; do echo $L/cuda/$(basename $f).o; done) $L/format/quantize.cpp.o"
T=tests/CMakeFiles/quanta_tests.dir
ninja -C build-cuda -j2 $objs $T/gpu/test_cuda_affine.cpp.o $T/gpu/test_cuda_generic.cpp.o \
  $T/gpu/test_cuda_errors.cpp.o $T/gpu/test_cuda_quantize.cpp.o $T/test_select_cuda.cpp.o \
  bench/CMakeFiles/quanta_bench.dir/cuda/gpu_timing.cu.o \
  bench/CMakeFiles/quanta_cuda_probe.dir/cuda/probe_main.cpp.o 2>&1 | grep -E "error|FAILED" -A3 | head -20
mkdir -p build-cuda/devrun build-cuda/devlib
rm -f build-cuda/devlib/libq.a
ar rcs build-cuda/devlib/libq.a $(find build-cuda/$L -name '*.o')
O=build-cuda/$T
LIBS="build-cuda/devlib/libq.a -lfmt -L/usr/local/cuda/lib64 -lcudart -lcublas -lpthread"
g++ -o build-cuda/devrun/quanta_gpu_tests $O/gpu/*.o $O/test_select_cuda.cpp.o $LIBS -lgtest_main -lgtest
g++ -o build-cuda/devrun/quanta_cuda_probe build-cuda/bench/CMakeFiles/quanta_cuda_probe.dir/cuda/probe_main.cpp.o \
  build-cuda/bench/CMakeFiles/quanta_bench.dir/cuda/gpu_timing.cu.o $LIBS
strip build-cuda/devrun/quanta_gpu_tests build-cuda/devrun/quanta_cuda_probe
cp -L /lib/x86_64-linux-gnu/libfmt.so.9 build-cuda/devrun/
ls -la build-cuda/devrun
