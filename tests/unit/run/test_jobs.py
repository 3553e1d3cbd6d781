"""One meaning of ``--jobs`` (issue 34): the most cores a command keeps busy; 0 or unset is every
CPU the process may use, the smallest of its affinity mask, its cgroup CPU quota and
``NIX_BUILD_CORES``. And the core budget a batch shares, whose turns never overtake."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from cudasplit import OptionsError, OptionsTypeError, SplitOptions
from cudasplit._run import Cores, available_cpus, cgroup_cpu_limit, check_jobs, resolve_jobs

AFFINITY = len(os.sched_getaffinity(0))


def _cgroup_v2(tmp_path: Path, path: str, limits: dict[str, str]) -> tuple[Path, Path]:
    """A fake /sys/fs/cgroup (``limits``: cgroup path -> cpu.max) and /proc/self/cgroup."""
    root = tmp_path / "cgroup"
    for where, text in limits.items():
        directory = root / where.strip("/")
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "cpu.max").write_text(text + "\n")
    (root / path.strip("/")).mkdir(parents=True, exist_ok=True)
    self_cgroup = tmp_path / "self-cgroup"
    self_cgroup.write_text(f"0::{path}\n")
    return root, self_cgroup


@pytest.mark.parametrize(("cpu_max", "cpus"), [
    ("max 100000", None),          # no quota
    ("100000 100000", 1),          # one CPU
    ("150000 100000", 2),          # 1.5 CPUs: rounded up, never 0
    ("50000 100000", 1),           # half a CPU is still one job
    ("800000 100000", 8),
    ("garbage", None), ("0 100000", None), ("100000 0", None),  # never fails a run
])
def test_the_cgroup_v2_quota_in_cpus(tmp_path: Path, cpu_max: str, cpus: int | None) -> None:
    root, self_cgroup = _cgroup_v2(tmp_path, "/", {"/": cpu_max})
    assert cgroup_cpu_limit(root, self_cgroup) == cpus


def test_the_tightest_quota_of_the_cgroup_and_its_parents(tmp_path: Path) -> None:
    root, self_cgroup = _cgroup_v2(tmp_path, "/system.slice/build.scope", {
        "/": "max 100000", "/system.slice": "300000 100000",
        "/system.slice/build.scope": "max 100000"})
    assert cgroup_cpu_limit(root, self_cgroup) == 3
    assert available_cpus({}, cgroup_root=root, self_cgroup=self_cgroup) == min(3, AFFINITY)


def test_the_cgroup_v1_quota(tmp_path: Path) -> None:
    root = tmp_path / "cgroup"
    controller = root / "cpu,cpuacct" / "docker" / "abc"
    controller.mkdir(parents=True)
    (controller / "cpu.cfs_quota_us").write_text("100000\n")
    (controller / "cpu.cfs_period_us").write_text("100000\n")
    self_cgroup = tmp_path / "self-cgroup"
    self_cgroup.write_text("12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n")
    assert cgroup_cpu_limit(root, self_cgroup) == 1
    (controller / "cpu.cfs_quota_us").write_text("-1\n")  # no quota
    assert cgroup_cpu_limit(root, self_cgroup) is None


def test_no_cgroup_files_is_no_quota(tmp_path: Path) -> None:
    assert cgroup_cpu_limit(tmp_path / "none", tmp_path / "none-either") is None


def test_nix_build_cores_caps_and_zero_means_all(tmp_path: Path) -> None:
    root, self_cgroup = _cgroup_v2(tmp_path, "/", {"/": "max 100000"})

    def cpus(env: dict[str, str]) -> int:
        return available_cpus(env, cgroup_root=root, self_cgroup=self_cgroup)

    assert cpus({"NIX_BUILD_CORES": "1"}) == 1
    assert cpus({"NIX_BUILD_CORES": "0"}) == AFFINITY   # 0: all the builder may use
    assert cpus({"NIX_BUILD_CORES": "4096"}) == AFFINITY  # never more than the mask
    assert cpus({"NIX_BUILD_CORES": "four"}) == AFFINITY  # not a number: ignored
    assert cpus({}) == AFFINITY


def test_one_meaning_of_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NIX_BUILD_CORES", "1")
    assert resolve_jobs(None) == resolve_jobs(0) == available_cpus() == 1
    assert resolve_jobs(3) == 3  # asked for: given, even past the CPUs (as make -j)
    assert SplitOptions().effective_jobs() == SplitOptions(jobs=0).effective_jobs() == 1
    assert SplitOptions(jobs=5).effective_jobs() == 5


@pytest.mark.parametrize(("value", "error"), [
    (-1, OptionsError), (1.5, OptionsTypeError), ("4", OptionsTypeError),
    (True, OptionsTypeError),
])
def test_a_wrong_jobs_value_names_the_field(value: object, error: type[Exception]) -> None:
    with pytest.raises(error, match="jobs"):
        check_jobs(value)
    with pytest.raises(error, match="jobs"):
        SplitOptions(jobs=value)  # type: ignore[arg-type]


# -- a budget of cores, in turns -------------------------------------------------------------


def test_a_turn_waits_for_the_earlier_turns_even_when_its_cores_are_free() -> None:
    cores = Cores(8)
    started: list[int] = []

    def source(turn: int) -> None:
        with cores.take(1, turn):
            started.append(turn)
            time.sleep(0.05)

    # Asked in reverse order, started in turn order: which thread asks first does not matter.
    threads = [threading.Thread(target=source, args=(turn,)) for turn in (3, 2, 1)]
    for thread in threads:
        thread.start()
    time.sleep(0.1)
    assert started == []  # turn 0 has not come: nobody starts
    source(0)
    for thread in threads:
        thread.join()
    assert started == [0, 1, 2, 3]


def test_a_turn_that_does_not_fit_holds_back_the_later_ones() -> None:
    cores = Cores(4)
    log: list[str] = []
    with cores.take(3, 0):
        big = threading.Thread(target=lambda: _hold(cores, 4, 1, log, "big"))
        small = threading.Thread(target=lambda: _hold(cores, 1, 2, log, "small"))
        big.start()
        small.start()
        time.sleep(0.1)
        assert log == []  # one core is free, but "small" comes after "big"
    big.join()
    small.join()
    assert log == ["big", "small"]


def _hold(cores: Cores, want: int, turn: int, log: list[str], name: str) -> None:
    with cores.take(want, turn):
        log.append(name)
