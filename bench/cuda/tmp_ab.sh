#!/bin/bash
# temporary: A/B of 192-token tiles (packed int4, M in (256, 384]) + full validation
mkdir -p build-cuda && xz -dc devpack/all3.tar.xz | tar -C build-cuda -xf -
cd build-cuda; cp cli/libfmt.so.9 devt/; cp cli/libfmt.so.9 devp/
export LD_LIBRARY_PATH=$PWD/devp
P="--formats affine-4b-g64,affine-4b-g128 --m 257,320,384 --dtypes f16,bf16 --check --prepack"
for r in 1 2; do
  echo "== new $r" >> $OUT/ab.log; timeout 100 ./devp/quanta_cuda_probe $P --no-cublas >> $OUT/ab.log 2>&1
  echo "== old $r" >> $OUT/ab.log; QUANTA_QMM_WGMMA_TOKENS=128 timeout 100 ./devp/quanta_cuda_probe $P --no-cublas >> $OUT/ab.log 2>&1
done
echo "== new cublas" >> $OUT/ab.log; timeout 100 ./devp/quanta_cuda_probe $P >> $OUT/ab.log 2>&1
{ timeout 250 ./devt/quanta_gpu_tests --gtest_brief=1 2>&1 | tail -n 25; } > $OUT/tests.log
{ LD_LIBRARY_PATH=$PWD/cli timeout 150 ./cli/quanta bench --device cuda --check-only 2>&1 | tail -n 4; } > $OUT/check.log
