#!/usr/bin/env bash
# On the GPU host (CUDA 13.0 in /usr/local/cuda, cuobjdump in its bin/), from the repository
# root with .whl/ carried (python benchmarks/bench_inside.py prepare). Writes $OUT/inventory.json
# (cudasplit's GPU code lists against cuobjdump, file by file, for the whole installed toolkit)
# and $OUT/timing.txt (a libcublas split at -j16, insides read and not). About 5 minutes.
set -euo pipefail
OUT=${OUT:-/tmp/gpu-inside}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD
CUDA=$(readlink -f /usr/local/cuda)
nproc | tee "$OUT/nproc.txt"
"$CUDA/bin/cuobjdump" --version | tail -2 | tee "$OUT/cuobjdump-version.txt"
timeout 200 python3 benchmarks/bench_inside.py toolkit "$CUDA" "$OUT" -j 16 \
    2>&1 | tee "$OUT/toolkit.log" || echo "toolkit check: exit $?" | tee -a "$OUT/toolkit.log"
timeout 240 python3 benchmarks/bench_inside.py time-host "$CUDA" "$OUT" -j 16 --runs 3 \
    2>&1 | tee "$OUT/timing.log"
