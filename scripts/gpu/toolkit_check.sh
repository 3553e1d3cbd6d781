#!/bin/bash
# Run on the GPU machine from a checkout with .dev-toolkit/ holding: the cudasplit, pyelftools,
# zstandard and cmake 4.4.5 wheels, CMakeLists.txt (scripts/gpu/toolkit_CMakeLists.txt) and
# prog.cu (PROGRAM of tests/test_cmake_toolkit.py). Writes $OUT/gpu.log.
# Issue 25 on the GPU machine: split pieces of the installed CUDA 13.0 toolkit as NVIDIA's
# redist packages, lay out one prefix with `cudasplit toolkit`, build a CMake CUDA project
# against it (CUDAToolkit_ROOT=<prefix>) and run its kernel.
set -u
W=/tmp/tk-toolkit; rm -rf $W; mkdir -p $W/src $W/split
exec > >(tee $OUT/gpu.log) 2>&1
D=$PWD/.dev-toolkit; cd $W  # not the checkout: python -m would import its cudasplit
rm -rf /tmp/site-toolkit /tmp/cmk-toolkit; python3 -m pip install -q --no-index --no-deps --target /tmp/site-toolkit --upgrade $D/cudasplit-*.whl $D/pyelftools-*.whl $D/zstandard-*.whl
python3 -m pip install -q --no-index --no-deps --target /tmp/cmk-toolkit --upgrade $D/cmake-*.whl
export PYTHONPATH=/tmp/site-toolkit
CM=/tmp/cmk-toolkit/cmake/data/bin/cmake; $CM --version | head -1
C=/usr/local/cuda; T=$C/targets/x86_64-linux
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
ls $T/lib/libcudart.so.* 
V=13.0.88
top() { echo $W/src/$1-linux-x86_64-$V-archive; }
mkdir -p $(top cuda_nvcc)/bin $(top libnvvm) $(top cuda_crt)/include $(top cuda_cccl)/include $(top cuda_cudart)/include $(top cuda_cudart)/lib
for t in nvcc nvcc.profile ptxas fatbinary cudafe++ nvlink bin2c crt; do cp -a $C/bin/$t $(top cuda_nvcc)/bin/; done
cp -a $C/nvvm $(top libnvvm)/nvvm
cp -a $T/include/crt $(top cuda_crt)/include/
cp -a $T/include/cccl $(top cuda_cccl)/include/
cp -a $T/include/. $(top cuda_cudart)/include/; rm -rf $(top cuda_cudart)/include/crt $(top cuda_cudart)/include/cccl
cp -a $T/lib/libcudart.so* $T/lib/libcudart_static.a $T/lib/libcudadevrt.a $(top cuda_cudart)/lib/
mkdir -p $(top cuda_cudart)/lib/stubs && cp -a $T/lib/stubs/libcuda.so $(top cuda_cudart)/lib/stubs/
for p in cuda_cccl cuda_crt cuda_cudart libnvvm cuda_nvcc; do
  python3 -m cudasplit split $(top $p) -o $W/split/$p -q --no-driver-link 2>&1 | grep -v needed-unresolved | tail -2
done
python3 -m cudasplit toolkit $W/split/* -o $W/cuda || exit 1
ls -la $W/cuda $W/cuda/targets/x86_64-linux | head -20
mkdir -p $W/proj && cp $D/CMakeLists.txt $D/prog.cu $W/proj/
cd $W/proj
env -i PATH=/usr/bin:/bin HOME=$W CUDAToolkit_ROOT=$W/cuda CUDACXX=$W/cuda/bin/nvcc $CM -S . -B build 2>&1 | tail -8
env -i PATH=/usr/bin:/bin $CM --build build 2>&1 | tail -3
ldd build/prog | grep -i cuda
./build/prog
echo "direct nvcc:"; env -i PATH=/usr/bin:/bin $W/cuda/bin/nvcc -arch=sm_90 -o direct prog.cu && ./direct
echo "with the prefix's libcudart:"; LD_LIBRARY_PATH=$W/cuda/lib64 ldd build/prog | grep -i cudart; LD_LIBRARY_PATH=$W/cuda/lib64 ./build/prog
