"""Tests for cudasplit._elf.plan.runpath: exact plans for typical files, then properties."""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cudasplit._elf.plan import (
    RunpathPlan,
    RunpathPolicy,
    RunpathPolicyError,
    index_library_paths,
    is_driver_name,
    is_glibc_name,
    plan_runpath,
)
from cudasplit._searchpath import ORIGIN, is_origin_relative, is_stub_entry, split_search_path
from cudasplit.errors import CudasplitError, SourceError

DRIVER = "/run/opengl-driver/lib"
STORE = "/nix/store"
CUDART_LIB = f"{STORE}/0c0ffee0000000000000000000000000-cuda_cudart-12.8.90-lib/lib"
CUDART_STUBS = f"{STORE}/5t0b5000000000000000000000000000-cuda_cudart-12.8.90-stubs/lib/stubs"
NVRTC_LIB = f"{STORE}/nvrtc000000000000000000000000000-cuda_nvrtc-12.8.93-lib/lib"
COMPAT = f"{STORE}/c0mpa700000000000000000000000000-cuda_compat-12.8.39862259/compat"
GCC_LIB = f"{STORE}/gcc00000000000000000000000000000-gcc-14.2.1.20250322-lib/lib"
CUBLAS_LIB = f"{STORE}/cub1a5000000000000000000000000000-libcublas-12.8.4.1-lib/lib"


def plan(
    *,
    existing: str | None = None,
    needed: Sequence[str] = (),
    own_dir_names: Collection[str] = (),
    package_dirs: Mapping[str, str] | None = None,
    library_index: Mapping[str, str] | None = None,
    policy: RunpathPolicy | None = None,
    is_compat_package: bool = False,
) -> RunpathPlan:
    return plan_runpath(
        existing=existing,
        needed=needed,
        own_dir_names=own_dir_names,
        package_dirs=package_dirs or {},
        library_index=library_index or {},
        policy=policy or RunpathPolicy(),
        is_compat_package=is_compat_package,
    )


# --- exact plans ----------------------------------------------------------------------------


def test_no_runpath_gets_driver_and_origin() -> None:
    result = plan(needed=["libcudart.so.12", "libc.so.6"], own_dir_names={"libcudart.so.12"})
    assert result.entries == (DRIVER, ORIGIN)
    assert result.value == f"{DRIVER}:$ORIGIN"
    assert result.needed_unresolved == ()
    assert result.needed_from_driver == ()
    assert result.dropped == ()


def test_origin_rpath_is_merged_not_duplicated() -> None:
    # libcublas ships DT_RPATH=$ORIGIN and needs libcublasLt next to it.
    result = plan(
        existing="$ORIGIN",
        needed=["libcublasLt.so.12", "libpthread.so.0", "libdl.so.2", "libgcc_s.so.1"],
        own_dir_names={"libcublasLt.so.12", "libcublas.so.12"},
        library_index={"libgcc_s.so.1": GCC_LIB},
    )
    assert result.entries == (DRIVER, GCC_LIB, ORIGIN)


def test_nvrtc_empty_tail_is_removed() -> None:
    # libnvrtc ships DT_RUNPATH="$ORIGIN:"; the empty entry means the current directory.
    result = plan(existing="$ORIGIN:", needed=["libm.so.6"])
    assert result.entries == (DRIVER, ORIGIN)
    assert result.dropped == ("",)
    assert "" not in result.value.split(":")


def test_stubs_entry_is_dropped_even_with_keep_absolute() -> None:
    existing = f"{CUDART_STUBS}:$ORIGIN:{CUDART_LIB}"
    result = plan(
        existing=existing,
        needed=["libcuda.so.1", "libcudart.so.12"],
        package_dirs={"libcudart.so.12": CUDART_LIB},
        policy=RunpathPolicy(keep_absolute=True),
    )
    assert result.entries == (DRIVER, CUDART_LIB, ORIGIN)
    assert result.needed_from_driver == ("libcuda.so.1",)
    assert result.dropped == (CUDART_STUBS,)


def test_compat_goes_before_driver() -> None:
    result = plan(
        needed=["libcuda.so.1", "libcudart.so.12"],
        library_index={"libcudart.so.12": CUDART_LIB},
        policy=RunpathPolicy(cuda_compat=COMPAT),
    )
    assert result.entries == (COMPAT, DRIVER, CUDART_LIB, ORIGIN)
    assert result.needed_from_driver == ("libcuda.so.1",)


