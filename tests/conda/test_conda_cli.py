"""The command line of the conda-forge profile: ``split --profile``, ``repack --format conda``,
``rules show --profile``, and the one-line errors for what does not go together."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from cudasplit.cli import main
from tests.conda.synthetic import cudart_tarball


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def tarball(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cudart_tarball(tmp_path_factory.mktemp("cudart"))


def test_split_writes_one_directory_per_conda_package(tarball: Path, tmp_path: Path) -> None:
    code, stdout, stderr = invoke("split", str(tarball), "--profile", "conda-forge",
                                  "-o", str(tmp_path / "out"))
    assert code == 0, stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "cuda-cudart", "cuda-cudart-dev", "cuda-cudart-dev_linux-64", "cuda-cudart-static",
        "cuda-cudart-static_linux-64", "cuda-cudart_linux-64", "cuda-driver-dev",
        "cuda-driver-dev_linux-64"]
    assert "cuda-cudart_linux-64" in stdout


def test_repack_writes_a_channel(tarball: Path, tmp_path: Path) -> None:
    pytest.importorskip("conda_package_streaming", reason="conda-package-streaming not installed")
    code, stdout, stderr = invoke("repack", str(tarball), "--profile", "conda-forge",
                                  "--format", "conda", "--level", "3", "-o", str(tmp_path / "ch"))
    assert code == 0, stderr
    written = [Path(line) for line in stdout.splitlines()]
    assert {p.parent.name for p in written} == {"linux-64", "noarch"}
    assert all(p.suffix == ".conda" and p.is_file() for p in written)


@pytest.mark.parametrize(("args", "message"), [
    (("repack", "{src}", "--format", "conda", "-o", "{out}"), "give one (--profile conda-forge)"),
    (("repack", "{src}", "--profile", "conda-forge", "--format", "conda", "--prefix", "/opt/x",
      "-o", "{out}"), "an unpack prefix (--prefix) does not apply to the conda format "
      "(--format conda)"),
    (("split", "{src}", "--profile", "debian", "-o", "{out}"), "profile must be one of"),
    (("split", "{src}", "--profile", "conda-forge", "--outputs", "lib", "-o", "{out}"),
     "unknown output(s) 'lib' for this package in profile conda-forge"),
])
def test_what_does_not_go_together_is_one_line_and_exit_2(
        tarball: Path, tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    out = tmp_path / "out"
    code, _stdout, stderr = invoke(*(a.format(src=tarball, out=out) for a in args))
    assert code == 2 and message in stderr and stderr.count("\n") == 1, stderr
    assert not out.exists()


def test_rules_show_fills_a_profiles_platform(tmp_path: Path) -> None:
    code, stdout, stderr = invoke("rules", "show", "--profile", "conda-forge", "--package",
                                  "cuda_cudart", "--platform", "linux-sbsa")
    assert code == 0, stderr
    assert 'relocate = "targets/sbsa-linux/"' in stdout and "cuda-cudart_linux-aarch64" in stdout
    code, _stdout, stderr = invoke("rules", "show", "--profile", "conda-forge", "--package",
                                   "cuda_cudart")
    assert code == 2 and "needs the platform" in stderr


def test_rules_check_reads_a_package_file_over_its_profile() -> None:
    from cudasplit._rulebook import default_rules_dir

    package = default_rules_dir() / "profiles/conda-forge/packages/cuda_nvcc.toml"
    code, stdout, stderr = invoke("rules", "check", "--profile", "conda-forge", "--platform",
                                  "linux-sbsa", str(package))
    assert code == 0 and stdout.endswith(": ok\n"), stderr
    code, _stdout, stderr = invoke("rules", "check", str(package))  # without its profile
    assert code == 2 and "unknown or missing output" in stderr
