"""cuda-nvcc_<platform>'s activation scripts (our own, rules/profiles/conda-forge/scripts/), sourced
by a shell as a conda client's activation sources them: the flags they set, and deactivation
giving every variable back as it was (set, empty or unset). The real environment, installed by
py-rattler and compiling the feedstock's tests, is tests/conda/test_real_channel.py's."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from cudasplit._release.conda import conda_profile, outputs_for
from cudasplit._rulebook import default_rules_dir

NAMES = ("CFLAGS", "CPPFLAGS", "CXXFLAGS", "LDFLAGS", "NVCC_PREPEND_FLAGS")
# What a user's shell might hold before activation: spaces, quotes, a '$', an empty value.
BEFORE = {"CFLAGS": '-O2 -DX="a b" $HOME', "CXXFLAGS": "", "LDFLAGS": "-L/opt/x"}
ACTIVATE = "etc/conda/activate.d/~cuda-nvcc_activate.sh"
DEACTIVATE = "etc/conda/deactivate.d/~cuda-nvcc_deactivate.sh"


def _prefix(tmp_path: Path, platform: str = "linux-x86_64") -> Path:
    """A prefix holding cuda-nvcc_<platform>'s two scripts, as the package installs them."""
    profile = conda_profile(default_rules_dir(), "conda-forge", platform)
    output = next(o for o in outputs_for(profile.recipes, "cuda_nvcc", platform)
                  if o.scripts)
    assert output.name == f"cuda-nvcc_{profile.target_platform}"
    prefix = tmp_path / "env"
    for dest, text in output.scripts:
        (prefix / dest).parent.mkdir(parents=True, exist_ok=True)
        (prefix / dest).write_text(text)
    assert {dest for dest, _ in output.scripts} == {ACTIVATE, DEACTIVATE}
    return prefix


def _run(shell: str, prefix: Path, script: str, cxx: str | None = "g++") -> dict[str, str | None]:
    """``script`` run by ``shell`` with :data:`BEFORE` set; each variable afterwards (``None``:
    unset), and whether anything the scripts use for themselves is left behind."""
    env = {"PATH": "/usr/bin:/bin", "CONDA_PREFIX": str(prefix), "HOME": "/home/user", **BEFORE}
    if cxx is not None:
        env["CXX"] = cxx
    report = "".join(
        f'if [ -n "${{{n}+x}}" ]; then printf "%s=%s\\n" {n} "${n}"; else echo {n}; fi; '
        for n in NAMES)
    report += 'set | grep -ci "^_cudasplit" || true'
    done = subprocess.run([shell, "-c", f"{script}\n{report}"], env=env, capture_output=True,
                          text=True, check=True)
    lines = done.stdout.splitlines()
    values: dict[str, str | None] = {}
    for line in lines[:-1]:
        name, eq, value = line.partition("=")
        values[name] = value if eq else None
    values["leftovers"] = lines[-1]
    return values


SHELLS = [s for s in ("bash", "dash", "zsh") if shutil.which(s)]


@pytest.mark.parametrize("shell", SHELLS)
def test_activation_adds_the_targets_flags_and_ccbin(shell: str, tmp_path: Path) -> None:
    prefix = _prefix(tmp_path)
    got = _run(shell, prefix, f'. "{prefix}/{ACTIVATE}"')
    t = f"{prefix}/targets/x86_64-linux"
    cflags = f"-I{t}/include -I{t}/include/cccl"
    assert got == {
        "CFLAGS": f"{BEFORE['CFLAGS']} {cflags}", "CPPFLAGS": cflags, "CXXFLAGS": cflags,
        "LDFLAGS": f"-L/opt/x -L{t}/lib -L{t}/lib/stubs", "NVCC_PREPEND_FLAGS": "-ccbin=g++",
        "leftovers": "5"}   # the five saved values, for deactivation


@pytest.mark.parametrize("shell", SHELLS)
def test_deactivation_gives_every_variable_back(shell: str, tmp_path: Path) -> None:
    prefix = _prefix(tmp_path)
    activate, deactivate = f'. "{prefix}/{ACTIVATE}"', f'. "{prefix}/{DEACTIVATE}"'
    for script in (f"{activate}\n{deactivate}",
                   f"{activate}\n{activate}\n{deactivate}",      # twice, then once
                   deactivate):                                   # never activated
        got = _run(shell, prefix, script)
        assert got == {**dict.fromkeys(NAMES), **BEFORE, "leftovers": "0"}, script


def test_without_a_cxx_nvcc_keeps_its_own_host_compiler(tmp_path: Path) -> None:
    prefix = _prefix(tmp_path)
    got = _run("bash", prefix, f'. "{prefix}/{ACTIVATE}"', cxx=None)
    assert got["NVCC_PREPEND_FLAGS"] is None and got["CPPFLAGS"] is not None


def test_the_sbsa_scripts_name_the_sbsa_targets(tmp_path: Path) -> None:
    prefix = _prefix(tmp_path, "linux-sbsa")
    got = _run("bash", prefix, f'. "{prefix}/{ACTIVATE}"')
    assert got["LDFLAGS"] == (f"-L/opt/x -L{prefix}/targets/sbsa-linux/lib "
                              f"-L{prefix}/targets/sbsa-linux/lib/stubs")