def test_compat_package_itself_gets_no_compat_entry() -> None:
    # cuda_compat's libcuda needs libnvrm_* from the driver and its siblings via $ORIGIN.
    result = plan(
        needed=["libnvrm_gpu.so", "libnvrm_mem.so", "libnvidia-ptxjitcompiler.so.1", "librt.so.1"],
        own_dir_names={"libcuda.so.1", "libnvidia-ptxjitcompiler.so.1"},
        policy=RunpathPolicy(cuda_compat=COMPAT),
        is_compat_package=True,
    )
    assert result.entries == (DRIVER, ORIGIN)
    assert result.needed_from_driver == ("libnvrm_gpu.so", "libnvrm_mem.so")


def test_driver_link_off() -> None:
    policy = RunpathPolicy(driver_link=None)
    assert policy.driver_lib_dir() is None
    result = plan(needed=["libcuda.so.1"], policy=policy)
    assert result.entries == (ORIGIN,)
    assert result.needed_from_driver == ("libcuda.so.1",)


def test_driver_link_custom_and_trailing_slash() -> None:
    assert RunpathPolicy(driver_link="/run/opengl-driver-32").driver_lib_dir() == (
        "/run/opengl-driver-32/lib"
    )
    assert RunpathPolicy(driver_link="/opt/driver/").driver_lib_dir() == "/opt/driver/lib"


def test_long_nix_store_paths_kept_verbatim_in_needed_order() -> None:
    long_dir = f"{STORE}/{'z' * 32}-{'very-long-name-' * 12}1.0/lib"
    result = plan(
        needed=["libb.so", "liba.so", "libb.so"],
        package_dirs={"libb.so": long_dir},
        library_index={"liba.so": NVRTC_LIB},
        policy=RunpathPolicy(cuda_compat=COMPAT),
    )
    assert result.entries == (COMPAT, DRIVER, long_dir, NVRTC_LIB, ORIGIN)
    assert result.value == ":".join(result.entries)


def test_needed_resolution_categories() -> None:
    result = plan(
        needed=[
            "libc.so.6",  # glibc: never added
            "ld-linux-x86-64.so.2",  # loader: never added
            "libown.so.1",  # own dir: $ORIGIN
            "libpkg.so.1",  # package elsewhere
            "libidx.so.1",  # library index
            "libcuda.so.1",  # driver
            "libnvidia-ml.so.1",  # driver
            "libmissing.so.3",  # unresolved
        ],
        own_dir_names={"libown.so.1"},
        package_dirs={"libpkg.so.1": CUBLAS_LIB},
        library_index={"libidx.so.1": GCC_LIB, "libown.so.1": NVRTC_LIB},
    )
    assert result.entries == (DRIVER, CUBLAS_LIB, GCC_LIB, ORIGIN)
    assert result.needed_from_driver == ("libcuda.so.1", "libnvidia-ml.so.1")
    assert result.needed_unresolved == ("libmissing.so.3",)


def test_package_dirs_win_over_library_index() -> None:
    result = plan(
        needed=["libx.so"], package_dirs={"libx.so": CUBLAS_LIB}, library_index={"libx.so": GCC_LIB}
    )
    assert result.entries == (DRIVER, CUBLAS_LIB, ORIGIN)


def test_stub_hit_in_index_falls_through_to_driver() -> None:
    # A stub libcuda on a library path must not reach RUNPATH (NixOS/nixpkgs#320145).
    result = plan(
        needed=["libcuda.so.1", "libnvidia-ml.so.1", "libfoo.so"],
        package_dirs={"libcuda.so.1": CUDART_STUBS},
        library_index={"libnvidia-ml.so.1": "/opt/nvml/stubs", "libfoo.so": "/opt/x/stubs"},
    )
    assert result.entries == (DRIVER, ORIGIN)
    assert result.needed_from_driver == ("libcuda.so.1", "libnvidia-ml.so.1")
    assert result.needed_unresolved == ("libfoo.so",)


def test_stub_dirs_catch_dirs_without_stubs_component() -> None:
    stub_out = f"{STORE}/aaaa-cuda_cudart-12.8.90-stubs/lib"
    policy = RunpathPolicy(keep_absolute=True, stub_dirs=(stub_out,))
    result = plan(
        existing=f"{stub_out}/:{stub_out}/sub:{CUDART_LIB}",
        needed=["libcuda.so"],
        library_index={"libcuda.so": stub_out},
        policy=policy,
    )
    assert result.entries == (DRIVER, ORIGIN, CUDART_LIB)
    assert result.needed_from_driver == ("libcuda.so",)
    assert result.dropped == (f"{stub_out}/", f"{stub_out}/sub")


