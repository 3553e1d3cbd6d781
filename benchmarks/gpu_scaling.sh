#!/usr/bin/env bash
# Issue 34's table on the 16-core GPU host (CUDA 13.0 toolkit at /usr/local/cuda): every row of
# benchmarks/bench_scaling.py, in two calls of under 9 minutes each. Run from the repository
# root, with .whl/ carried (built here by `bash benchmarks/gpu_scaling.sh wheels`: the cudasplit
# wheel and its dependencies' wheels for CPython 3.12; LIEF is left out, no split here needs it).
#
#   bash benchmarks/gpu_scaling.sh 1   # multi-block xz: split -jN vs tar -I 'xz -TN', N = 1..16
#   bash benchmarks/gpu_scaling.sh 2   # start-up, single-block xz, zstd, batch, decoders alone;
#                                      # then the tables of both calls, merged
#
# Payload: the host's own libcublas* (targets/x86_64-linux/lib, 1.5 GB tar), as in benchmarks §12.
# The tarballs are cached in .bench-cache/scaling (kept while the machine stays warm; a fresh
# machine builds them again, about a minute each call). Each call writes its samples to
# $OUT/scaling-<call>.json (and .bench-cache/scaling/); DEADLINE=SECONDS (default 480) ends a
# call's rounds earlier. Merge them anywhere with
#   python benchmarks/bench_scaling.py --report scaling-1.json scaling-2.json
set -euo pipefail
part=${1:?"usage: gpu_scaling.sh wheels|1|2"}
cd "$(dirname "$0")/.."

if [ "$part" = wheels ]; then  # here, not on the GPU host
  rm -rf .whl && mkdir .whl
  python3 -m pip wheel -q --no-deps -w .whl .
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
      --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
      --platform manylinux2014_x86_64 -d .whl zstandard==0.25.0 pyelftools==0.33 click==8.1.8
  ls -la .whl
  exit 0
fi

SITE=/tmp/cudasplit-site
if [ ! -f "$SITE/cudasplit/__init__.py" ]; then
  # Compiled as pip does by default: start-up is measured as an installed wheel starts.
  python3 -m pip install -q --no-index --no-deps --target "$SITE" .whl/*.whl
fi
export PYTHONPATH=$SITE
unset PYTHONDONTWRITEBYTECODE
L=/usr/local/cuda/targets/x86_64-linux/lib
C=$PWD/.bench-cache/scaling
OUT=${OUT:-/tmp}
mkdir -p "$C" "$OUT"
# A round that would end after 8 minutes is left out: each call stays within its limit.
B=(python3 benchmarks/bench_scaling.py --from-dir "$L" --cache "$C" --repeat 3 --deadline "${DEADLINE:-480}")
nproc; uptime; python3 -c 'import cudasplit, sys; print(cudasplit.__file__, sys.version)'

case $part in
  1)
    "${B[@]}" --only xz-multi --jobs 1,2,4,8,16 --json "$C/scaling-1.json"
    cp "$C/scaling-1.json" "$OUT/"
    ;;
  2)
    "${B[@]}" --only startup --only xz-single --only zstd --only batch --only decode \
        --jobs 1,16 --single-glob 'libcublas[._]*' --single-preset 3 \
        --json "$C/scaling-2.json"
    cp "$C/scaling-2.json" "$OUT/"
    merge=("$C/scaling-2.json")
    [ -f "$C/scaling-1.json" ] && merge=("$C/scaling-1.json" "${merge[@]}")
    python3 benchmarks/bench_scaling.py --report "${merge[@]}" --markdown "$OUT/scaling.md"
    ;;
  *) echo "usage: gpu_scaling.sh wheels|1|2" >&2; exit 2 ;;
esac
