#!/bin/bash
mkdir -p build-cuda && xz -dc devpack/pt.tar.xz | tar -C build-cuda -xf -
cd build-cuda; cp devp/libfmt.so.9 devt/
export LD_LIBRARY_PATH=$PWD/devp
{ timeout 200 ./devt/quanta_gpu_tests --gtest_brief=1 --gtest_filter='*Wgmma*:*AutoSelection*:*SelectCuda*' 2>&1 | tail -n 8; } > $OUT/subset.log
P="--formats affine-4b-g64 --m 272,320,384 --dtypes f16 --check --prepack --no-cublas --shapes 14336x5120,5120x14336,27648x5120"
echo "== rule" >> $OUT/ab.log; timeout 100 ./devp/quanta_cuda_probe $P >> $OUT/ab.log 2>&1
echo "== 128" >> $OUT/ab.log; QUANTA_QMM_WGMMA_TOKENS=128 timeout 100 ./devp/quanta_cuda_probe $P >> $OUT/ab.log 2>&1
