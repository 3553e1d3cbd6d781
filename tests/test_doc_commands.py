"""Every command the documentation shows runs here, and does what the page says.

Each page's ```` ```sh ```` and ```` ```console ```` blocks (:mod:`tests.support.doccommands`)
run in order, in a scene: a private directory laid out like a small machine (``home/user`` is
the working directory; ``/tmp/``, ``/opt/`` and ``/home/`` in a command are that directory's),
holding the inputs the page names under the names it uses. The exit status must be the one the
page says, and a console block's output what it shows (numbers and column widths aside).

Inputs: the sample tarball, and NVIDIA-layout tarballs built from the reference member lists
(``tests/data/trees/packages``: real layout, small real ELF files compiled here) for the pages
that need no NVIDIA bytes; the pages about whole releases, cross-compiling and CuPy use real
NVIDIA wheels laid out as redistributables (marked ``realbytes``; skipped offline).

A command is left out only where this file says why (``NOT_RUN``): the README's quick start
(``.ci/run`` runs it on a fresh machine) and the commands of the test loop itself. Where a
command needs something a machine may lack (``<nixpkgs>``), the rest of the page runs and the
test then skips naming what was not run.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.builders import have_compiler, tree_from_reference, write_tarball
from tests.support.doccommands import (
    Block,
    Command,
    page_blocks,
    problems,
    program_of,
    run_block,
    unlabelled_command_blocks,
)
from tests.support.paths import DATA, REPO
from tests.support.tools import need

DOCS = REPO / "docs"
PAGES = [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]
TREES = DATA / "trees" / "packages"
SAMPLE = REPO / "fixtures" / "cuda_sample-linux-x86_64-12.9.79-archive.tar.xz"
CUDART = "cuda_cudart-linux-x86_64-12.9.79-archive"
CUBLAS = "libcublas-linux-x86_64-12.9.1.4-archive"
NVRTC = "cuda_nvrtc-linux-x86_64-12.9.86-archive"

# Pages whose Python examples are programs run as printed, in order with the commands (the
# conda-forge page's py-rattler snippets index, solve and install the channel the page wrote).
RUN_PYTHON = frozenset({"docs/howto/conda-forge.md"})

# Commands no test runs, each with the reason (matched by the start of the command).
NOT_RUN: dict[str, dict[str, str]] = {
    "README.md": {
        "python3 -m venv .venv && .venv/bin/pip install -q . &&":
            "the quick start: .ci/run runs it on a fresh machine (test_docs.py checks it is "
            "the README's)",
        "rm -rf .venv && python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' &&":
            "the test command: .ci/run runs it (it is this test suite)",
    },
    "docs/tutorial.md": {
        "python3 -m venv .venv && .venv/bin/pip install -q .":
            "the README's quick start installs the same way (.ci/run runs it)",
    },
    "docs/howto/conda-forge.md": {
        "env/bin/nvcc": "the scene's archives hold no executables (packing the whole toolkit "
                        "at the page's zstd level takes minutes): tests/conda/"
                        "test_real_channel.py installs the real nvcc with py-rattler and "
                        "builds with it",
        "g++ -std=c++17 $CXXFLAGS app.cpp": "needs an environment activated by a conda "
                                            "client: tests/conda/test_real_channel.py "
                                            "activates one and builds exactly this",
    },
    "docs/development.md": {
        "python3 -m venv .venv": "the README's test command (.ci/run runs it)",
        ".venv/bin/python -m pytest": "the test suite itself",
        ".venv/bin/ruff": "the linter over the checkout, not a user command",
        ".venv/bin/mypy": "the type checker over the checkout, not a user command",
        "python3 scripts/gen_reference.py --write":
            "rewrites the checkout; tests/test_docs.py runs its --check",
        "python3 scripts/package_table.py --write":
            "rewrites the checkout; tests/test_docs.py runs its --check",
        "python3 scripts/gen_manpage.py":
            "rewrites the checkout; tests/cli/test_packaging.py runs its --check",
    },
}


@dataclass
class Scene:
    """A page's working directory and environment; ``missing`` says which commands cannot run
    on this machine (start of the command -> why): the rest of the page runs, then the test
    skips naming them."""

    root: Path
    env: dict[str, str] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)

    @property
    def cwd(self) -> Path:
        return self.root / "home" / "user"

    @property
    def substitutions(self) -> list[tuple[str, str]]:
        return [(f"{prefix}", f"{self.root}{prefix}") for prefix in ("/tmp/", "/opt/", "/home/")]

    def put(self, name: str, source: Path) -> Path:
        """``source`` in the working directory as ``name`` (a symlink)."""
        dest = self.cwd / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.symlink_to(source)
        return dest


def _scene(tmp_path: Path) -> Scene:
    scene = Scene(tmp_path)
    for sub in ("home/user", "tmp", "opt"):
        (tmp_path / sub).mkdir(parents=True)
    venv_bin = Path(sys.executable).parent
    scene.env = {"PATH": f"{venv_bin}:/usr/bin:/bin:/usr/sbin:/sbin", "HOME": str(scene.cwd),
                 "TERM": "dumb", "PYTHONUNBUFFERED": "1", "LC_ALL": "C.UTF-8", "COLUMNS": "100",
                 "TMPDIR": str(tmp_path / "tmp"), "SOURCE_DATE_EPOCH": "315532800"}
    return scene


# -- inputs (built once per run, read-only) ------------------------------------------------

@pytest.fixture(scope="session")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """NVIDIA-layout tarballs from the reference lists, and their trees."""
    if not have_compiler("x86_64"):
        pytest.skip("needs gcc (the reference trees hold small ELF files compiled here)")
    root = tmp_path_factory.mktemp("docinputs")
    made: dict[str, Path] = {}
    for pname, top in (("cuda_cudart", CUDART), ("libcublas", CUBLAS), ("cuda_nvrtc", NVRTC)):
        tree = tree_from_reference(TREES / f"{pname}.txt", root / "trees")
        assert tree.name == top
        made[top] = tree
        made[f"{top}.tar.xz"] = write_tarball(tree, root, "xz")
        made[f"{top}.tar.zst"] = write_tarball(tree, root, "zst")
    return made


# -- the scenes ----------------------------------------------------------------------------

def scene_readme(scene: Scene, inputs: dict[str, Path]) -> None:
    scene.put(f"{CUDART}.tar.xz", inputs[f"{CUDART}.tar.xz"])


def scene_tutorial(scene: Scene, inputs: dict[str, Path]) -> None:
    for name in ("fixtures", "nix", "rules", "cudasplit", "pyproject.toml", "README.md",
                 "LICENSE"):
        scene.put(name, REPO / name)
    nix_block = _blocks_of(DOCS / "tutorial.md", "nix")
    (scene.cwd / "demo.nix").write_text("\n".join(nix_block[0]) + "\n")
    if not _have_nixpkgs():
        scene.missing["lib=$(nix-build demo.nix"] = "needs <nixpkgs> on NIX_PATH"
        scene.missing['readelf -d "$lib"'] = "follows the nix-build above"
        scene.missing['nix-store -q --references "$lib"'] = "follows the nix-build above"


def scene_split_by_hand(scene: Scene, inputs: dict[str, Path]) -> None:
    scene.put(f"{CUDART}.tar.xz", inputs[f"{CUDART}.tar.xz"])
    shutil.copytree(inputs[CUDART], scene.cwd / CUDART, symlinks=True)
    scene.put("a.tar.xz", inputs[f"{CUDART}.tar.xz"])
    scene.put("b.tar.zst", inputs[f"{CUBLAS}.tar.zst"])
    scene.put(f"downloads/{CUDART}.tar.xz", inputs[f"{CUDART}.tar.xz"])
    scene.put(f"downloads/{CUBLAS}.tar.xz", inputs[f"{CUBLAS}.tar.xz"])
    scene.env["url"] = f"file://{inputs[f'{CUDART}.tar.xz']}"


def scene_repack(scene: Scene, inputs: dict[str, Path]) -> None:
    scene.put(f"{CUBLAS}.tar.xz", inputs[f"{CUBLAS}.tar.xz"])
    scene.put(f"{CUDART}.tar.xz", inputs[f"{CUDART}.tar.xz"])


def scene_nix_installphase(scene: Scene, inputs: dict[str, Path]) -> None:
    """A Nix builder's environment, as the page's ``cudasplit split "$src" --nix`` reads it."""
    out = scene.root / "nix/store/00000000000000000000000000000000-cuda_cudart-12.9.79"
    compat = scene.root / "nix/store/11111111111111111111111111111111-cuda_compat-12.9"
    (compat / "compat").mkdir(parents=True)
    scene.env.update({"src": str(inputs[f"{CUDART}.tar.xz"]), "outputs": "out", "out": str(out),
                      "cuda_compat": str(compat), "NIX_BUILD_TOP": str(scene.root / "tmp")})


def scene_packages(scene: Scene, inputs: dict[str, Path]) -> None:
    pass


# -- scenes on real NVIDIA bytes -------------------------------------------------------------

def _release_dir(scene: Scene, label: str, name: str) -> Path:
    """A release's tarballs under NVIDIA's names (``.tar.xz``: the bytes are plain tar, which
    cudasplit recognises by its magic bytes) and its manifest, naming them so."""
    from tests.support.releases import release

    rel = release(label)
    directory = scene.cwd / name
    directory.mkdir()
    for tarball in sorted(rel.tarballs.iterdir()):
        (directory / f"{tarball.name}.xz").symlink_to(tarball)
    text = rel.manifest.read_text().replace('-archive.tar"', '-archive.tar.xz"')
    (scene.cwd / rel.manifest.name).write_text(text)
    return directory


def scene_inspect_a_release(scene: Scene, inputs: dict[str, Path]) -> None:
    r129 = _release_dir(scene, "12.9.1", "r129")
    _release_dir(scene, "13.0.2", "r130")
    scene.put(f"{CUDART}.tar.xz", inputs[f"{CUDART}.tar.xz"])
    # dl/: a download of 12.9.1 gone wrong: one tarball altered, one cut short, one missing.
    dl = scene.cwd / "dl"
    dl.mkdir()
    for tarball in r129.iterdir():
        if not tarball.name.startswith(("cuda_cudart", "cuda_cupti", "libcurand")):
            (dl / tarball.name).symlink_to(tarball.resolve())
    cudart = bytearray(next(r129.glob("cuda_cudart-*")).read_bytes())
    cudart[5000] ^= 0xFF
    (dl / next(r129.glob("cuda_cudart-*")).name).write_bytes(cudart)
    with next(r129.glob("cuda_cupti-*")).open("rb") as whole:
        (dl / next(r129.glob("cuda_cupti-*")).name).write_bytes(whole.read(1 << 20))
    for manifest in [*(DATA / "manifests").glob("*.json"),
                     *(DATA / "manifests" / "synthetic").glob("*.json")]:
        if not (scene.cwd / manifest.name).exists():
            scene.put(manifest.name, manifest)


CMAKE_WHEEL = ("cmake", "4.4.5")  # CMake >= 4.3, the release the page is about


def scene_cross_compiling(scene: Scene, inputs: dict[str, Path]) -> None:
    """NVIDIA's 13.0 compiler packages and cudart for both targets, the page's prog.cu and
    CMakeLists.txt, CMake 4.4.5 from its wheel first on PATH."""
    from tests.support.realwheels import wheel_root
    from tests.support.wheeltrees import WHEELS_13, redist_tarball, top_name

    need("aarch64-linux-gnu-g++", "g++-aarch64-linux-gnu")
    need("qemu-aarch64", "qemu-user")
    for pname in ("cuda_nvcc", "libnvvm", "cuda_crt", "cuda_cccl", "cuda_cudart"):
        wheel = WHEELS_13[pname]
        scene.put(f"{top_name(pname, wheel.version)}.tar.xz", redist_tarball(pname, wheel))
    sbsa = redist_tarball("cuda_cudart", WHEELS_13["cuda_cudart"], platform="linux-sbsa")
    scene.put(f"{top_name('cuda_cudart', WHEELS_13['cuda_cudart'].version, 'linux-sbsa')}"
              ".tar.xz", sbsa)
    page = DOCS / "howto" / "cross-compiling.md"
    (scene.cwd / "prog.cu").write_text("\n".join(_blocks_of(page, "cuda")[0]) + "\n")
    (scene.cwd / "CMakeLists.txt").write_text("\n".join(_blocks_of(page, "cmake")[0]) + "\n")
    cmake = wheel_root(*CMAKE_WHEEL) / "cmake" / "data" / "bin"
    scene.env["PATH"] = f"{cmake}:{scene.env['PATH']}"


CUPY = ("cupy-cuda12x", "13.6.0")  # CuPy 13 still names libnvrtc in its ELF files


def _store_add(directory: Path) -> Path:
    """``directory`` added to the Nix store as it is (``nix-store --add``): a store path with
    the same name, whose bytes name the store paths they name."""
    done = subprocess.run(["nix-store", "--add", str(directory)], capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot add to the Nix store: {done.stderr.strip()[-200:]}")
    return Path(done.stdout.strip())


def _consumer_result(scene: Scene) -> Path:
    """A consumer in the Nix store, as ``nix-build`` leaves it behind ``./result``:
    ``bin/app`` NEEDs libfoo.so.1, and its RUNPATH names two store paths that both hold one,
    different files (ambiguous); ``share/ref`` names ``mid``, whose library names cuda_cudart's
    ``static`` output (a forbidden output in the run-time closure)."""
    from tests.support.builders import compile_executable, compile_shared

    build = scene.root / "build"
    libs = []
    for name, value in (("a", 1), ("b", 2)):
        compile_shared(build / name / "lib", "libfoo.so.1", f"int foo(void) {{ return {value}; }}",
                       soname="libfoo.so.1")
        libs.append(_store_add(build / name))
    static = build / "cuda_cudart-12.9.79-static"
    (static / "lib").mkdir(parents=True)
    (static / "lib" / "libcudart_static.a").write_bytes(b"!<arch>\n")
    static_path = _store_add(static)
    mid = build / "mid"
    (mid / "lib").mkdir(parents=True)
    (mid / "lib" / "libmid.so").write_text(f"-L{static_path}/lib -lcudart_static\n")
    mid_path = _store_add(mid)
    app = build / "app"
    compile_executable(app / "bin", "app", "int foo(void); int main(void) { return foo(); }",
                       needed_libs=[libs[0] / "lib" / "libfoo.so.1"],
                       runpath=":".join(f"{p}/lib" for p in libs))
    (app / "share").mkdir()
    (app / "share" / "ref").write_text(f"{mid_path}\n")
    return _store_add(app)


def scene_consumer_guards(scene: Scene, inputs: dict[str, Path]) -> None:
    from tests.support.realwheels import wheel_root

    need("nix-store", "nix-bin")  # the page's consumer is a store path
    (scene.cwd / "result").symlink_to(_consumer_result(scene))
    cupy = wheel_root(*CUPY)
    shutil.copytree(cupy, scene.cwd / cupy.name, symlinks=True)
    scene.put(f"{NVRTC}.tar.xz", inputs[f"{NVRTC}.tar.xz"])


def scene_conda_forge(scene: Scene, inputs: dict[str, Path]) -> None:
    """NVIDIA's CUDA 13.0 packages the page repacks, x86_64 and sbsa, under NVIDIA's names;
    the biggest with none of their libraries (the page packs at zstd level 10: what is packed
    is not tested here, tests/conda/ does it). The page's py-rattler examples run as printed:
    they index, solve and install from the folder (py-rattler's cache below the scene's
    HOME)."""
    pytest.importorskip("conda_package_streaming",
                        reason="conda-package-streaming not installed (cudasplit[conda])")
    pytest.importorskip("rattler", reason="py-rattler not installed (the page's examples)")
    from tests.conda.redist import CONDA_WHEELS, conda_tarball
    from tests.support.wheeltrees import top_name

    fewer = {"cuda_nvcc": 0, "cuda_nvrtc": 0, "libcublas": 0, "libnvvm": 0}
    for pname in ("cuda_cudart", "cuda_nvcc", "cuda_crt", "libnvvm", "libnvptxcompiler",
                  "cuda_cccl", "cuda_nvrtc", "libcublas"):
        tarball = conda_tarball(pname, keep_elf=fewer.get(pname))
        scene.put(f"{top_name(pname, CONDA_WHEELS[pname].version)}.tar.xz", tarball)
    for pname in ("cuda_cudart", "cuda_cccl", "cuda_nvcc", "cuda_crt", "libnvvm",
                  "libnvptxcompiler"):
        tarball = conda_tarball(pname, platform="linux-sbsa", keep_elf=fewer.get(pname))
        scene.put(f"{top_name(pname, CONDA_WHEELS[pname].version, 'linux-sbsa')}.tar.xz",
                  tarball)


def scene_nixpkgs_parity(scene: Scene, inputs: dict[str, Path]) -> None:
    """Every manifest of Nixpkgs' eight sets here (NVIDIA's, tests/data/manifests); in bad/, a
    13.4.2 manifest whose one package key is `lib`."""
    del inputs
    for manifest in (DATA / "manifests").glob("*.json"):
        scene.put(manifest.name, manifest)
    bad = scene.root / "bad-redistrib.json"
    bad.write_text('{"release_label": "13.4.2", "lib": {"version": "1.0", "linux-x86_64": '
                   '{"relative_path": "lib/x.tar.xz", "sha256": "' + "0" * 64 + '", '
                   '"size": "1"}}}')
    scene.put("bad/redistrib_13.4.2.json", bad)


SCENES: dict[str, Callable[[Scene, dict[str, Path]], None]] = {
    "docs/howto/conda-forge.md": scene_conda_forge,
    "docs/howto/consumer-guards.md": scene_consumer_guards,
    "docs/howto/inspect-a-release.md": scene_inspect_a_release,
    "docs/howto/cross-compiling.md": scene_cross_compiling,
    "README.md": scene_readme,
    "docs/tutorial.md": scene_tutorial,
    "docs/howto/split-by-hand.md": scene_split_by_hand,
    "docs/howto/repack.md": scene_repack,
    "docs/howto/nix-installphase.md": scene_nix_installphase,
    "docs/reference/packages.md": scene_packages,
    "docs/reference/nixpkgs-parity.md": scene_nixpkgs_parity,
    "docs/development.md": scene_packages,
}


def _rel(page: Path) -> str:
    return str(page.relative_to(REPO))


def _blocks_of(page: Path, lang: str) -> list[list[str]]:
    from tests.support.doccommands import fenced_blocks

    return [body for block_lang, _, body in fenced_blocks(page.read_text()) if block_lang == lang]


def _have_nixpkgs() -> bool:
    if shutil.which("nix-instantiate") is None:
        return False
    done = subprocess.run(["nix-instantiate", "--find-file", "nixpkgs"], capture_output=True,
                          check=False)
    return done.returncode == 0


def _excused(page: str, command: Command, scene: Scene) -> str | None:
    for start, why in (*NOT_RUN.get(page, {}).items(), *scene.missing.items()):
        if command.text.startswith(start):
            return why
    return None


# Which Debian package has a program the pages run (for the skip message).
PACKAGE_OF = {"readelf": "binutils", "nix-build": "nix-bin", "nix-store": "nix-bin",
              "qemu-aarch64": "qemu-user", "curl": "curl", "cmake": "cmake (or its PyPI wheel)"}
SHELL_WORDS = {"cd", "echo", "export", "false", "true", "ls", "mkdir", "cp", "ln", "rm", "sed",
               "tar", "python3", "(exit", "for", "do", "done"}


def _need_programs(blocks: list[Block], scene: Scene, rel: str) -> None:
    """A program a page runs that this machine lacks: skip naming its package (a failure under
    CUDASPLIT_REQUIRE_TOOLS), before anything runs."""
    for block in blocks:
        for command in block.commands:
            program = program_of(command.text)
            if (_excused(rel, command, scene) is not None or "/" in program
                    or program in SHELL_WORDS
                    or shutil.which(program, path=scene.env["PATH"]) is not None):
                continue
            need(program, PACKAGE_OF.get(program, program))


def run_page(page: Path, scene: Scene) -> None:
    rel = _rel(page)
    failures: list[str] = []
    not_run: list[str] = []
    blocks = page_blocks(page, python=rel in RUN_PYTHON)
    _need_programs(blocks, scene, rel)
    for block in blocks:
        skip = [c for c in block.commands if _excused(rel, c, scene) is not None]
        # NOT_RUN says why a command never runs here; scene.missing what this machine lacks.
        not_run += [f"{c.text[:60]} ({why})" for c in skip for start, why in
                    scene.missing.items() if c.text.startswith(start)]
        results = run_block(block, scene.cwd, scene.env, substitutions=scene.substitutions,
                            skip=skip)
        failures += problems(results, rel)
    assert failures == [], "\n\n".join(failures)
    if not_run:
        pytest.skip(f"{rel}: the other commands ran; not run here: " + "; ".join(not_run))


def _command_pages() -> Iterator[Path]:
    for page in PAGES:
        if any(block.commands for block in page_blocks(page)):
            yield page


COMMAND_PAGES = list(_command_pages())
REAL_PAGES = {"docs/howto/inspect-a-release.md", "docs/howto/cross-compiling.md",
              "docs/howto/consumer-guards.md", "docs/howto/conda-forge.md"}


@pytest.mark.parametrize("page", [p for p in COMMAND_PAGES if _rel(p) not in REAL_PAGES],
                         ids=_rel)
def test_page_commands_do_what_the_page_says(page: Path, tmp_path: Path,
                                             synthetic: dict[str, Path]) -> None:
    scene = _scene(tmp_path)
    SCENES[_rel(page)](scene, synthetic)
    run_page(page, scene)


@pytest.mark.realbytes
@pytest.mark.slow
@pytest.mark.parametrize("page", [p for p in COMMAND_PAGES if _rel(p) in REAL_PAGES], ids=_rel)
def test_page_commands_on_real_nvidia_bytes(page: Path, tmp_path: Path,
                                            synthetic: dict[str, Path]) -> None:
    scene = _scene(tmp_path)
    SCENES[_rel(page)](scene, synthetic)
    run_page(page, scene)


def test_every_page_with_commands_has_a_scene() -> None:
    assert sorted(_rel(p) for p in COMMAND_PAGES) == sorted(SCENES)


def test_command_blocks_are_labelled() -> None:
    """A plain fenced block that starts with a command would never run: label it sh/console."""
    bad = [f"{_rel(page)}:{line}" for page in PAGES for line in unlabelled_command_blocks(page)]
    assert bad == []


def test_every_excuse_names_a_command_of_its_page() -> None:
    for rel, excuses in NOT_RUN.items():
        commands = [c.text for block in page_blocks(REPO / rel) for c in block.commands]
        for start in excuses:
            assert any(text.startswith(start) for text in commands), (rel, start)



@pytest.mark.parametrize("page", [p for p in PAGES if _blocks_of(p, "python")
                                  and p.name != "api.md"], ids=_rel)
def test_python_examples_compile(page: Path) -> None:
    """The Python examples of a page are read by people, not run (they name tarballs and
    Nix builders the reader has): each at least compiles."""
    for body in _blocks_of(page, "python"):
        compile("\n".join(body) + "\n", f"{_rel(page)}", "exec")
