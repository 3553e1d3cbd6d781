#!/usr/bin/env bash
# On a machine with an NVIDIA GPU and driver; see gpu_real_elf.py for the prepare step.
# Carried: .whl/ (cudasplit + lief, zstandard, pyelftools wheels) and .gpu/ (the tarballs).
set -euo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
W=/tmp/cudasplit-real
rm -rf "$W" && mkdir -p "$W/driver/lib"
HASH=0123456789abcdfghijklmnpqrsvwxyz
COMPAT=/nix/store/$HASH-cuda_compat-12.9/compat            # not present: first, then skipped
LOADER=$W/nix/store/$HASH-glibc-2.40-66/lib/ld-linux-x86-64.so.2
mkdir -p "$(dirname "$LOADER")" && cp -L /lib64/ld-linux-x86-64.so.2 "$LOADER"
libcuda=$(ldconfig -p | awk '/libcuda\.so\.1 /{print $NF; exit}')
ln -s "$(readlink -f "$libcuda")" "$W/driver/lib/libcuda.so.1"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "driver libcuda: $(readlink -f "$libcuda")"

for t in .gpu/*.tar.xz; do
  name=$(basename "$t" | cut -d- -f1)
  python3 -m cudasplit split "$t" -o "$W/split/$name" --driver-link "$W/driver" \
      --cuda-compat "$COMPAT" --interpreter "$LOADER" --report "$W/report-$name.json" -q
done
python3 - "$W" <<'PY'
import json, sys, glob
for path in sorted(glob.glob(sys.argv[1] + "/report-*.json")):
    for m in json.load(open(path))["members"]:
        if m.get("runpath_after") or m.get("interpreter_after"):
            print(f"{m['path']}: patch={m['patch']} RUNPATH={m['runpath_after']}"
                  + (f" interp={m['interpreter_after']}" if m.get("interpreter_after") else ""))
PY

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
  printf("vecadd kernel: %s, wrong results: %d\n", cudaGetErrorString(err), bad);
  return err != cudaSuccess || bad;
}
CU
cat > "$W/scale.cu" <<'CU'
extern "C" __global__ void scale(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2.0f;
}
CU
cat > "$W/load.c" <<'C'
#include <cuda.h>
#include <stdio.h>
#define CK(x) do { CUresult r = (x); if (r) { printf("%s failed: %d\n", #x, r); return 1; } } while (0)
int main(int argc, char **argv) {
  CUdevice d; CUcontext ctx; CUmodule m; CUfunction f; CUdeviceptr p; int n = 4096;
  float h[4096]; for (int i = 0; i < n; i++) h[i] = i;
  CK(cuInit(0)); CK(cuDeviceGet(&d, 0)); CK(cuCtxCreate(&ctx, NULL, 0, d));
  CK(cuModuleLoad(&m, argv[1])); CK(cuModuleGetFunction(&f, m, "scale"));
  CK(cuMemAlloc(&p, sizeof h)); CK(cuMemcpyHtoD(p, h, sizeof h));
  void *args[] = {&p, &n};
  CK(cuLaunchKernel(f, 16, 1, 1, 256, 1, 1, 0, 0, args, 0)); CK(cuCtxSynchronize());
  CK(cuMemcpyDtoH(h, p, sizeof h));
  int bad = 0; for (int i = 0; i < n; i++) bad += h[i] != 2.0f * i;
  printf("cubin from the split ptxas: launched, wrong results: %d\n", bad);
  return bad != 0;
}
C
nvcc -arch=sm_90 -ptx "$W/scale.cu" -o "$W/scale.ptx"
nvcc "$W/load.c" -o "$W/load" -lcuda

status=0
for variant in patched strip-debug strip-all; do
  V="$W/$variant" && cp -a "$W/split" "$V"
  if [ "$variant" != patched ]; then
    find "$V" -type f \( -name '*.so*' -o -name ptxas \) -exec strip "--$variant" {} +
  fi
  lib="$V/cuda_cudart/lib/lib"
  echo "== $variant: $(readelf -d "$lib/libcudart.so.13.0.96" | grep -E 'RUNPATH' | sed 's/.*\[//;s/\]//')"
  nvcc -arch=sm_90 "$W/vecadd.cu" -o "$V/vecadd" -cudart shared -L"$lib" \
       -Xlinker -rpath -Xlinker "$lib"
  env -u LD_LIBRARY_PATH LD_DEBUG=libs "$V/vecadd" 2> "$V/ld.log" || status=1
  grep -E "calling init: .*libcuda\.so" "$V/ld.log" | sed 's/^ *[0-9]*: *//' || status=1
  cupti="$V/cuda_cupti/lib/lib"
  env -u LD_LIBRARY_PATH python3 - "$cupti" <<'PY' || status=1
import ctypes, sys
d = sys.argv[1]
host = ctypes.CDLL(d + "/libnvperf_host.so")
target = ctypes.CDLL(d + "/libnvperf_target.so")
cupti = ctypes.CDLL(d + "/libcupti.so.12")
v, ts = ctypes.c_uint32(), ctypes.c_uint64()
assert cupti.cuptiGetVersion(ctypes.byref(v)) == 0
rc = cupti.cuptiGetTimestamp(ctypes.byref(ts))
print(f"libcupti + libnvperf_host/target loaded; CUPTI API version {v.value}, "
      f"cuptiGetTimestamp rc={rc} ts={ts.value}")
PY
  ptxas="$V/cuda_nvcc/out/bin/ptxas"
  echo "ptxas interpreter: $(readelf -l "$ptxas" | sed -n 's/.*interpreter: \(.*\)]/\1/p')"
  env -u LD_LIBRARY_PATH "$ptxas" --version | tail -1 || status=1
  env -u LD_LIBRARY_PATH "$ptxas" -arch=sm_90 "$W/scale.ptx" -o "$V/scale.cubin" || status=1
  "$W/load" "$V/scale.cubin" || status=1
done
echo "overall: $([ $status = 0 ] && echo OK || echo FAILED)"
exit $status
