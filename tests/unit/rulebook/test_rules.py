import tomllib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cudasplit import OUTPUT_NAMES, Kind
from cudasplit._release.manifest import arm_platform, resolve_platform_word
from cudasplit._rulebook import (
    Gate,
    Where,
    build_ruleset,
    describe_package,
    load_ruleset,
    read_rule_file,
    version_at_least,
)
from cudasplit.errors import CudasplitError, RulesError


def ruleset_from(tmp_path: Path, text: str, name: str = "extra.toml"):  # type: ignore[no-untyped-def]
    path = tmp_path / name
    path.write_text(text)
    return build_ruleset([(str(path), read_rule_file(path))])


DEFAULT_EXPECTATIONS = {
    "LICENSE": "out",
    "bin/nvcc": "bin",
    "bin/nvcc.profile": "bin",
    "include/cuda.h": "include",
    "include/crt/host_defines.h": "include",
    "include/cooperative_groups/details/async.h": "include",
    "lib/libcudart.so.12.9.79": "lib",
    "lib/libcudart_static.a": "static",
    "lib/stubs/libcuda.so": "stubs",
    "lib/stubs/libcuda_extra.a": "stubs",
    "lib/x64/libnested.a": "static",
    "stubs/libnvidia-ml.so": "stubs",
    "lib/cmake/cudart/cudart-config.cmake": "dev",
    "share/pkgconfig/cuda-12.9.pc": "dev",
    "lib/pkgconfig/cuda.pc": "dev",
    "samples/foo/main.cu": "samples",
    "python/cuda-12.9-py3-none-any.whl": "python",
    "doc/html/index.html": "doc",
    "share/doc/x/README": "doc",
    "share/man/man1/nvcc.1": "doc",
    "host-linux-x64/libQt6Core.so.6": "bin",
    "host-linux-x64/lib/libfoo.a": "bin",
    "target-linux-x64/nsys": "bin",
    "host/linux-desktop-glibc_2_11_3-x64/ncu-ui.bin": "bin",
    "nvvm/lib64/libnvvm.so": "out",
    "extras/CUPTI/lib64/libcupti.so": "out",
    "src/fortran.c": "out",
}


@pytest.mark.parametrize(("path", "output"), sorted(DEFAULT_EXPECTATIONS.items()))
def test_default_profile(path: str, output: str) -> None:
    rules = load_ruleset("some_package")
    decision = rules.classify(rules.normalise(path)[0], Kind.FILE)
    assert decision.output == output, decision.rule


def test_renames_normalise_pkgconfig_and_lib64() -> None:
    rules = load_ruleset("x")
    assert rules.normalise("pkg-config/cuda-12.9.pc")[0] == "share/pkgconfig/cuda-12.9.pc"
    assert rules.normalise("pkgconfig/cuda-12.9.pc")[0] == "share/pkgconfig/cuda-12.9.pc"
    assert rules.normalise("lib64/libfoo.so")[0] == "lib/libfoo.so"
    assert rules.normalise("lib64")[0] == "lib64"  # the prefix itself (a symlink) keeps its name


def test_decision_records_the_rule() -> None:
    rules = load_ruleset("x")
    decision = rules.classify("lib/stubs/libcuda.so", Kind.ELF_SHARED)
    assert str(decision.rule) == "default.toml:stubs"


def test_extra_rules_take_precedence(tmp_path: Path) -> None:
    extra = tmp_path / "mine.toml"
    extra.write_text('[[rule]]\nname = "keep-stubs-in-lib"\nmatch = "lib/stubs/**"\noutput = "lib"\n')
    rules = load_ruleset("x", [extra])
    decision = rules.classify("lib/stubs/libcuda.so", Kind.ELF_SHARED)
    assert (decision.output, str(decision.rule)) == ("lib", "mine.toml:keep-stubs-in-lib")
    assert rules.classify("lib/libcudart.so", Kind.FILE).output == "lib"


