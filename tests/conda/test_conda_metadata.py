"""What reaches conda's metadata: conda's grammar (names, versions, build strings, match specs)
against rattler's own parser; an archive whose name would inject match-spec syntax, refused
with one line; recipe data that breaks the grammar or the pin rules, refused at load; the
``__glibc`` pin measured from the bytes; links as conda-build leaves them."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest
import zstandard
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from cudasplit import RepackOptions, SplitOptions, repack_to_dir, split_to_dir
from cudasplit._release.conda import (
    RunValues,
    build_problem,
    conda_profile,
    name_problem,
    outputs_for,
    spec_problem,
    version_problem,
)
from cudasplit._rulebook import default_rules_dir
from cudasplit.cli import main
from cudasplit.errors import RulesError
from tests.conda.synthetic import TOP, VERSION, cudart_tree
from tests.support.builders import compile_shared, write_tarball

CONDA = SplitOptions(profile="conda-forge")
PACK = RepackOptions(fmt="conda", level=1)
T = "targets/x86_64-linux"


# -- conda's grammar ---------------------------------------------------------------------------

@pytest.mark.parametrize("spec", [
    "cuda-version >=13.0,<13.1.0a0", "libcublas 13.1.0.3 h1234567_0", "cuda-nvrtc",
    "cuda-nvcc_linux-64 13.0.88.*", "__glibc >=2.28,<3.0.a0", "gcc_impl_linux-64 >=6,<16.0a0",
    "libcublas-static >=13.1.0.3", "a 1.2|1.3", "a !=1.2", "a ~=1.2", "a * h*_0", "a 1!2.0+x_1",
])
def test_match_specs_the_recipes_write_are_accepted(spec: str) -> None:
    assert spec_problem(spec) is None


@pytest.mark.parametrize(("spec", "why"), [
    ("cuda-cudart 13.0.96 *|<0 x", "not 'name [version [build]]'"),
    ("libcublas >=13.0.96 *|<0,<14.0a0", "build '*|<0,<14.0a0'"),
    ("a  1.0", "version ''"), ("a >=1 ,<2", "build ',<2'"), ("A", "package 'A'"),
    ("a 1..2", "version '1..2'"), ("a 1.0-1", "version '1.0-1'"), ("a 1.0 b\nc", "build"),
    ("a 1.0 " + "b" * 400, "longer than"), ("", "package ''"),
])
def test_what_is_not_a_match_spec_is_refused_with_the_reason(spec: str, why: str) -> None:
    problem = spec_problem(spec)
    assert problem is not None and why in problem, problem


@pytest.mark.parametrize("version", ["13.0.96", "1!2.0", "1.0+local.1", "13.1.0a0", "2.28",
                                     "1_0", "A1"])
def test_versions_are_accepted(version: str) -> None:
    assert version_problem(version) is None


@pytest.mark.parametrize("version", ["13.0.96 *|<0", "13.0,>1", "1.0-1", "1..2", "1.0_", "",
                                     ".1", "1.*", "1 ", "9" * 65, "1!!2", "1.0+"])
def test_versions_that_conda_cannot_read_as_one_are_refused(version: str) -> None:
    assert version_problem(version) is not None


def test_names_and_build_strings() -> None:
    assert name_problem("cuda-nvcc_linux-64") is None and name_problem("__glibc") is None
    assert name_problem("Cuda") and name_problem("-x") and name_problem("a b") \
        and name_problem("a" * 101)
    assert build_problem("h1234567_0") is None and build_problem("py_0+cu13") is None
    assert build_problem("h_0 x") and build_problem("h-0") and build_problem("h*")


# Pieces the strategies join: what specs are made of, and what an archive's name might add.
_VERSIONISH = st.text(alphabet="0123456789ab._+!*", min_size=1, max_size=12)
_OPERATOR = st.sampled_from(["", "==", "!=", ">=", "<=", ">", "<", "~=", "=", ">>", "=<"])
_JUNK = st.text(alphabet="0123456789az._-+!*<>=,| \t\n'\"$()[]", max_size=16)


@st.composite
def _specs(draw: st.DrawFn) -> str:
    name = draw(st.text(alphabet="abcz019_.-", min_size=1, max_size=10))
    constraints = draw(st.lists(st.tuples(_OPERATOR, _VERSIONISH), min_size=0, max_size=3))
    version = ",".join(op + v for op, v in constraints)
    parts = [name] + ([version] if version else [])
    if version and draw(st.booleans()):
        parts.append(draw(st.text(alphabet="hz019_.+*", min_size=1, max_size=10)))
    spec = " ".join(parts)
    return spec + draw(_JUNK) if draw(st.booleans()) else spec


@settings(deadline=None, max_examples=400)
@given(_specs())
def test_every_accepted_spec_parses_in_rattler_to_the_same_parts(spec: str) -> None:
    """The grammar is a subset of what a conda client reads, and what it reads back is what
    was written: the name, and nothing taken for a build string that was not one."""
    rattler = pytest.importorskip("rattler", reason="py-rattler not installed")
    if spec_problem(spec) is not None:
        return
    parsed = rattler.MatchSpec(spec)
    words = spec.split(" ")
    assert parsed.name.normalized == words[0]
    assert (parsed.build is None) == (len(words) < 3)


@settings(deadline=None, max_examples=300)
@given(st.one_of(_VERSIONISH, _JUNK))
def test_every_accepted_version_parses_in_rattler_as_written(version: str) -> None:
    """... and in a spec, a build string after it is read as the build string."""
    rattler = pytest.importorskip("rattler", reason="py-rattler not installed")
    if version_problem(version) is not None:
        return
    rattler.Version(version)
    parsed = rattler.MatchSpec(f"x {version} h_0")
    assert parsed.name.normalized == "x" and parsed.build == "h_0"


# -- archives whose name is not a conda version --------------------------------------------

@pytest.mark.parametrize("version", ["13.0.96 *|<0", "13.0.96,>=1", "13.0.96'x"])
def test_an_archive_version_that_would_reach_a_match_spec_is_one_line_exit_2(
        tmp_path: Path, version: str) -> None:
    pytest.importorskip("conda_package_streaming", reason="conda-package-streaming not installed")
    top = f"cuda_cudart-linux-x86_64-{version}-archive"
    tarball = write_tarball(cudart_tree(tmp_path / "tree", top), tmp_path, "none")
    out = tmp_path / "channel"
    result = CliRunner().invoke(main, ["repack", str(tarball), "--profile", "conda-forge",
                                       "--format", "conda", "-o", str(out)])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
    assert version in result.stderr and "Traceback" not in result.stderr
    assert not out.exists()


def test_a_package_option_with_such_a_version_is_refused_too(tmp_path: Path) -> None:
    pytest.importorskip("conda_package_streaming", reason="conda-package-streaming not installed")
    tarball = write_tarball(cudart_tree(tmp_path / "tree"), tmp_path, "none")
    out = tmp_path / "channel"
    result = CliRunner().invoke(main, [
        "repack", str(tarball), "--profile", "conda-forge", "--format", "conda",
        "--package", "cuda_cudart-linux-x86_64-13.0.96+a+b", "--strip-components", "1",
        "-o", str(out)])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "'13.0.96+a+b' cannot name a conda package" in result.stderr
    assert not out.exists()


# -- recipe data -----------------------------------------------------------------------------

def _profile_copy(tmp_path: Path) -> Path:
    """A rules directory holding a copy of the conda-forge profile (to be edited)."""
    rules = tmp_path / "rules"
    shutil.copytree(default_rules_dir() / "profiles" / "conda-forge",
                    rules / "profiles" / "conda-forge")
    (rules / "default.toml").write_text("schema = 1\n")
    return rules


def _edit(rules: Path, recipe: str, old: str, new: str) -> None:
    path = rules / "profiles/conda-forge/recipes" / recipe
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize(("recipe", "old", "new", "message"), [
    ("cuda-cudart.toml", 'depends = ["cuda-version >=@cuda_version@,<@cuda_next_minor@",\n'
     '           "cuda-cudart_', 'depends = ["__glibc >=2.17,<3.0.a0", "cuda-version '
     '>=@cuda_version@,<@cuda_next_minor@",\n           "cuda-cudart_',
     "__glibc is not written in depends"),
    ("cuda-cudart.toml", 'noarch = "generic"\n', 'noarch = "generic"\nstdlib = "c"\n',
     "a noarch output gets no __glibc"),
    ("cuda-cudart.toml", 'c_stdlib_version = "2.17"\n', "", "needs the recipe's c_stdlib_version"),
    ("cuda-cudart.toml", 'c_stdlib_version = "2.17"', 'c_stdlib_version = "2.17 x"',
     "must be a glibc version X.Y"),
    ("cuda-nvcc.toml", '= "scripts/cuda-nvcc-activate.sh"', '= "../../../../etc/passwd"',
     "stay inside the prefix and the profile"),
    ("cuda-nvcc.toml", '"etc/conda/activate.d/~cuda-nvcc_activate.sh"', '"/etc/profile"',
     "stay inside the prefix and the profile"),
    ("cuda-nvcc.toml", '= "scripts/cuda-nvcc-activate.sh"', '= "scripts/missing.sh"',
     "cannot read"),
])
def test_recipe_data_that_breaks_the_rules_is_refused_at_load(
        tmp_path: Path, recipe: str, old: str, new: str, message: str) -> None:
    rules = _profile_copy(tmp_path)
    _edit(rules, recipe, old, new)
    with pytest.raises(RulesError, match=re.escape(message)) as caught:
        conda_profile(rules, "conda-forge", "linux-x86_64")
    assert recipe in str(caught.value)


def test_a_filled_spec_that_is_not_conda_names_the_recipe_and_output(tmp_path: Path) -> None:
    rules = _profile_copy(tmp_path)
    _edit(rules, "cuda-cudart.toml", '"cuda-cudart-static_@target_platform@ @version@ @build@"',
          '"cuda-cudart-static_@target_platform@ @version@ @build@ extra"')
    profile = conda_profile(rules, "conda-forge", "linux-x86_64")
    static = next(o for o in outputs_for(profile.recipes, "cuda_cudart", "linux-x86_64")
                  if o.name == "cuda-cudart-static")
    with pytest.raises(RulesError, match=r"cuda-cudart\.toml:cuda-cudart-static: depends "
                                         r"'cuda-cudart-static_linux-64 13\.0\.96 h\w+ extra'"):
        static.resolved(RunValues(VERSION, "13.0"))


# -- __glibc from the bytes; links as conda-build leaves them ----------------------------------

GETRANDOM = ("#include <sys/random.h>\n"
             "int cudart_value(void) { char b; return (int)getrandom(&b, 1, 0); }\n")


def _readelf_floor(path: Path) -> str | None:
    """The highest GLIBC_ version ``readelf -V`` lists as needed (independent of cudasplit)."""
    listing = subprocess.run(["readelf", "-V", "-W", str(path)], capture_output=True, text=True,
                             check=True).stdout
    versions = re.findall(r"Name: GLIBC_(\d+(?:\.\d+)+)", listing)
    return max(versions, key=lambda v: tuple(map(int, v.split("."))), default=None)


def _info_and_links(package: Path) -> tuple[dict[str, object], dict[str, str]]:
    found: dict[str, bytes] = {}
    links: dict[str, str] = {}
    with zipfile.ZipFile(package) as zf:
        for name in (n for n in zf.namelist() if n.endswith(".tar.zst")):
            data = zstandard.ZstdDecompressor().decompressobj().decompress(zf.read(name))
            with tarfile.open(fileobj=io.BytesIO(data)) as tar:
                for member in tar:
                    if member.issym():
                        links[member.name] = member.linkname
                    elif member.name == "info/index.json":
                        found["index"] = tar.extractfile(member).read()  # type: ignore[union-attr]
    return json.loads(found["index"]), links


@pytest.fixture(scope="module")
def getrandom_channel(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """cuda_cudart-like packages whose libcudart needs GLIBC_2.25 (getrandom), and the
    library itself."""
    pytest.importorskip("conda_package_streaming", reason="conda-package-streaming not installed")
    base = tmp_path_factory.mktemp("getrandom")
    root = cudart_tree(base / "tree", TOP)
    library = root / "lib" / f"libcudart.so.{VERSION}"
    library.unlink()
    compile_shared(library.parent, library.name, GETRANDOM, soname="libcudart.so.13")
    channel = base / "channel"
    repack_to_dir(write_tarball(root, base, "none"), channel, CONDA, PACK)
    return channel, library


def _package(channel: Path, name: str) -> Path:
    return next(p for p in channel.glob("*/*.conda") if p.name.rsplit("-", 2)[0] == name)


def test_glibc_pins_come_from_the_files_and_never_go_below_them(
        getrandom_channel: tuple[Path, Path]) -> None:
    channel, library = getrandom_channel
    measured = _readelf_floor(library)
    assert measured == "2.25"   # getrandom@GLIBC_2.25, above the recipe's c_stdlib_version 2.17
    pins = {}
    for package in channel.glob("*/*.conda"):
        index, _links = _info_and_links(package)
        glibc = [d for d in index["depends"] if str(d).startswith("__glibc ")]  # type: ignore[attr-defined]
        pins[index["name"]] = glibc[0] if glibc else None
    assert pins == {
        # links to the library: its floor
        "cuda-cudart": "__glibc >=2.25,<3.0.a0", "cuda-cudart-dev": "__glibc >=2.25,<3.0.a0",
        # static archives and a stub that needs nothing newer: the feedstock's 2.17
        "cuda-cudart-static": "__glibc >=2.17,<3.0.a0",
        "cuda-driver-dev": "__glibc >=2.17,<3.0.a0",
        # noarch: no __glibc (conda-build applies only noarch run exports there)
        "cuda-cudart_linux-64": None, "cuda-cudart-dev_linux-64": None,
        "cuda-cudart-static_linux-64": None, "cuda-driver-dev_linux-64": None,
        "cuda-version": None}


def test_links_say_what_conda_build_leaves_them_saying(
        getrandom_channel: tuple[Path, Path], tmp_path: Path) -> None:
    """A link of NVIDIA's chain points at the real file in the package; one made relative by
    the recipe (``../targets/...``) stays as written. The split directory keeps NVIDIA's."""
    channel, _library = getrandom_channel
    _index, dev = _info_and_links(_package(channel, "cuda-cudart-dev_linux-64"))
    assert dev == {f"{T}/lib/libcudart.so": f"libcudart.so.{VERSION}"}
    _index, runtime = _info_and_links(_package(channel, "cuda-cudart_linux-64"))
    assert runtime == {f"{T}/lib/libcudart.so.13": f"libcudart.so.{VERSION}"}
    _index, native = _info_and_links(_package(channel, "cuda-cudart"))
    assert set(native.values()) == {f"../{T}/lib/libcudart.so.{VERSION}"}
    out = tmp_path / "out"
    split_to_dir(write_tarball(cudart_tree(tmp_path / "tree"), tmp_path, "none"), out, CONDA)
    assert (out / "cuda-cudart-dev_linux-64" / T / "lib/libcudart.so").readlink() == \
        Path("libcudart.so.13")


