"""The ELF writer on real NVIDIA bytes (PyPI wheels, cached by :mod:`tests.support.realwheels`).

Every library that loads before patching (``ctypes.CDLL`` with RTLD_LAZY in a child process)
still loads after the writer set a long RUNPATH (a Nix ``cuda_compat`` path first), and after each
of ``strip --strip-debug``, ``strip --strip-all`` and ``patchelf --shrink-rpath`` on a copy of the
patched file (what a Nix build's fixupPhase and later hooks do). Every executable answers
``--version`` after patching, through a non-default interpreter at a long store-like path, and
after ``strip``. Files are processed two at a time (threads driving child processes); the whole
corpus (~2.4 GB, cuBLAS excluded) takes about a minute on 2 cores.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from cudasplit._elf.patch import apply_edit, set_runpath
from cudasplit._elf.plan import ElfEdit
from cudasplit._elf.read import read_elf_info
from tests.support.realwheels import CU12, wheel_root

HASH = "0123456789abcdfghijklmnpqrsvwxyz"
COMPAT = f"/nix/store/{HASH}-cuda_compat-12.9/compat"
TARGET = f"{COMPAT}:/run/opengl-driver/lib:$ORIGIN"
LOADER = "/lib64/ld-linux-x86-64.so.2"

# (wheel, version, path inside the wheel's nvidia/ dir)
LIBS = [
    ("nvidia-cuda-cupti-cu12", "lib/libcupti.so.12"),
    ("nvidia-cuda-cupti-cu12", "lib/libnvperf_host.so"),
    ("nvidia-cuda-cupti-cu12", "lib/libnvperf_target.so"),
    ("nvidia-cuda-cupti-cu12", "lib/libcheckpoint.so"),
    ("nvidia-cuda-cupti-cu12", "lib/libpcsamplingutil.so"),
    ("nvidia-cuda-nvrtc-cu12", "lib/libnvrtc.so.12"),
    ("nvidia-cuda-nvrtc-cu12", "lib/libnvrtc-builtins.so.12.9"),
    ("nvidia-cuda-runtime-cu12", "lib/libcudart.so.12"),
    ("nvidia-nvjitlink-cu12", "lib/libnvJitLink.so.12"),
    ("nvidia-curand-cu12", "lib/libcurand.so.10"),
    ("nvidia-cufft-cu12", "lib/libcufft.so.11"),
    ("nvidia-cufft-cu12", "lib/libcufftw.so.11"),
    ("nvidia-cusparse-cu12", "lib/libcusparse.so.12"),
    ("nvidia-cusolver-cu12", "lib/libcusolver.so.11"),
    ("nvidia-nccl-cu12", "lib/libnccl.so.2"),
    ("nvidia-cuda-nvcc-cu12", "nvvm/lib64/libnvvm.so"),
]
EXES = [
    ("nvidia-cuda-nvcc-cu12", "bin/ptxas"),
    ("nvidia-cuda-nvcc==13.0.88", "bin/nvcc"),
    ("nvidia-cuda-nvcc==13.0.88", "bin/ptxas"),
    ("nvidia-cuda-nvcc==13.0.88", "bin/nvlink"),
    ("nvidia-cuda-nvcc==13.0.88", "bin/fatbinary"),
]

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or os.uname().machine !=
                                "x86_64", reason="NVIDIA's x86_64 wheels")


def _locate(wheel: str, rel: str) -> Path:
    name, _, version = wheel.partition("==")
    root = wheel_root(name, version or CU12[name]) / "nvidia"
    hits = sorted(root.glob(f"*/{rel}"))
    if not hits:
        pytest.skip(f"{rel} not in {wheel}")
    return hits[0]


def _run(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False,
                          env=env)


def _library_path() -> str:
    """Every corpus library directory (cusolver needs cublas, cusparse needs nvJitLink, ...)."""
    dirs = {str(_locate(w, rel).parent) for w, rel in LIBS}
    dirs.add(str(_locate("nvidia-cublas-cu12", "lib/libcublas.so.12").parent))
    return ":".join(sorted(dirs))


def _loads(path: Path) -> str:
    """'ok', or why ctypes.CDLL (RTLD_LAZY) fails in a child process."""
    code = f"import ctypes, os; ctypes.CDLL({str(path)!r}, mode=os.RTLD_LAZY); print('ok')"
    done = _run(sys.executable, "-c", code, env={"LD_LIBRARY_PATH": _LIBRARY_PATH[0],
                                                 "PATH": "/usr/bin:/bin"})
    return "ok" if done.stdout.strip() == "ok" else \
        f"exit {done.returncode}: {(done.stderr.strip().splitlines() or [''])[-1][:200]}"


_LIBRARY_PATH = [""]


def _variants(patched: Path, work: Path) -> dict[str, Path]:
    """strip --strip-debug / --strip-all (written beside) and patchelf --shrink-rpath (a copy)."""
    out = {"patched": patched}
    for mode in ("--strip-debug", "--strip-all"):
        dst = work / f"{patched.name}{mode}"
        done = _run("strip", mode, "-o", str(dst), str(patched))
        assert done.returncode == 0 and "adjusted" not in done.stderr, done.stderr
        out[mode.lstrip("-")] = dst
    if shutil.which("patchelf"):
        dst = work / f"{patched.name}.shrink"
        shutil.copy2(patched, dst)
        done = _run("patchelf", "--shrink-rpath", str(dst))
        assert done.returncode == 0, done.stderr
        out["shrink-rpath"] = dst
    return out


def _check_library(src: Path, work: Path) -> dict[str, str]:
    work.mkdir(parents=True)
    if _loads(src) != "ok":
        return {"original": f"does not load (not tested): {_loads(src)}"}
    for sibling in src.parent.iterdir():  # $ORIGIN finds the same neighbours as the original
        if sibling.name != src.name:
            (work / sibling.name).symlink_to(sibling)
    patched = work / src.name
    shutil.copyfile(src, patched)
    method = set_runpath(patched, TARGET).method
    info = read_elf_info(patched)
    assert info is not None and info.runpath == TARGET
    # a second patch of a patched file goes in place (the spare bytes)
    again = set_runpath(patched, TARGET + ":/run/second")
    results = {"method": method, "second": again.method}
    for name, path in _variants(patched, work).items():
        results[name] = _loads(path)
        if path != patched:
            path.unlink()
    patched.unlink()
    return results


def _run_version(exe: Path, env: dict[str, str]) -> str:
    done = _run(str(exe), "--version", env=env)
    text = done.stdout + done.stderr
    return "ok" if done.returncode == 0 and "NVIDIA" in text else \
        f"exit {done.returncode}: {text.strip()[-200:]}"


def _check_exe(src: Path, work: Path, loader: Path) -> dict[str, str]:
    work.mkdir(parents=True)
    env = {"PATH": "/usr/bin:/bin"}
    if _run_version(src, env) != "ok":
        return {"original": "does not run (not tested)"}
    patched = work / src.name
    shutil.copy2(src, patched)
    res = apply_edit(patched, ElfEdit(runpath=f"{TARGET}:$ORIGIN/../lib"))
    results = {"method": res.method, "patched": _run_version(patched, env)}
    res = apply_edit(patched, ElfEdit(interpreter=str(loader)))
    assert read_elf_info(patched).interp == str(loader)  # type: ignore[union-attr]
    results["interp-method"] = res.method
    results["interpreter"] = _run_version(patched, env)
    for mode in ("--strip-debug", "--strip-all"):
        dst = work / f"{src.name}{mode}"
        done = _run("strip", mode, "-o", str(dst), str(patched))
        assert done.returncode == 0 and "adjusted" not in done.stderr, done.stderr
        results[mode.lstrip("-")] = _run_version(dst, env)
        dst.unlink()
    patched.unlink()
    return results


@pytest.fixture(scope="module")
def library_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    if shutil.which("strip") is None:
        pytest.skip("binutils strip not installed")
    files = [(f"{w}:{rel}", _locate(w, rel)) for w, rel in LIBS]
    _LIBRARY_PATH[0] = _library_path()
    root = tmp_path_factory.mktemp("real-libs")
    jobs = [(src, root / str(i)) for i, (_, src) in enumerate(files)]
    with ThreadPoolExecutor(max_workers=2) as pool:  # child processes do the work
        results = list(pool.map(lambda job: _check_library(*job), jobs))
    return dict(zip([k for k, _ in files], results, strict=True))


@pytest.fixture(scope="module")
def exe_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    if shutil.which("strip") is None or not os.path.exists(LOADER):
        pytest.skip("binutils strip or the x86_64 glibc loader missing")
    files = [(f"{w}:{rel}", _locate(w, rel)) for w, rel in EXES]
    root = tmp_path_factory.mktemp("real-exes")
    loader = root / "nix/store" / f"{HASH}-glibc-2.40" / "lib/ld-linux-x86-64.so.2"
    loader.parent.mkdir(parents=True)
    shutil.copy2(os.path.realpath(LOADER), loader)
    # One at a time: a child forked by another thread while a copy is open for writing would
    # hold its descriptor until exec, and running that copy fails with ETXTBSY.
    return {key: _check_exe(src, root / str(i), loader) for i, (key, src) in enumerate(files)}


@pytest.mark.parametrize("key", [f"{w}:{rel}" for w, rel in LIBS])
def test_real_library_loads_after_patch_and_strip(
    library_results: dict[str, dict[str, str]], key: str,
) -> None:
    res = library_results[key]
    if "original" in res:
        pytest.skip(f"{key}: {res['original']}")
    assert res["method"] in ("in-place", "append"), res
    assert res["second"] == "in-place", res
    failed = {k: v for k, v in res.items() if k not in ("method", "second") and v != "ok"}
    assert not failed, failed


@pytest.mark.parametrize("key", [f"{w}:{rel}" for w, rel in EXES])
def test_real_executable_runs_after_patch_interpreter_and_strip(
    exe_results: dict[str, dict[str, str]], key: str,
) -> None:
    res = exe_results[key]
    if "original" in res:
        pytest.skip(f"{key}: {res['original']}")
    assert res["method"] in ("in-place", "append") and res["interp-method"] in ("in-place",
                                                                                "append"), res
    failed = {k: v for k, v in res.items() if not k.endswith("method") and v != "ok"}
    assert not failed, failed


def test_cupti_takes_the_append_tier_and_keeps_its_table(
    library_results: dict[str, dict[str, str]],
) -> None:
    """The two files of issue 11 go through the append tier (not LIEF)."""
    for key in ("nvidia-cuda-cupti-cu12:lib/libcupti.so.12",
                "nvidia-cuda-cupti-cu12:lib/libnvperf_host.so"):
        assert library_results[key]["method"] == "append"


def test_issue_11_cupti_split_then_strip(tmp_path: Path) -> None:
    """Issue 11 as reported: split cupti 12.8.90 with a long --cuda-compat path, then strip
    every library of the output the way Nix's fixupPhase does; each still loads."""
    from cudasplit import RunpathPolicy, SplitOptions, split_to_dir

    if shutil.which("strip") is None:
        pytest.skip("binutils strip not installed")
    lib = _locate("nvidia-cuda-cupti-cu12", "lib/libcupti.so.12").parent
    top = tmp_path / "cuda_cupti-linux-x86_64-12.8.90-archive"
    (top / "lib").mkdir(parents=True)
    for name in ("libcupti.so.12", "libnvperf_host.so", "libnvperf_target.so"):
        shutil.copy2(lib / name, top / "lib" / name)  # never a link into the shared cache
    report = split_to_dir(top, tmp_path / "o",
                          SplitOptions(runpath=RunpathPolicy(cuda_compat=COMPAT)))
    placed = sorted((tmp_path / "o").rglob("*.so*"))
    assert {p.name for p in placed} >= {"libcupti.so.12", "libnvperf_host.so"}
    methods = {m.path: m.patch for m in report.members if m.patch}
    assert "lief" not in methods.values(), methods
    for path in placed:
        info = read_elf_info(path)
        assert info is not None and info.runpath is not None and \
            info.runpath.startswith(COMPAT), (path, info)
        done = _run("strip", "--strip-debug", str(path))
        assert done.returncode == 0 and "adjusted" not in done.stderr, done.stderr
        assert _loads(path) == "ok", path