def test_keep_absolute_orders_after_origin_group() -> None:
    existing = f"/opt/a:$ORIGIN/../lib:relative/dir:{DRIVER}:${{ORIGIN}}:/opt/b:$ORIGIN/x"
    default = plan(existing=existing)
    assert default.entries == (DRIVER, ORIGIN, "$ORIGIN/../lib", "$ORIGIN/x")
    assert default.dropped == ("/opt/a", "relative/dir", DRIVER, "/opt/b")
    kept = plan(existing=existing, policy=RunpathPolicy(keep_absolute=True))
    assert kept.entries == (DRIVER, ORIGIN, "$ORIGIN/../lib", "$ORIGIN/x", "/opt/a", "/opt/b")
    assert kept.dropped == ("relative/dir",)


def test_braced_origin_equals_origin() -> None:
    result = plan(existing="${ORIGIN}:${ORIGIN}/../lib64:$ORIGIN/../lib64/")
    assert result.entries == (DRIVER, ORIGIN, "${ORIGIN}/../lib64")


def test_append_at_end_and_duplicates_keep_first_place() -> None:
    policy = RunpathPolicy(append=(NVRTC_LIB, DRIVER, ORIGIN, "$ORIGIN/../nvrtc", NVRTC_LIB))
    result = plan(
        existing=f"$ORIGIN/../nvrtc:{NVRTC_LIB}:$ORIGIN/up",
        needed=["libz.so.1"],
        library_index={"libz.so.1": GCC_LIB},
        policy=policy,
    )
    # Existing entries named in append move to the append group at the end.
    assert result.entries == (DRIVER, GCC_LIB, ORIGIN, "$ORIGIN/up", NVRTC_LIB, "$ORIGIN/../nvrtc")


def test_append_to_cublaslt_like_nixpkgs() -> None:
    result = plan(
        existing="$ORIGIN",
        needed=["libm.so.6", "libdl.so.2"],
        policy=RunpathPolicy(append=(NVRTC_LIB,)),
    )
    assert result.value == f"{DRIVER}:$ORIGIN:{NVRTC_LIB}"


def test_compat_dir_in_existing_is_not_duplicated() -> None:
    result = plan(
        existing=f"{COMPAT}:{DRIVER}:$ORIGIN",
        policy=RunpathPolicy(cuda_compat=COMPAT, keep_absolute=True),
    )
    assert result.entries == (COMPAT, DRIVER, ORIGIN)


def test_needed_with_slash_or_empty_is_ignored() -> None:
    result = plan(needed=["", "/abs/libx.so", "sub/liby.so"])
    assert result.entries == (DRIVER, ORIGIN)
    assert result.needed_unresolved == ()


def test_plan_value_and_immutability() -> None:
    result = plan()
    with pytest.raises(AttributeError):
        result.entries = ()  # type: ignore[misc]
    assert RunpathPlan(entries=("a", "b"), needed_unresolved=(), needed_from_driver=()).value == (
        "a:b"
    )


def test_relative_mapping_dir_is_an_error() -> None:
    with pytest.raises(RunpathPolicyError, match="absolute"):
        plan(needed=["libx.so"], package_dirs={"libx.so": "lib"})
    with pytest.raises(RunpathPolicyError, match="':'"):
        plan(needed=["libx.so"], library_index={"libx.so": "/a:b"})


@pytest.mark.parametrize(
    "kwargs",
    [
        {"tag": "DT_RUNPATH"},
        {"driver_link": "run/opengl-driver"},
        {"driver_link": ""},
        {"driver_link": "/stubs/driver"},
        {"cuda_compat": "compat"},
        {"cuda_compat": "/a:/b"},
        {"cuda_compat": "/x/stubs"},
        {"append": ("",)},
        {"append": ("lib",)},
        {"append": ("/opt/a:/opt/b",)},
        {"append": ("$ORIGIN/stubs",)},
        {"append": ("/s/lib",), "stub_dirs": ("/s",)},
        {"stub_dirs": ("relative",)},
    ],
)
def test_policy_validation(kwargs: dict[str, object]) -> None:
    with pytest.raises(RunpathPolicyError) as info:
        RunpathPolicy(**kwargs)  # type: ignore[arg-type]
    assert isinstance(info.value, CudasplitError)
    assert isinstance(info.value, ValueError)


def test_policy_accepts_rpath_tag_and_origin_append() -> None:
    policy = RunpathPolicy(tag="RPATH", append=("${ORIGIN}/../nvrtc",))
    assert policy.tag == "RPATH"