def test_a_library_whose_version_needs_cannot_be_read_gets_no_pin_but_one_line(
        tmp_path: Path) -> None:
    """A damaged ``.gnu.version_r`` would hide what the file needs: the pin would be the
    feedstock's alone, possibly below the file. Refused instead, naming the file."""
    pytest.importorskip("conda_package_streaming", reason="conda-package-streaming not installed")
    from elftools.elf.elffile import ELFFile

    root = cudart_tree(tmp_path / "tree")
    library = root / "lib" / f"libcudart.so.{VERSION}"
    library.unlink()
    compile_shared(library.parent, library.name, GETRANDOM, soname="libcudart.so.13")
    with open(library, "rb") as fh:
        section = ELFFile(fh).get_section_by_name(".gnu.version_r")
        offset = section["sh_offset"]
    with open(library, "r+b") as fh:   # the first record's vn_next: far past the table
        fh.seek(offset + 12)
        fh.write((0x7FFFFFF0).to_bytes(4, "little"))
    tarball = write_tarball(root, tmp_path, "none")
    out = tmp_path / "channel"
    result = CliRunner().invoke(main, ["repack", str(tarball), "--profile", "conda-forge",
                                       "--format", "conda", "--no-inside", "-o", str(out)])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
    assert f"libcudart.so.{VERSION}: cannot read its glibc floor (.gnu.version_r" \
        in result.stderr
    assert not out.exists()
