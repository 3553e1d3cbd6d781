"""The tiered RUNPATH writer on files compiled here, loaded afterwards by the real loader."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cudasplit._elf.patch.patcher as patch_mod
from cudasplit._elf.patch import SPARE_BYTES, apply_edit, backend_for, set_runpath
from cudasplit._elf.plan import ElfEdit
from cudasplit._elf.read import read_elf_info
from cudasplit.errors import CudasplitError, ElfError, PatchError, UnknownPatcherError
from tests.support import nvlayout

NIX = "/nix/store/" + "0123456789abcdfghijklmnpqrsvwxyz" + "-cuda_compat-12.9/compat"
TARGET = f"{NIX}:/run/opengl-driver/lib:$ORIGIN"

B_C = "char *getenv(const char *);\nint b_value(void){ return getenv(\"NOPE_X\") ? 3 : 2; }\n"
A_C = "int b_value(void);\nint a_value(void){ return 40 + b_value(); }\n"
M_C = ('#include <stdio.h>\nint a_value(void);\n'
       'int main(void){ printf("answer=%d\\n", a_value()); return a_value() == 42 ? 0 : 1; }\n')
FIXTURE_OK = [HealthCheck.function_scoped_fixture]


def _run(*cmd: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)


def _cc(cc: str, out: Path, src: str, *flags: str) -> Path | None:
    """Compile, or None when the compiler is absent / cannot link for this target."""
    if shutil.which(cc) is None:
        return None
    c = out.parent / (out.name + ".c")
    c.write_text(src)
    done = _run(cc, str(c), "-o", str(out), *flags)
    return out if done.returncode == 0 else None


def _build_set(d: Path, strip: bool, **extra: list[str]) -> dict[str, Path]:
    """lib/libb.so, lib/liba.so (needs libb), bin/m (PIE), bin/mnp (non-PIE), all x86_64."""
    (d / "lib").mkdir(parents=True)
    (d / "bin").mkdir()
    lib, out = d / "lib", {}
    out["libb"] = _cc("gcc", lib / "libb.so", B_C, "-shared", "-fPIC", *extra.get("libb", []))
    out["liba"] = _cc("gcc", lib / "liba.so", A_C, "-shared", "-fPIC", f"-L{lib}", "-lb",
                      *extra.get("liba", []))
    for name, pie in (("m", ["-pie", "-fPIE"]), ("mnp", ["-no-pie"])):
        out[name] = _cc("gcc", d / "bin" / name, M_C, *pie, f"-L{lib}", "-la", "-lb",
                        f"-Wl,-rpath-link,{lib}", *extra.get(name, []))
    if any(p is None for p in out.values()):
        raise RuntimeError(f"gcc cannot build the x86_64 fixtures in {d}")
    if strip:
        for path in out.values():
            assert path is not None
            _run("strip", str(path))
    return {k: v for k, v in out.items() if v is not None}


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Path]]:
    root = tmp_path_factory.mktemp("built")
    return {
        "none": _build_set(root / "none", strip=False),
        "none-stripped": _build_set(root / "none-stripped", strip=True),
        "runpath": _build_set(root / "runpath", False, liba=["-Wl,-rpath,$ORIGIN"],
                              m=["-Wl,-rpath,$ORIGIN/../lib"]),
        "rpath": _build_set(root / "rpath", False, liba=["-Wl,--disable-new-dtags,-rpath,$ORIGIN"],
                            mnp=["-Wl,--disable-new-dtags,-rpath,$ORIGIN"]),
        "empty-entry": _build_set(root / "empty", True, liba=["-Wl,-rpath,$ORIGIN:"]),
        "stubs": _build_set(root / "stubs", False,
                            liba=["-Wl,-rpath,/nix/store/x-cuda_cudart/lib/stubs:$ORIGIN"]),
    }


@pytest.fixture(scope="session")
def cross(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path | None]:
    d = tmp_path_factory.mktemp("cross")
    lib = ["-shared", "-fPIC"]
    return {
        "aarch64": _cc("aarch64-linux-gnu-gcc", d / "a64.so", A_C, *lib, "-Wl,-rpath,$ORIGIN"),
        "aarch64-64k": _cc("aarch64-linux-gnu-gcc", d / "a64k.so", A_C, *lib,
                           "-Wl,-z,max-page-size=0x10000"),
        "aarch64-exe": _cc("aarch64-linux-gnu-gcc", d / "a64exe", M_C, "-Wl,--unresolved-symbols"
                           "=ignore-all"),
        "ppc64le": _cc("powerpc64le-linux-gnu-gcc", d / "p64.so", A_C, *lib),
        "ppc64le-exe": _cc("powerpc64le-linux-gnu-gcc", d / "p64exe", M_C, "-no-pie",
                           "-Wl,--unresolved-symbols=ignore-all"),
        "ppc64be": _cc("powerpc64le-linux-gnu-gcc", d / "p64be.so", A_C, *lib, "-mbig-endian",
                       "-nostdlib"),
        "i386": _cc("gcc", d / "i386.so", A_C, *lib, "-m32", "-nostdlib", "-Wl,-rpath,$ORIGIN"),
        "i386-bare": _cc("gcc", d / "i386b.so", A_C, *lib, "-m32", "-nostdlib"),
    }


def _copy_set(src: dict[str, Path], dst: Path) -> dict[str, Path]:
    shutil.copytree(next(iter(src.values())).parent.parent, dst)
    return {k: dst / v.parent.name / v.name for k, v in src.items()}


def _need(cross: dict[str, Path | None], key: str, tmp: Path) -> Path:
    path = cross[key]
    if path is None:
        pytest.skip(f"no cross compiler/sysroot for {key} (apt-get install gcc-aarch64-linux-gnu "
                    "gcc-powerpc64le-linux-gnu; gcc -m32 for i386)")
    return Path(shutil.copy(path, tmp / path.name))


def _search_path(out: str, owner: Path) -> list[str]:
    """The loader's `search path=` entries for RUNPATH/RPATH of `owner`, subdirs dropped.

    glibc also searches CPU-dependent subdirectories of each entry (``glibc-hwcaps/x86-64-v3``,
    ``tls``, ``haswell/avx512_1``, ``x86_64``, ...), which differ from one CPU to the next: keep
    only entries that are not below another entry of the same list.
    """
    for line in out.splitlines():
        if "search path=" in line and line.rstrip().endswith(f"/{owner.name})"):
            entries = line.split("search path=", 1)[1].split("\t", 1)[0].split(":")
            return _collapse_subdirs(entries)
    raise AssertionError(f"no search path for {owner} in loader output:\n{out[-2000:]}")


def _collapse_subdirs(entries: list[str]) -> list[str]:
    kept: list[str] = []
    for entry in entries:
        below = any(_is_subdir(entry, other) for other in entries if other != entry)
        if not below and entry not in kept:
            kept.append(entry)
    return kept


def _is_subdir(entry: str, other: str) -> bool:
    prefix = other.rstrip("/") + "/"
    return entry.startswith(prefix) and ".." not in entry[len(prefix):].split("/")


def test_collapse_subdirs_drops_any_cpu_specific_subdir() -> None:
    entries = ["/a/glibc-hwcaps/x86-64-v4", "/a/tls/haswell/avx512_1/x86_64", "/a/haswell/avx512_1",
               "/a/x86_64", "/a", "/b/tls", "/b", "/b/../c"]
    assert _collapse_subdirs(entries) == ["/a", "/b", "/b/../c"]


def _load(files: dict[str, Path], exe: str) -> str:
    info = read_elf_info(files[exe])
    if info is not None and info.runpath is None and info.rpath is None:
        set_runpath(files[exe], "$ORIGIN/../lib")  # the executable must find lib/liba.so
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    env["LD_DEBUG"] = "libs"
    done = subprocess.run([str(files[exe])], env=env, capture_output=True, text=True)
    assert done.returncode == 0 and "answer=42" in done.stdout, done.stderr[-3000:]
    return done.stderr


def _elflint(path: Path) -> str:
    if shutil.which("eu-elflint") is None:
        return ""
    return _run("eu-elflint", "--gnu-ld", str(path)).stdout


def _readelf_clean(path: Path) -> None:
    for flag in ("-lW", "-dW", "-SW"):
        done = _run("readelf", flag, str(path))
        assert done.returncode == 0 and not done.stderr, done.stderr


# --------------------------------------------------------------------------- loading

@pytest.mark.parametrize("variant", ["none", "none-stripped", "runpath", "rpath", "empty-entry",
                                     "stubs"])
@pytest.mark.parametrize("exe", ["m", "mnp"])
def test_patched_files_load_with_planned_search_path(
    built: dict[str, dict[str, Path]], tmp_path: Path, variant: str, exe: str
) -> None:
    files = _copy_set(built[variant], tmp_path / "t")
    lint_before = {k: _elflint(p) for k, p in files.items()}
    res_a = set_runpath(files["liba"], TARGET)
    res_x = set_runpath(files[exe], "$ORIGIN/../lib:$ORIGIN")
    assert res_a.method in ("in-place", "append") and res_x.method in ("in-place", "append")
    out = _load(files, exe)
    lib = str(tmp_path / "t" / "bin" / ".." / "lib")  # $ORIGIN of liba as the loader found it
    assert _search_path(out, files["liba"]) == [NIX, "/run/opengl-driver/lib", lib]
    assert _search_path(out, files[exe]) == [lib, str(tmp_path / "t" / "bin")]
    for key in ("liba", exe):
        _readelf_clean(files[key])
        assert _elflint(files[key]) == lint_before[key]
    # Nix strips after patching: the result must survive binutils.
    for key in ("liba", exe):
        assert _run("strip", str(files[key])).returncode == 0
    _load(files, exe)


def test_library_loads_through_ctypes(built: dict[str, dict[str, Path]], tmp_path: Path) -> None:
    files = _copy_set(built["rpath"], tmp_path / "t")
    assert set_runpath(files["liba"], TARGET).before_tag == "RPATH"
    code = f"import ctypes; print(ctypes.CDLL({str(files['liba'])!r}).a_value())"
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"} | {"LD_DEBUG": "libs"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.stdout.strip() == "42", done.stderr[-2000:]
    assert _search_path(done.stderr, files["liba"])[:2] == [NIX, "/run/opengl-driver/lib"]


# --------------------------------------------------------------------------- semantics

def test_second_patch_goes_in_place(built: dict[str, dict[str, Path]], tmp_path: Path) -> None:
    files = _copy_set(built["none"], tmp_path / "t")
    first = set_runpath(files["liba"], TARGET)
    size = files["liba"].stat().st_size
    longer = TARGET + ":" + "/x" * (SPARE_BYTES // 2 - 1)
    second = set_runpath(files["liba"], longer)
    assert (first.method, second.method) == ("append", "in-place")
    assert second.before == TARGET and files["liba"].stat().st_size == size
    assert read_elf_info(files["liba"]).runpath == longer  # type: ignore[union-attr]
    set_runpath(files["m"], "$ORIGIN/../lib")
    _load(files, "m")


def test_unchanged_does_not_touch_the_file(built: dict[str, dict[str, Path]], tmp_path: Path,
                                           ) -> None:
    files = _copy_set(built["runpath"], tmp_path / "t")
    before = files["liba"].read_bytes()
    res = set_runpath(files["liba"], "$ORIGIN")
    assert res.method == "unchanged" and files["liba"].read_bytes() == before


def test_rpath_is_converted_and_back(built: dict[str, dict[str, Path]], tmp_path: Path) -> None:
    files = _copy_set(built["rpath"], tmp_path / "t")
    res = set_runpath(files["liba"], "$ORIGIN")  # same string, other tag: rewrite the tag only
    info = read_elf_info(files["liba"])
    assert res.method == "in-place" and res.before_tag == "RPATH"
    assert info is not None and (info.runpath, info.rpath) == ("$ORIGIN", None)
    set_runpath(files["liba"], TARGET, tag="RPATH")
    info = read_elf_info(files["liba"])
    assert info is not None and (info.runpath, info.rpath) == (None, TARGET)
    _load(files, "m")


def test_shorter_value_in_place_clears_old_tail(built: dict[str, dict[str, Path]],
                                                tmp_path: Path) -> None:
    files = _copy_set(built["stubs"], tmp_path / "t")
    res = set_runpath(files["liba"], "$ORIGIN")
    assert res.method == "in-place"
    assert read_elf_info(files["liba"]).runpath == "$ORIGIN"  # type: ignore[union-attr]
    _load(files, "m")


def test_shared_string_tail_is_not_overwritten(tmp_path: Path) -> None:
    """GNU ld merges string tails: RUNPATH "/opt/libb.so" may also serve NEEDED "libb.so"."""
    files = _build_set(tmp_path / "t", False, liba=["-Wl,-rpath,/opt/libb.so"])
    info = read_elf_info(files["liba"])
    assert info is not None
    set_runpath(files["liba"], "$ORIGIN", patcher="native")
    after = read_elf_info(files["liba"])
    assert after is not None and after.needed == info.needed and after.runpath == "$ORIGIN"
    _load(files, "m")


def test_symbol_name_tail_is_not_overwritten(tmp_path: Path) -> None:
    files = _build_set(tmp_path / "t", False, liba=["-Wl,-rpath,/opt/xb_value"])
    res = set_runpath(files["liba"], "$ORIGIN", patcher="native")
    assert res.method == "append"  # "b_value" lives in the old string's tail
    _load(files, "m")


def test_lief_tier(built: dict[str, dict[str, Path]], tmp_path: Path,
                   monkeypatch: pytest.MonkeyPatch) -> None:
    """LIEF's output of this gcc library loses .bss from the RW PT_LOAD under strip (issue 23):
    refused, file untouched; with the strip probe off, the tier itself works."""
    files = _copy_set(built["runpath"], tmp_path / "t")
    before = files["liba"].read_bytes()
    with pytest.raises(PatchError, match=r"LIEF output breaks under strip --strip-debug"):
        set_runpath(files["liba"], TARGET, patcher="lief")
    assert files["liba"].read_bytes() == before
    monkeypatch.setattr(patch_mod, "verify_after_strip", lambda path, expect: None)
    mode = files["liba"].stat().st_mode
    res = set_runpath(files["liba"], TARGET, patcher="lief")
    assert res.method == "lief" and files["liba"].stat().st_mode == mode
    assert read_elf_info(files["liba"]).runpath == TARGET  # type: ignore[union-attr]
    _load(files, "m")


def test_not_elf_and_static(tmp_path: Path) -> None:
    text = tmp_path / "x.txt"
    text.write_text("hello")
    with pytest.raises(ElfError, match="not an ELF"):
        set_runpath(text, "$ORIGIN")
    obj = _cc("gcc", tmp_path / "x.o", B_C, "-c")
    assert obj is not None
    with pytest.raises(PatchError, match="no dynamic section"):
        set_runpath(obj, "$ORIGIN")
    with pytest.raises(ValueError):
        set_runpath(obj, "a\0b")


@pytest.mark.parametrize("stage", ["in-place", "append"])
def test_failed_verification_restores_bytes(
    built: dict[str, dict[str, Path]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stage: str
) -> None:
    files = _copy_set(built["stubs" if stage == "in-place" else "none"], tmp_path / "t")
    before = files["liba"].read_bytes()

    def broken(path: str, expect: object) -> None:
        raise PatchError(f"{path}: simulated verification failure")

    monkeypatch.setattr(patch_mod, "verify", broken)  # what the in-place tiers call
    with pytest.raises(PatchError, match="simulated"):
        set_runpath(files["liba"], "$ORIGIN" if stage == "in-place" else TARGET, patcher=stage)
    assert files["liba"].read_bytes() == before


def test_threads_on_different_files(built: dict[str, dict[str, Path]], tmp_path: Path) -> None:
    copies = [_copy_set(built["none"], tmp_path / f"t{i}") for i in range(6)]
    values = [f"{TARGET}:/extra/{i}" for i in range(6)]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda cv: set_runpath(cv[0]["liba"], cv[1]), zip(copies, values,
                                                                                   strict=True)))
    assert {r.method for r in results} == {"append"}
    for files, value in zip(copies, values, strict=True):
        assert read_elf_info(files["liba"]).runpath == value  # type: ignore[union-attr]
    set_runpath(copies[0]["m"], "$ORIGIN/../lib")
    _load(copies[0], "m")


# --------------------------------------------------------------------------- other targets

def _new_load_align(path: Path) -> list[str]:
    rows = [ln.split() for ln in _run("readelf", "-lW", str(path)).stdout.splitlines()
            if ln.strip().startswith("LOAD")]
    return [r[-1] for r in rows]


@pytest.mark.parametrize("key", ["aarch64", "aarch64-64k", "aarch64-exe", "ppc64le",
                                 "ppc64le-exe", "ppc64be", "i386"])
def test_cross_targets(cross: dict[str, Path | None], tmp_path: Path, key: str) -> None:
    path = _need(cross, key, tmp_path)
    lint = _elflint(path)
    aligns = set(_new_load_align(path))
    first = set_runpath(path, TARGET)
    assert read_elf_info(path).runpath == TARGET  # type: ignore[union-attr]
    if first.method == "lief":  # executables whose only PT_NOTE holds the build-id
        assert key.endswith("-exe")
        return
    assert set(_new_load_align(path)) == aligns  # the new PT_LOAD keeps the file's p_align
    _readelf_clean(path)
    assert _elflint(path) == lint
    second = set_runpath(path, TARGET + ":/more", patcher="native")
    assert (first.method, second.method) in (("append", "in-place"), ("in-place", "in-place"))
    if key == "aarch64-64k":
        assert aligns == {"0x10000"}


def _drop_spare_dt_nulls(path: Path) -> None:
    """Shrink PT_DYNAMIC of an ELF32 LE file to its used entries (as some linkers emit it)."""
    blob = bytearray(path.read_bytes())
    phoff, = struct.unpack_from("<I", blob, 28)
    phnum, = struct.unpack_from("<H", blob, 44)
    for i in range(phnum):
        at = phoff + 32 * i
        if struct.unpack_from("<I", blob, at)[0] == 2:
            offset, = struct.unpack_from("<I", blob, at + 4)
            used = next(n for n in range(1000)
                        if struct.unpack_from("<i", blob, offset + 8 * n)[0] == 0) + 1
            struct.pack_into("<II", blob, at + 16, 8 * used, 8 * used)
    path.write_bytes(bytes(blob))


def test_no_spare_dt_null_moves_the_dynamic_array(cross: dict[str, Path | None],
                                                  tmp_path: Path) -> None:
    """Without a spare DT_NULL (lld, mold) the append tier moves the dynamic array into the new
    (then writable) segment, as patchelf does; a second edit then goes in place."""
    path = _need(cross, "i386-bare", tmp_path)
    _drop_spare_dt_nulls(path)
    assert set_runpath(path, TARGET, patcher="native").method == "append"
    assert read_elf_info(path).runpath == TARGET  # type: ignore[union-attr]
    assert set_runpath(path, "$ORIGIN", patcher="native").method == "in-place"
    assert read_elf_info(path).runpath == "$ORIGIN"  # type: ignore[union-attr]


# --------------------------------------------------------------------------- properties

_ENTRY = st.one_of(
    st.just("$ORIGIN"), st.just(""), st.just("$ORIGIN/../lib"),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789/._-", max_size=60).map("/{}".format),
)
_VALUES = st.lists(_ENTRY, max_size=12).map(":".join).filter(lambda v: len(v) <= 300)


@settings(max_examples=25, deadline=None, suppress_health_check=FIXTURE_OK)
@given(value=_VALUES, second=_VALUES)
def test_random_values_read_back_and_load(
    built: dict[str, dict[str, Path]], tmp_path_factory: pytest.TempPathFactory, value: str,
    second: str,
) -> None:
    files = _copy_set(built["runpath"], tmp_path_factory.mktemp("h") / "t")
    for v in (value, second):
        set_runpath(files["liba"], f"{v}:$ORIGIN" if v else "$ORIGIN")
        set_runpath(files["mnp"], v)
        assert read_elf_info(files["mnp"]).runpath == v  # type: ignore[union-attr]
    set_runpath(files["mnp"], "$ORIGIN/../lib")
    _load(files, "mnp")


def _damage(blob: bytearray, data: st.DataObject, dyn_off: int) -> bytearray:
    how = data.draw(st.sampled_from(["truncate", "headers", "dynamic"]), label="how")
    if how == "truncate":
        return blob[: data.draw(st.integers(0, len(blob) - 1), label="cut")]
    lo, hi = (0, min(len(blob), 1024)) if how == "headers" else (dyn_off, dyn_off + 256)
    for _ in range(data.draw(st.integers(1, 6), label="flips")):
        blob[data.draw(st.integers(lo, hi - 1), label="pos")] = data.draw(st.integers(0, 255))
    return blob


@settings(max_examples=80, deadline=None, suppress_health_check=FIXTURE_OK)
@given(data=st.data(), patcher=st.sampled_from(["native", "auto"]))
def test_damaged_files_fail_cleanly(
    built: dict[str, dict[str, Path]], tmp_path_factory: pytest.TempPathFactory,
    data: st.DataObject, patcher: str,
) -> None:
    src = built["none"]["liba"]
    dyn_off = _dynamic_offset(src)
    target = tmp_path_factory.mktemp("d") / "damaged.so"
    target.write_bytes(bytes(_damage(bytearray(src.read_bytes()), data, dyn_off)))
    before = target.read_bytes()
    try:
        res = set_runpath(target, TARGET, patcher=patcher)
    except (ElfError, PatchError) as exc:
        assert "\n" not in str(exc) and str(target) in str(exc)
        assert target.read_bytes() == before
    else:
        assert read_elf_info(target).runpath == TARGET  # type: ignore[union-attr]
        assert res.method in ("in-place", "append", "lief")


def _dynamic_offset(path: Path) -> int:
    blob = path.read_bytes()
    phoff, = struct.unpack_from("<Q", blob, 32)
    phnum, = struct.unpack_from("<H", blob, 56)
    for i in range(phnum):
        p_type, _, p_offset = struct.unpack_from("<IIQ", blob, phoff + 56 * i)
        if p_type == 2:
            return int(p_offset)
    raise AssertionError("no PT_DYNAMIC")


def test_patch_result_is_frozen() -> None:
    res = patch_mod.PatchResult("in-place", None, None, "$ORIGIN", "RUNPATH")
    setter: Callable[[], None] = lambda: setattr(res, "method", "x")  # noqa: E731
    with pytest.raises(AttributeError):
        setter()


# --------------------------------------------------------------------------- NVIDIA's layout

GLIBC_LOADER = "/lib64/ld-linux-x86-64.so.2"


@pytest.fixture(scope="session")
def nvlike(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if not nvlayout.have_gcc():
        pytest.skip("gcc/readelf not installed")
    return nvlayout.build_nvlike(tmp_path_factory.mktemp("nvlike"))


def _copy_nvlike(nvlike: dict[str, Path], dst: Path) -> dict[str, Path]:
    dst.mkdir(parents=True)
    return {k: Path(shutil.copy2(v, dst / v.name)) for k, v in nvlike.items()}


def _ctypes_value(lib: Path, func: str = "nv_value") -> str:
    code = (f"import ctypes; lib = ctypes.CDLL({str(lib)!r}); f = getattr(lib, {func!r});"
            f" print(f(0) if {func!r} == 'nv_value' else f())")
    done = _run(sys.executable, "-c", code)
    return done.stdout.strip() or f"failed {done.returncode}: {done.stderr.strip()[-300:]}"


AFTER = {
    "strip-debug": ("strip", "--strip-debug"),
    "strip-all": ("strip", "--strip-all"),
    "objcopy": ("objcopy",),
    "shrink-rpath": ("patchelf", "--shrink-rpath"),
    "set-rpath": ("patchelf", "--set-rpath", "$ORIGIN:/nowhere"),
}


@pytest.mark.parametrize("after", sorted(AFTER))
@pytest.mark.parametrize("key", ["note", "nonote"])
def test_nvidia_layout_survives_strip_and_patchelf(
    nvlike: dict[str, Path], tmp_path: Path, key: str, after: str,
) -> None:
    """The append tier on NVIDIA's layout (one build-id note, or none) and then what a Nix
    build's fixup does: the library still loads and answers (issue 11: cupti, nvperf_host)."""
    files = _copy_nvlike(nvlike, tmp_path / "t")
    lib = files[key]
    assert set_runpath(lib, TARGET).method == "append"
    assert _ctypes_value(lib) == "42"
    tool = AFTER[after]
    if shutil.which(tool[0]) is None:
        pytest.skip(f"{tool[0]} not installed")
    done = _run(*tool, str(lib))
    assert done.returncode == 0, done.stderr
    assert "adjusted" not in done.stderr, done.stderr  # binutils moved a section: the old bug
    assert _ctypes_value(lib) == "42"
    _readelf_clean(lib)