# --- helpers ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, ()),
        ("", ("",)),
        ("$ORIGIN", ("$ORIGIN",)),
        ("$ORIGIN:", ("$ORIGIN", "")),
        ("a::b", ("a", "", "b")),
    ],
)
def test_split_search_path(value: str | None, expected: tuple[str, ...]) -> None:
    assert split_search_path(value) == expected


@pytest.mark.parametrize(
    "name",
    [
        "libc.so.6",
        "libm.so.6",
        "libpthread.so.0",
        "libdl.so.2",
        "librt.so.1",
        "libutil.so.1",
        "libresolv.so.2",
        "libanl.so.1",
        "libnsl.so.1",
        "libBrokenLocale.so.1",
        "libmvec.so.1",
        "libc_malloc_debug.so.0",
        "libthread_db.so.1",
        "ld-linux-x86-64.so.2",
        "ld-linux-aarch64.so.1",
        "ld64.so.2",
        "ld.so.1",
    ],
)
def test_glibc_names(name: str) -> None:
    assert is_glibc_name(name)
    assert not is_driver_name(name)


@pytest.mark.parametrize("name", ["libcudart.so.12", "libstdc++.so.6", "libgcc_s.so.1", "libz.so"])
def test_neither_glibc_nor_driver(name: str) -> None:
    assert not is_glibc_name(name)
    assert not is_driver_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "libcuda.so",
        "libcuda.so.1",
        "libnvidia-ml.so.1",
        "libnvidia-ptxjitcompiler.so.1",
        "libnvcuvid.so.1",
        "libnvrm_gpu.so",
        "libnvrm_mem.so",
    ],
)
def test_driver_names(name: str) -> None:
    assert is_driver_name(name)
    assert not is_glibc_name(name)


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ("$ORIGIN", True),
        ("${ORIGIN}", True),
        ("$ORIGIN/../lib", True),
        ("${ORIGIN}/x", True),
        ("$ORIGINAL", False),
        ("/opt/$ORIGIN", False),
        ("lib", False),
    ],
)
def test_is_origin_relative(entry: str, expected: bool) -> None:
    assert is_origin_relative(entry) is expected


@pytest.mark.parametrize(
    ("entry", "stub_dirs", "expected"),
    [
        (CUDART_STUBS, (), True),
        ("$ORIGIN/stubs", (), True),
        ("/nix/store/xx-cuda_cudart-stubs/lib", (), False),
        ("/nix/store/xx-cuda_cudart-stubs/lib", ("/nix/store/xx-cuda_cudart-stubs",), True),
        ("/s//lib/", ("/s/lib",), True),
        ("/s/lib2", ("/s/lib",), False),
        ("$ORIGIN/s/lib", ("/s/lib",), False),
    ],
)
def test_is_stub_entry(entry: str, stub_dirs: tuple[str, ...], expected: bool) -> None:
    assert is_stub_entry(entry, stub_dirs) is expected


def test_index_library_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    (first / "libfoo.so.1").write_bytes(b"")
    (first / "libfoo.so").symlink_to("libfoo.so.1")
    (first / "README").write_text("")
    (first / "socket.sock").write_text("")
    (first / "dir.so").mkdir()
    (second / "libfoo.so.1").write_bytes(b"")
    (second / "libbar.so.2.0").write_bytes(b"")
    (tmp_path / "file.so").write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    index = index_library_paths(
        ["", str(tmp_path / "missing"), str(tmp_path / "file.so"), str(first), "second"]
    )
    assert index == {
        "libfoo.so.1": str(first),
        "libfoo.so": str(first),
        "libbar.so.2.0": os.path.abspath("second"),
    }


def test_index_library_paths_unreadable_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(path: str) -> None:
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(os, "scandir", refuse)
    with pytest.raises(SourceError, match="/locked: cannot list library path"):
        index_library_paths(["/locked"])


# --- properties -------------------------------------------------------------------------

ABSOLUTE_DIRS = [
    CUDART_LIB,
    NVRTC_LIB,
    GCC_LIB,
    CUBLAS_LIB,
    "/opt/a",
    "/opt/a/",
    "//opt//b",
    DRIVER,
    COMPAT,
]
STUB_DIRS = [CUDART_STUBS, "/opt/stubs", "/opt/stubs/lib", "/opt/known-stubs/lib"]
ORIGIN_ENTRIES = [
    "$ORIGIN",
    "${ORIGIN}",
    "$ORIGIN/",
    "$ORIGIN/../lib",
    "${ORIGIN}/../lib",
    "$ORIGIN/stubs",
]
OTHER_ENTRIES = ["", "lib", "./x", "$LIB/x", "$ORIGINAL"]
NAMES = [
    "libc.so.6",
    "libm.so.6",
    "ld-linux-x86-64.so.2",
    "libcuda.so.1",
    "libnvidia-ml.so.1",
    "libnvrm_gpu.so",
    "libcudart.so.12",
    "libcublasLt.so.12",
    "libnvrtc.so.12",
    "libgcc_s.so.1",
    "libstdc++.so.6",
    "libz.so.1",
    "libmissing.so",
]

