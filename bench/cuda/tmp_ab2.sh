#!/bin/bash
mkdir -p build-cuda && xz -dc devpack/all3.tar.xz | tar -C build-cuda -xf - devp cli
cd build-cuda; cp cli/libfmt.so.9 devp/
export LD_LIBRARY_PATH=$PWD/devp
P="--formats affine-4b-g64 --m 272,288,320 --dtypes f16,bf16 --check --prepack --no-cublas --shapes 14336x5120,5120x14336,8192x5120,10240x8192,6144x4096"
for r in 1 2; do
  echo "== new $r" >> $OUT/ab.log; timeout 100 ./devp/quanta_cuda_probe $P >> $OUT/ab.log 2>&1
  echo "== old $r" >> $OUT/ab.log; QUANTA_QMM_WGMMA_TOKENS=128 timeout 100 ./devp/quanta_cuda_probe $P >> $OUT/ab.log 2>&1
done