@pytest.mark.parametrize("key", ["note", "nonote"])
def test_nvidia_layout_second_patch_in_place_keeps_build_id(
    nvlike: dict[str, Path], tmp_path: Path, key: str,
) -> None:
    files = _copy_nvlike(nvlike, tmp_path / "t")
    lib = files[key]
    build_id = _run("readelf", "-n", str(lib)).stdout
    assert set_runpath(lib, TARGET).method == "append"
    assert set_runpath(lib, TARGET + ":/more").method == "in-place"
    assert read_elf_info(lib).runpath == TARGET + ":/more"  # type: ignore[union-attr]
    assert _run("readelf", "-n", str(lib)).stdout == build_id  # the note section stays
    assert _ctypes_value(lib) == "42"


def _nix_loader(tmp_path: Path) -> Path:
    """The system loader copied to a long Nix-store-like path (a non-default interpreter)."""
    loader = tmp_path / "nix/store" / ("0123456789abcdfghijklmnpqrsvwxyz" + "-glibc-2.40") / \
        "lib/ld-linux-x86-64.so.2"
    loader.parent.mkdir(parents=True)
    shutil.copy2(os.path.realpath(GLIBC_LOADER), loader)
    return loader


def test_interpreter_longer_goes_to_the_new_segment_and_runs(
    nvlike: dict[str, Path], tmp_path: Path,
) -> None:
    if not os.path.exists(GLIBC_LOADER):
        pytest.skip("no x86_64 glibc loader")
    files = _copy_nvlike(nvlike, tmp_path / "t")
    loader = _nix_loader(tmp_path)
    exe = files["exe"]
    res = apply_edit(exe, ElfEdit(runpath="$ORIGIN", interpreter=str(loader)))
    assert res.method == "append" and res.interpreter_before == GLIBC_LOADER
    assert read_elf_info(exe).interp == str(loader)  # type: ignore[union-attr]
    rows = [ln.split()[0] for ln in _run("readelf", "-lW", str(exe)).stdout.splitlines()
            if ln.strip().split()[:1] in (["INTERP"], ["LOAD"])]
    assert rows.index("INTERP") < rows.index("LOAD")  # PT_INTERP stays before the PT_LOADs
    for step in ((), ("strip", "--strip-all")):
        if step:
            assert _run(*step, str(exe)).returncode == 0
        done = _run(str(exe), "--version")
        assert done.stdout.strip() == "nvlike 1.0", done.stderr
    shorter = apply_edit(exe, ElfEdit(interpreter=GLIBC_LOADER))
    assert shorter.method == "in-place"
    assert _run(str(exe), "--version").returncode == 0


