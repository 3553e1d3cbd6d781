"""Start-up (issue 34): a command loads what it uses and nothing else, and a split starts
decoding before it loads the rest of itself. Which modules, not how long: timing is the
benchmark's (benchmarks/bench_scaling.py --only startup).
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

import cudasplit
from cudasplit.cli._main import COMMANDS, main
from tests.support.paths import REPO

SAMPLE = REPO / "fixtures" / "cuda_sample-linux-x86_64-12.9.79-archive.tar.xz"
# Loaded by no split: release tools, consumer guards, the manifest tables, the tarball writer,
# the other commands' modules, LIEF and JSON Schema.
NEVER_IN_A_SPLIT = ("cudasplit._release", "cudasplit._api.release", "cudasplit._api.checks",
                    "cudasplit._api.guards", "cudasplit._sinks.tarball", "cudasplit._sinks.tarpack",
                    "cudasplit.cli._verify", "cudasplit.cli._features", "cudasplit.cli._closure",
                    "cudasplit.cli._nixify", "cudasplit.cli._diff", "cudasplit.cli._ldd",
                    "cudasplit.cli._toolkit", "cudasplit.cli._repack", "cudasplit.cli._nix",
                    "cudasplit.cli._inspect", "cudasplit.cli._explain", "cudasplit.cli._rules",
                    "cudasplit.cli._sbom", "cudasplit.cli._gpu_plan", "cudasplit.rules",
                    "cudasplit.releases", "cudasplit.nixify", "cudasplit.outputs",
                    "cudasplit.guards", "cudasplit.elf", "cudasplit.sbom",
                    "lief", "jsonschema", "multiprocessing", "tarfile")


def _modules_after(args: list[str], cwd: Path) -> list[str]:
    """The modules ``cudasplit ARGS`` leaves imported (run in a fresh interpreter)."""
    code = ("import json, runpy, sys\n"
            f"sys.argv = ['cudasplit', *{args!r}]\n"
            "try:\n    runpy.run_module('cudasplit', run_name='__main__')\n"
            "except SystemExit as exc:\n    assert not exc.code, exc.code\n"
            "sys.stdout.flush()\n"
            "print('\\n' + json.dumps(sorted(sys.modules)))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True,
                          text=True, timeout=120, env=_env())
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


def _env() -> dict[str, str]:
    import os
    return {**os.environ, "PYTHONPATH": str(REPO)}


def _ours(modules: list[str]) -> set[str]:
    return {m for m in modules if m.startswith("cudasplit")}


def test_version_loads_the_entry_and_not_even_click(tmp_path: Path) -> None:
    modules = _modules_after(["--version"], tmp_path)
    assert _ours(modules) <= {"cudasplit", "cudasplit.__main__", "cudasplit._launch",
                              "cudasplit._lazy", "cudasplit.cli"}, modules
    assert "click" not in modules


def test_version_says_what_click_would_say(tmp_path: Path) -> None:
    fast = subprocess.run([sys.executable, "-m", "cudasplit", "--version"], cwd=tmp_path,
                          capture_output=True, text=True, env=_env(), check=True)
    through_click = subprocess.run(
        [sys.executable, "-c", "import sys; sys.argv = ['cudasplit', '--version']\n"
         "from cudasplit.cli._main import run; run()"], cwd=tmp_path, capture_output=True,
        text=True, env=_env(), check=True)
    assert fast.stdout == through_click.stdout == f"cudasplit, version {cudasplit.__version__}\n"


def test_split_help_loads_the_options_and_nothing_of_the_split(tmp_path: Path) -> None:
    loaded = _ours(_modules_after(["split", "--help"], tmp_path))
    assert "cudasplit.cli._split" in loaded
    heavy = sorted(m for m in loaded if m.startswith((
        "cudasplit._api", "cudasplit._split", "cudasplit._source", "cudasplit._elf",
        "cudasplit._rulebook", "cudasplit._nix", "cudasplit._release", "cudasplit._sinks")))
    assert heavy == []


def test_a_split_loads_no_release_tool_guard_or_other_command(tmp_path: Path) -> None:
    modules = _modules_after(["split", "-q", str(SAMPLE), "-o", str(tmp_path / "out")],
                             tmp_path)
    assert (tmp_path / "out" / "lib").is_dir()  # it did split
    assert "cudasplit._split.pipeline" in modules
    assert sorted(m for m in modules if m.startswith(NEVER_IN_A_SPLIT)) == []


# What a split loads once its decoder runs: the pipeline, the rules, the ELF reader, planner
# and writer, the Nix environment, the sinks.
LOADED_WHILE_DECODING = ("cudasplit._split.pipeline", "cudasplit._rulebook", "cudasplit._elf.read",
                         "cudasplit._elf.plan.planner", "cudasplit._elf.patch", "cudasplit._nix",
                         "cudasplit._sinks")


def test_decoding_starts_before_the_pipeline_is_loaded(tmp_path: Path) -> None:
    code = ("import sys\n"
            "import cudasplit\n"
            f"LATER = {LOADED_WHILE_DECODING!r}\n"
            "from cudasplit._source import TarSource\n"
            "start = TarSource.start\n"
            "seen = []\n"
            "def spy(self):\n"
            "    seen.append(sorted(m for m in LATER if m in sys.modules))\n"
            "    start(self)\n"
            "TarSource.start = spy\n"
            f"cudasplit.split_to_dir({str(SAMPLE)!r}, {str(tmp_path / 'out')!r})\n"
            "print(seen)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env=_env())
    assert done.returncode == 0, done.stderr
    # Started before any of them loaded (members() asks again later: nothing to do then).
    assert done.stdout.startswith("[[], "), done.stdout


def test_the_version_option_says_the_installed_version() -> None:
    assert cudasplit.__version__ == version("cudasplit")


# -- the lazy public API: one home per name ---------------------------------------------------


def test_a_public_name_loads_its_home_only() -> None:
    code = ("import sys, cudasplit\n"
            "before = {m for m in sys.modules if m.startswith('cudasplit')}\n"
            "cudasplit.CudasplitError\n"
            "after = {m for m in sys.modules if m.startswith('cudasplit')}\n"
            "print(sorted(before), sorted(after - before))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env=_env(), cwd=REPO)
    assert done.stdout.split("\n")[0] == "['cudasplit', 'cudasplit._lazy'] ['cudasplit.errors']", \
        done.stderr


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_loads_under_its_name(name: str) -> None:
    assert main.commands[name].name == name
