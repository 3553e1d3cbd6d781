#!/usr/bin/env bash
# Issue 40's table on the 16-core GPU host (CUDA 13.0 toolkit at /usr/local/cuda): every row of
# benchmarks/bench_scaling.py, in calls of under 10 minutes each. Run from the repository root,
# with .whl/ carried (built here by `bash benchmarks/gpu_scaling.sh wheels`: the cudasplit wheel,
# its dependencies' wheels for CPython 3.12, py-spy, and Debian's zstd binary in .whl/bin: the
# host has none, and tar -I zstd needs it as much as cudasplit does; LIEF is left out, no split
# here needs it; `wheels OLDTREE` adds the wheel of another checkout as .whl/old/ for `toolkit`).
#
#   bash benchmarks/gpu_scaling.sh choices  # each choice of the data path and the profile, N = 1, 16
#   bash benchmarks/gpu_scaling.sh 1        # multi-block xz N = 1..16, single-block xz, zstd
#   bash benchmarks/gpu_scaling.sh 2        # start-up, batch, choices, profile; then every
#                                           # table of both calls, merged ($OUT/scaling.md)
#   bash benchmarks/gpu_scaling.sh toolkit  # the whole installed toolkit split by .whl/old and by
#                                           # this tree: every output byte and link equal
#
# Payload: the host's own libcublas* (targets/x86_64-linux/lib, 1.5 GB tar), as in benchmarks §12.
# The tarballs are cached in .bench-cache/scaling (kept while the machine stays warm; a fresh
# machine builds them again, about a minute). Each call writes its samples to
# $OUT/scaling-<call>.json (and .bench-cache/scaling/); DEADLINE=SECONDS (default 480) ends a
# call's rounds earlier; CUDA_LIB, GLOB, SINGLE_GLOB and REPEAT change the payload and rounds
# (a quick try elsewhere). Merge them anywhere with
#   python benchmarks/bench_scaling.py --report scaling-1.json scaling-2.json
set -euo pipefail
part=${1:?"usage: gpu_scaling.sh wheels [OLDTREE]|choices|1|2|toolkit"}
cd "$(dirname "$0")/.."

