#!/bin/bash
# temporary: A/B of the 4-bit value order in the device pack + validation
mkdir -p build-cuda && xz -dc devpack/all4.tar.xz | tar -C build-cuda -xf -
cd build-cuda; cp devp/libfmt.so.9 devt/ ; cp devp/libfmt.so.9 devp_old/ 2>/dev/null
export LD_LIBRARY_PATH=$PWD/devp
P="--formats affine-4b-g64,affine-4b-g128 --m 48,64,128,256,1024 --dtypes f16,bf16 --check --prepack"
{ timeout 120 ./devt/quanta_gpu_tests --gtest_brief=1 --gtest_filter='*WgmmaDevicePack*:*Wgmma*:*AutoSelection*:*SelectCuda*' 2>&1 | tail -n 15; } > $OUT/subset.log
for r in 1 2; do
  echo "== new $r" >> $OUT/ab.log; timeout 150 ./devp/quanta_cuda_probe $P --no-cublas >> $OUT/ab.log 2>&1
  echo "== old $r" >> $OUT/ab.log; timeout 150 ./devp_old/quanta_cuda_probe $P --no-cublas >> $OUT/ab.log 2>&1
done
echo "== new cublas" >> $OUT/ab.log; timeout 150 ./devp/quanta_cuda_probe $P >> $OUT/ab.log 2>&1