def test_interpreter_only_on_files_with_pt_interp(nvlike: dict[str, Path], tmp_path: Path) -> None:
    files = _copy_nvlike(nvlike, tmp_path / "t")
    before = files["note"].read_bytes()
    with pytest.raises(PatchError, match="PT_INTERP"):
        apply_edit(files["note"], ElfEdit(interpreter=GLIBC_LOADER))
    assert files["note"].read_bytes() == before


def test_interpreter_of_another_machine_is_refused(
    nvlike: dict[str, Path], cross: dict[str, Path | None], tmp_path: Path,
) -> None:
    other = cross.get("aarch64")
    if other is None:
        pytest.skip("no aarch64 cross compiler")
    files = _copy_nvlike(nvlike, tmp_path / "t")
    before = files["exe"].read_bytes()
    with pytest.raises(PatchError, match="another machine"):
        apply_edit(files["exe"], ElfEdit(interpreter=str(other)))
    assert files["exe"].read_bytes() == before


def test_add_needed_and_longer_rename(nvlike: dict[str, Path], tmp_path: Path) -> None:
    """trtexec needs an added DT_NEEDED; libqtiff a rename (here: longer, via append)."""
    files = _copy_nvlike(nvlike, tmp_path / "t")
    user = files["user"]
    shutil.copy2(files["note"], tmp_path / "t" / "libnvnote-renamed.so.1")
    res = apply_edit(user, ElfEdit(runpath="$ORIGIN", add_needed=("libnvnonote.so.1",),
                                   replace_needed=(("libnvnote.so.1",
                                                    "libnvnote-renamed.so.1"),)))
    assert res.method == "append"
    info = read_elf_info(user)
    assert info is not None
    assert info.needed[0] == "libnvnote-renamed.so.1"
    assert "libnvnonote.so.1" in info.needed and "libnvnote.so.1" not in info.needed
    assert _ctypes_value(user, "nv_user") == "42"
    maps = _run(sys.executable, "-c", f"import ctypes; ctypes.CDLL({str(user)!r});"
                "print(open('/proc/self/maps').read())").stdout
    assert "libnvnonote.so.1" in maps and "libnvnote-renamed.so.1" in maps
    # the same edit again changes nothing
    again = apply_edit(user, ElfEdit(runpath="$ORIGIN", add_needed=("libnvnonote.so.1",)))
    assert again.method == "unchanged"


def test_add_needed_in_place_uses_slack(nvlike: dict[str, Path], tmp_path: Path) -> None:
    files = _copy_nvlike(nvlike, tmp_path / "t")
    lib = files["note"]
    set_runpath(lib, TARGET)  # append: leaves SPARE_BYTES of slack
    res = apply_edit(lib, ElfEdit(add_needed=("libm.so.6",)))
    assert res.method == "in-place"
    assert read_elf_info(lib).needed[-1] == "libm.so.6"  # type: ignore[union-attr]
    assert _ctypes_value(lib) == "42"


def test_backend_factory() -> None:
    assert backend_for("auto").name == "native"
    assert backend_for("lief").name == "lief"
    assert backend_for("dry-run").apply("/nonexistent", ElfEdit(runpath="x")).method == "planned"
    with pytest.raises(UnknownPatcherError) as err:
        backend_for("patchelf")
    assert isinstance(err.value, CudasplitError)
    with pytest.raises(CudasplitError):
        set_runpath("/nonexistent", "x", patcher="bogus")