if [ "$part" = wheels ]; then  # here, not on the GPU host
  rm -rf .whl && mkdir -p .whl/bin
  python3 -m pip wheel -q --no-deps -w .whl .
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
      --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
      --platform manylinux2014_x86_64 --platform manylinux_2_5_x86_64 \
      --platform manylinux1_x86_64 -d .whl zstandard==0.25.0 pyelftools==0.33 click==8.1.8 \
      py-spy==0.4.3
  work=$(mktemp -d)
  (cd "$work" && apt-get download -q zstd liblz4-1 >/dev/null 2>&1 \
      && for deb in *.deb; do dpkg -x "$deb" x; done)
  cp "$work/x/usr/bin/zstd" .whl/bin/ && cp -L "$work"/x/usr/lib/*/liblz4.so.1 .whl/bin/
  rm -rf "$work"
  if [ -n "${2:-}" ]; then mkdir -p .whl/old && python3 -m pip wheel -q --no-deps -w .whl/old "$2"; fi
  ls -la .whl .whl/bin
  exit 0
fi

SITE=/tmp/cudasplit-site
if [ ! -f "$SITE/cudasplit/__init__.py" ]; then
  # Compiled as pip does by default: start-up is measured as an installed wheel starts.
  python3 -m pip install -q --no-index --no-deps --target "$SITE" .whl/*.whl
fi
export PYTHONPATH=$SITE PATH="$SITE/bin:$PWD/.whl/bin:$PATH" LD_LIBRARY_PATH="$PWD/.whl/bin"
unset PYTHONDONTWRITEBYTECODE
L=${CUDA_LIB:-/usr/local/cuda/targets/x86_64-linux/lib}
C=$PWD/.bench-cache/scaling
OUT=${OUT:-/tmp}
mkdir -p "$C" "$OUT"
# A round that would end after the deadline is left out: each call stays within its limit.
B=(python3 benchmarks/bench_scaling.py --from-dir "$L" --cache "$C" --repeat "${REPEAT:-3}"
   --deadline "${DEADLINE:-480}" --glob "${GLOB:-libcublas*}"
   --single-glob "${SINGLE_GLOB:-libcublas[._]*}" --single-preset 3)
nproc; uptime; uname -a; head -c 300 /proc/version; echo
python3 -c 'import cudasplit, sys; print(cudasplit.__file__, sys.version)'
zstd --version; xz --version | head -1; py-spy --version

case $part in
  choices)
    "${B[@]}" --only choices --only profile --jobs 1,16 --json "$C/scaling-choices.json" \
        --markdown "$OUT/choices.md"
    cp "$C/scaling-choices.json" "$OUT/"
    ;;
  1)
    "${B[@]}" --only xz-multi --only xz-single --only zstd --jobs 1,2,4,8,16 \
        --json "$C/scaling-1.json"
    cp "$C/scaling-1.json" "$OUT/"
    ;;
  2)
    "${B[@]}" --only startup --only batch --only choices --only profile --only decode \
        --jobs 1,16 --json "$C/scaling-2.json"
    cp "$C/scaling-2.json" "$OUT/"
    merge=("$C/scaling-2.json")
    [ -f "$C/scaling-1.json" ] && merge=("$C/scaling-1.json" "${merge[@]}")
    python3 benchmarks/bench_scaling.py --report "${merge[@]}" --markdown "$OUT/scaling.md"
    ;;
  toolkit)
    OLD=/tmp/cudasplit-old
    [ -f "$OLD/cudasplit/__init__.py" ] || python3 -m pip install -q --no-index --no-deps \
        --target "$OLD" .whl/old/*.whl .whl/zstandard-*.whl .whl/pyelftools-*.whl \
        .whl/click-*.whl
    T=/tmp/toolkit-tree
    V=$(basename "$(readlink -f /usr/local/cuda)" | sed 's/cuda-//')
    if [ ! -d "$T" ]; then
      mkdir -p "$T/cuda_toolkit-linux-x86_64-$V-archive"
      cp -a /usr/local/cuda/. "$T/cuda_toolkit-linux-x86_64-$V-archive/"
    fi
    # Both into the same directory, one after the other: RUNPATHs name the output roots. -P:
    # the checkout's own cudasplit/ (the current directory) must not shadow the old wheel.
    for site in "$OLD" "$SITE"; do PYTHONPATH=$site python3 -P -c \
        'import cudasplit, sys; print(cudasplit.__file__, cudasplit.__version__)'; done
    for which in old new; do
      site=$SITE; [ $which = old ] && site=$OLD
      rm -rf /tmp/tk-out
      /usr/bin/time -f "$which: %e s wall, %U s user, %S s system, %M KB" \
        env PYTHONPATH=$site python3 -P -m cudasplit split "$T/cuda_toolkit-linux-x86_64-$V-archive" \
          -o /tmp/tk-out -q -j16 --no-fsync --report "/tmp/tk-$which.json" || true
      python3 - /tmp/tk-out "/tmp/tk-$which.tree.json" <<'PY'
import hashlib, json, os, sys
out = {}
for base, dirs, files in os.walk(sys.argv[1]):
    for name in dirs + files:
        path = os.path.join(base, name)
        rel = os.path.relpath(path, sys.argv[1])
        if os.path.islink(path):
            out[rel] = "-> " + os.readlink(path)
        elif os.path.isfile(path):
            digest = hashlib.sha256()
            with open(path, "rb") as fh:
                while chunk := fh.read(1 << 22):
                    digest.update(chunk)
            out[rel] = f"{os.stat(path).st_mode & 0o777:o} {digest.hexdigest()}"
json.dump(out, open(sys.argv[2], "w"))
PY
    done
    python3 - <<'PY' | tee "$OUT/toolkit-equal.txt"
import json, sys
old, new = (json.load(open(f"/tmp/tk-{w}.tree.json")) for w in ("old", "new"))
diff = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
print(f"files and links: old {len(old)}, new {len(new)}, different {len(diff)}")
for key in diff[:20]:
    print("  ", key, old.get(key), new.get(key))
def members(path):
    return {m["path"]: m for m in json.load(open(path))["members"]}
a, b = members("/tmp/tk-old.json"), members("/tmp/tk-new.json")
report_diff = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
print(f"report members: old {len(a)}, new {len(b)}, different {len(report_diff)}")
for key in report_diff[:10]:
    x, y = a.get(key, {}), b.get(key, {})
    print("  ", key, {k: (x.get(k), y.get(k)) for k in set(x) | set(y) if x.get(k) != y.get(k)})
sys.exit(1 if diff or report_diff else 0)
PY
    ;;
  *) echo "usage: gpu_scaling.sh wheels [OLDTREE]|choices|1|2|toolkit" >&2; exit 2 ;;
esac