entries_st = st.sampled_from(ABSOLUTE_DIRS + STUB_DIRS + ORIGIN_ENTRIES + OTHER_ENTRIES)
existing_st = st.none() | st.lists(entries_st, max_size=8).map(":".join)
mapping_st = st.dictionaries(st.sampled_from(NAMES), st.sampled_from(ABSOLUTE_DIRS + STUB_DIRS))
append_st = st.lists(
    st.sampled_from([*ABSOLUTE_DIRS, "$ORIGIN", "${ORIGIN}/../nvrtc", "$ORIGIN/../lib"]),
    max_size=4,
).map(tuple)
policy_st = st.builds(
    RunpathPolicy,
    driver_link=st.sampled_from([None, "/run/opengl-driver", "/nix/store/d-driver"]),
    cuda_compat=st.sampled_from([None, COMPAT]),
    append=append_st,
    keep_absolute=st.booleans(),
    tag=st.sampled_from(["RUNPATH", "RPATH"]),
    stub_dirs=st.sampled_from([(), ("/opt/known-stubs",)]),
)


@st.composite
def inputs_st(draw: st.DrawFn) -> dict[str, object]:
    return {
        "existing": draw(existing_st),
        "needed": draw(st.lists(st.sampled_from(NAMES), max_size=10)),
        "own_dir_names": draw(st.frozensets(st.sampled_from(NAMES))),
        "package_dirs": draw(mapping_st),
        "library_index": draw(mapping_st),
        "policy": draw(policy_st),
        "is_compat_package": draw(st.booleans()),
    }


def _key(entry: str) -> str:
    entry = entry.replace("${ORIGIN}", "$ORIGIN", 1) if entry.startswith("${ORIGIN}") else entry
    while "//" in entry:
        entry = entry.replace("//", "/")
    return entry.rstrip("/") or entry


@settings(max_examples=400)
@given(inputs_st())
def test_property_shape(inputs: dict[str, object]) -> None:
    result = plan_runpath(**inputs)  # type: ignore[arg-type]
    policy = inputs["policy"]
    assert isinstance(policy, RunpathPolicy)
    keys = [_key(entry) for entry in result.entries]
    assert len(keys) == len(set(keys)), "duplicates"
    assert "" not in result.entries
    assert ORIGIN in result.entries
    assert not any(is_stub_entry(entry, policy.stub_dirs) for entry in result.entries)
    for entry in policy.append:
        assert _key(entry) in keys
    position = 0
    if policy.cuda_compat is not None and not inputs["is_compat_package"]:
        assert result.entries[0] == policy.cuda_compat
        position = 1
    driver_dir = policy.driver_lib_dir()
    if driver_dir is not None:
        # The driver dir comes before every needed dir and $ORIGIN: right after compat.
        assert result.entries[position] == driver_dir
    for entry in result.entries:
        assert entry.startswith("/") or is_origin_relative(entry)


@settings(max_examples=400)
@given(inputs_st())
def test_property_needed_classification(inputs: dict[str, object]) -> None:
    result = plan_runpath(**inputs)  # type: ignore[arg-type]
    needed = inputs["needed"]
    assert isinstance(needed, list)
    assert set(result.needed_unresolved) <= set(needed)
    assert set(result.needed_from_driver) <= set(needed)
    assert not set(result.needed_unresolved) & set(result.needed_from_driver)
    for name in result.needed_unresolved:
        assert not is_glibc_name(name)
        assert not is_driver_name(name)
    for name in result.needed_from_driver:
        assert is_driver_name(name)
    assert len(set(result.needed_unresolved)) == len(result.needed_unresolved)


@settings(max_examples=400)
@given(inputs_st())
def test_property_deterministic_and_idempotent(inputs: dict[str, object]) -> None:
    first = plan_runpath(**inputs)  # type: ignore[arg-type]
    assert plan_runpath(**inputs) == first  # type: ignore[arg-type]
    again = plan_runpath(**{**inputs, "existing": first.value})  # type: ignore[arg-type]
    assert again.entries == first.entries
    assert again.needed_unresolved == first.needed_unresolved
    assert again.needed_from_driver == first.needed_from_driver