def test_package_rules_take_precedence_over_default(tmp_path: Path) -> None:
    (tmp_path / "packages").mkdir()
    default = Path(load_ruleset("x").files[-1]).read_text()
    (tmp_path / "default.toml").write_text(default)
    (tmp_path / "packages" / "cuda_demo.toml").write_text(
        '[package]\noutputs = ["out"]\n[[rule]]\nname = "drop-src"\nmatch = "src/**"\naction = "drop"\n'
    )
    rules = load_ruleset("cuda_demo", rules_dir=tmp_path)
    assert rules.classify("src/a.c", Kind.FILE).output is None
    assert rules.package.outputs == ("out",)
    other = load_ruleset("other", rules_dir=tmp_path)
    assert other.classify("src/a.c", Kind.FILE).output == "out"


def test_kind_filters(tmp_path: Path) -> None:
    rules = ruleset_from(tmp_path, """
[[rule]]
name = "elf-only"
match = "**"
kind = "elf"
output = "lib"
[[rule]]
name = "rest"
match = "**"
output = "out"
""")
    assert rules.classify("x/y", Kind.ELF_EXEC).output == "lib"
    assert rules.classify("x/y", Kind.FILE).output == "out"
    trials = rules.explain("x/y", Kind.FILE)
    assert [(str(r.ref), hit) for r, hit in trials] == [("extra.toml:elf-only", False),
                                                         ("extra.toml:rest", True)]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[[rule]]\nname = "a"\nmatch = "x"\noutput = "nope"\n', "extra.toml:a: unknown or missing output 'nope'"),
        ('[[rule]]\nname = "a"\nmatch = "x/**y"\noutput = "lib"\n', "extra.toml:a: invalid glob"),
        ('[[rule]]\nname = "a"\nmatch = "x"\noutput = "lib"\ncolour = 1\n', "extra.toml:a: unknown key(s) colour"),
        ('[[rule]]\nname = "a"\nmatch = "x"\noutput = "lib"\nkind = "weird"\n', "extra.toml:a: unknown kind(s) weird"),
        ('[[rule]]\nmatch = "x"\noutput = "lib"\n', "extra.toml:rule #1: 'name'"),
        ('[[rule]]\nname = "a"\nmatch = "x"\noutput = "lib"\n[[rule]]\nname = "a"\nmatch = "y"\noutput = "lib"\n', "extra.toml:a: duplicate rule name"),
        ('[[rule]]\nname = "a"\nmatch = "x"\naction = "drop"\noutput = "lib"\n', "extra.toml:a: a 'drop' rule takes no output"),
        ('[[rule]]\nname = "a"\noutput = "lib"\n', "extra.toml:a: 'match' needs at least one glob"),
        ('[[rename]]\nname = "r"\nfrom = "../x"\nto = "y"\n', "extra.toml:r: 'from' and 'to' must be relative"),
        ('bogus = 1\n', "extra.toml:top level: unknown key(s) bogus"),
        ('[[rule]]\nname = "a"\nmatch = "x"\noutput = "lib"\npatch = "yes"\n', "extra.toml:a: 'patch' must be true or false"),
        ('[package]\noutputs = ["lib", "weird"]\n', "unknown output(s) weird"),
    ],
)
def test_validation_names_file_and_rule(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(RulesError) as info:
        ruleset_from(tmp_path, text)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_invalid_toml_is_a_rules_error(tmp_path: Path) -> None:
    with pytest.raises(RulesError, match="invalid TOML"):
        ruleset_from(tmp_path, "[[rule]\nname=")


def test_shipped_rule_files_are_valid() -> None:
    rules_dir = Path(load_ruleset("x").files[-1]).parent
    for path in [rules_dir / "default.toml", *sorted((rules_dir / "packages").glob("*.toml"))]:
        build_ruleset([(str(path), read_rule_file(path))])


# -- the package table's structured entries ---------------------------------------------------



@pytest.mark.parametrize(("gate", "where", "applies"), [
    (Gate(since="12.8"), Where(version="12.9.1.4"), True),
    (Gate(since="12.8"), Where(version="12.6.4.1"), False),
    (Gate(since="12.8"), Where(version="12.8"), True),
    (Gate(since="12.8"), Where(), True),                       # unknown: newest layout
    (Gate(cuda_before="13.4"), Where(cuda_version="12.9"), True),
    (Gate(cuda_before="13.4"), Where(cuda_version="13.4"), False),
    (Gate(cuda_before="13.4"), Where(), False),                # unknown: before never applies
    (Gate(since="0.8"), Where(version="0.7.1.0"), False),
    (Gate(platforms=("linux-sbsa",), since="12.6"), Where("12.6.37", None, "linux-sbsa"), True),
    (Gate(platforms=("linux-sbsa",), since="12.6"), Where("12.4.1", None, "linux-sbsa"), False),
    (Gate(platforms=("linux-sbsa",)), Where("12.9", None, "linux-aarch64"), False),
])
def test_gates(gate: Gate, where: Where, applies: bool) -> None:
    assert gate.applies(where) is applies


@given(st.lists(st.integers(0, 200), min_size=1, max_size=4),
       st.lists(st.integers(0, 200), min_size=1, max_size=4))
def test_version_at_least_compares_the_floor_components(a: list[int], b: list[int]) -> None:
    version, floor = ".".join(map(str, a)), ".".join(map(str, b))
    assert version_at_least(version, floor) == (tuple(a[:len(b)]) >= tuple(b))


def test_cupti_static_output_depends_on_platform_and_version() -> None:
    package = load_ruleset("cuda_cupti").package
    assert "static" in package.outputs_for(Where("12.9.79", None, "linux-x86_64"))
    assert "static" in package.outputs_for(Where("12.6.37", None, "linux-sbsa"))
    assert "static" not in package.outputs_for(Where("12.4.127", None, "linux-sbsa"))
    assert "static" not in package.outputs_for(Where("12.9.79", None, "linux-aarch64"))


def test_positional_fallback_takes_the_next_matching_rule() -> None:
    rules = load_ruleset("some_package")
    everything = frozenset(OUTPUT_NAMES)
    assert rules.classify("lib/libfoo.a", Kind.STATIC, everything).output == "static"
    assert rules.classify("lib/libfoo.a", Kind.STATIC, frozenset({"out", "lib"})).output == "lib"
    assert rules.classify("lib/libfoo.a", Kind.STATIC, frozenset({"out"})).output == "out"
    # include -> dev, then positional; stubs never fall into lib (#293320)
    assert rules.classify("include/a.h", Kind.FILE, frozenset({"out", "dev"})).output == "dev"
    stub = rules.classify("lib/stubs/libcuda.so", Kind.ELF_SHARED, frozenset({"out", "lib"}))
    assert stub.output == "out" and stub.rule.name == "stubs"
    # samples keep their own .a and .cmake
    assert rules.classify("samples/x/libs.a", Kind.STATIC, everything).output == "samples"


def test_package_table_entries_are_validated() -> None:
    def load(package: str) -> None:
        build_ruleset([("p.toml", tomllib.loads(f"[package]\n{package}\n"))])

    with pytest.raises(RulesError, match="since"):
        load('copy_packages = [{ package = "libnvvm", since = "new" }]')
    with pytest.raises(RulesError, match="unknown key"):
        load('pkgconfig_edits = [{ files = ["*.pc"], require = ["cudart"] }]')
    with pytest.raises(RulesError, match="libdir_output"):
        load('pkgconfig_edits = [{ files = ["*.pc"], libdir_output = "nowhere" }]')
    with pytest.raises(RulesError, match="output"):
        load('output_when = [{ output = "statics" }]')
    with pytest.raises(RulesError, match="'quiet' must be true or false"):
        load('text_edits = [{ files = ["a"], replace = [["x", "y"]], quiet = "yes" }]')
    with pytest.raises(RulesError, match="'forbid' must be a list"):
        load('text_edits = [{ files = ["a"], replace = [["x", "y"]], forbid = "x" }]')


def test_rules_show_prints_the_whole_entry() -> None:
    lines = describe_package(load_ruleset("libcublas").package)
    assert any(line.startswith("dlopen = [") and "cuda_nvrtc" in line and "12.8" in line
               for line in lines)
    assert any(line.startswith("pkgconfig_edits = [{files=[cublas-*.pc]") for line in lines)
    assert len(lines) == len(type(load_ruleset("libcublas").package).__dataclass_fields__)


@pytest.mark.parametrize(("caps", "cuda", "platform"), [
    (["8.7"], "12.9", "linux-aarch64"), (["8.7"], "13.2", "linux-sbsa"),
    (["8.7"], "13.4.2", "linux-sbsa"), (["8.7"], "13", "linux-sbsa"), (["11.0"], "13.0", "linux-sbsa"),
    (["10.1"], "12.9", "linux-sbsa"),
    (["9.0"], "12.9", "linux-sbsa"), ([], "12.9", "linux-sbsa"),
    (["9.0", "7.2"], "12.9", "linux-aarch64"),
])
def test_arm_platform_from_capabilities(caps: list[str], cuda: str, platform: str) -> None:
    assert arm_platform(caps, cuda) == platform
    assert resolve_platform_word("aarch64-linux:" + ",".join(caps), cuda) == platform


def test_no_jetson_build_on_cuda_13() -> None:
    """No 13.x manifest has linux-aarch64; Orin is sbsa only from 13.2 (Nixpkgs' sets)."""
    for cuda in ("13.0.3", "13.3.1", "13.4.1"):
        with pytest.raises(CudasplitError, match="no linux-aarch64"):
            arm_platform(["7.2"], cuda)
    for cuda in ("13.0", "13.1.2"):
        with pytest.raises(CudasplitError, match=r"Orin from CUDA 13\.2"):
            arm_platform(["8.7"], cuda)


def test_text_edits_from_takes_the_other_packages_edits_under_both_gates(tmp_path: Path) -> None:
    (tmp_path / "packages").mkdir()
    (tmp_path / "packages/other.toml").write_text(
        '[package]\ntext_edits = [\n'
        '  { files = ["a.h"], replace = [["x", "y"]], cuda_before = "13.2" },\n'
        '  { files = ["b.h"], replace = [["x", "y"]], cuda_since = "13.3" },\n'
        '  { files = ["c.h"], replace = [["x", "y"]], since = "2.0", platforms = ["linux-sbsa"] },\n'
        ']\n')
    doc = tomllib.loads('[package]\ntext_edits = [{ files = ["own.h"], replace = [["p", "q"]] }]\n'
                        'text_edits_from = [{ package = "other", cuda_before = "13.0", '
                        'platforms = ["linux-x86_64", "linux-sbsa"] }]\n')
    edits = build_ruleset([("p.toml", doc)], tmp_path).package.text_edits
    assert [(e.files[0].pattern, e.gate.describe()) for e in edits] == [
        ("own.h", ""),
        ("a.h", "CUDA < 13.0, on linux-x86_64/linux-sbsa"),  # b.h: 13.3 <= CUDA < 13.0, never
        ("c.h", "version >= 2.0, CUDA < 13.0, on linux-sbsa")]
    (tmp_path / "packages/other.toml").write_text(
        '[package]\ntext_edits_from = [{ package = "third" }]\n')
    with pytest.raises(RulesError, match="does not chain"):
        build_ruleset([("p.toml", doc)], tmp_path)
    with pytest.raises(RulesError, match="no package file"):
        build_ruleset([("p.toml", tomllib.loads(
            '[package]\ntext_edits_from = [{ package = "nothing" }]\n'))], tmp_path)
    with pytest.raises(RulesError, match="'package'"):
        build_ruleset([("p.toml", tomllib.loads('[package]\ntext_edits_from = [{ since = "1" }]\n'))])
