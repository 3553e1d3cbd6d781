#!/usr/bin/env bash
# On a machine with an NVIDIA GPU and driver (see gpu_driver_link.py for the prepare step).
# Carried: .whl/ (cudasplit + lief, zstandard, pyelftools wheels) and .gpu/ (the tarball).
set -euo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
W=/tmp/cudasplit-gpu
rm -rf "$W" && mkdir -p "$W/driver/lib"
tarball=$(ls .gpu/cuda_cudart-*-archive.tar.xz)
libcuda=$(ldconfig -p | awk '/libcuda\.so\.1 /{print $NF; exit}')
ln -s "$(readlink -f "$libcuda")" "$W/driver/lib/libcuda.so.1"
echo "driver libcuda: $(readlink -f "$libcuda")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader

cat > "$W/vecadd.cu" <<'CU'
#include <cstdio>
#include <cuda_runtime.h>
__global__ void add(const float *a, const float *b, float *c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = a[i] + b[i];
}
int main() {
  const int n = 1 << 20; float *a, *b, *c;
  if (cudaMallocManaged(&a, n * 4) != cudaSuccess) { puts("cudaMalloc failed"); return 1; }
  cudaMallocManaged(&b, n * 4); cudaMallocManaged(&c, n * 4);
  for (int i = 0; i < n; i++) { a[i] = i; b[i] = 2 * i; }
  add<<<(n + 255) / 256, 256>>>(a, b, c, n);
  cudaError_t err = cudaDeviceSynchronize();
  int bad = 0; for (int i = 0; i < n; i++) bad += c[i] != 3.0f * i;
  printf("kernel: %s, wrong results: %d\n", cudaGetErrorString(err), bad);
  return err != cudaSuccess || bad;
}
CU

for mode in driver-link control; do
  out="$W/split-$mode"
  flags=(--driver-link "$W/driver")
  [ "$mode" = control ] && flags=(--no-driver-link)
  python3 -m cudasplit split "$tarball" -o "$out" "${flags[@]}" --report "$W/report-$mode.json" -q
  cudart=$(ls "$out"/lib/lib/libcudart.so.13.*)
  echo "== $mode: $(readelf -d "$cudart" | grep -E 'RUNPATH|RPATH' || echo 'no RUNPATH')"
  nvcc -arch=sm_90 "$W/vecadd.cu" -o "$W/vecadd-$mode" -cudart shared \
       -L"$out/lib/lib" -Xlinker -rpath -Xlinker "$out/lib/lib"
  env -u LD_LIBRARY_PATH LD_DEBUG=libs "$W/vecadd-$mode" 2> "$W/ld-$mode.log"
  grep -E "calling init: .*lib(cudart|cuda)\.so" "$W/ld-$mode.log" | sed 's/^ *[0-9]*: *//'
done
