#!/usr/bin/env bash
# Builds the GPU binaries that bench/cuda/h200_run.sh runs on the device machine (the GPU test
# subset and quanta_cuda_probe) into $B/devrun, linking the library's objects directly so
# other engineers' work in progress elsewhere cannot block the link; carries libfmt along.
# Needs a configured build-cuda (see docs/perf-cuda.md).
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${BUILD:-build-cuda}
# One pack at a time: two overlapping runs once wrote the same archive and left it corrupt.
exec 9>"$B/.make_devrun.lock"
flock -n 9 || { echo "make_devrun.sh: another run holds $B/.make_devrun.lock" >&2; exit 1; }
L=src/CMakeFiles/quanta.dir
# The CUDA objects, and the CPU ones whose edits the GPU tests must see (the oracle, the codecs).
objs="$(for f in src/cuda/*.cu src/cuda/*.cpp; do echo $L/cuda/$(basename $f).o; done) $L/format/quantize.cpp.o $L/cpu/reference/reference.cpp.o"
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
# The device tool carries at most 64 MiB: the two binaries go compressed (~42 MB) as
# devpack/devrun.tar.xz (ignored by git; the run unpacks it: `tar -C build-cuda -xJf
# devpack/devrun.tar.xz`). PACK_CLI=1 also packs the `quanta` command with the libraries the
# GPU machine lacks (OpenBLAS, gfortran, fmt) as devpack/cli.tar.xz, for `quanta bench --device
# cuda --check-only` (run it with LD_LIBRARY_PATH=build-cuda/cli).
mkdir -p devpack
# -9e: ~12% under -6, inside the 64 MiB carry; written aside, tested, then moved into place.
tar -C $B -cf - devrun | xz -T2 -9e >devpack/devrun.tar.xz.part &&
  xz -t devpack/devrun.tar.xz.part && mv devpack/devrun.tar.xz.part devpack/devrun.tar.xz
if [ "${PACK_CLI:-0}" = 1 ]; then
  rm -rf $B/cli && mkdir -p $B/cli
  cp $B/tools/quanta/quanta $B/cli/ && strip $B/cli/quanta
  for l in libopenblas.so.0 libgfortran.so.5 libquadmath.so.0 libfmt.so.9; do
    cp -L "$(ldd $B/tools/quanta/quanta | awk -v l=$l '$1 == l {print $3}')" $B/cli/
  done
  tar -C $B -cf - cli | xz -T2 -6 >devpack/cli.tar.xz
fi
ls -la devpack
