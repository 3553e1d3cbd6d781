"""Session-wide test inputs built in code by :mod:`tests.support.builders` (no network).

The session fixtures are shared by every test: treat what they return as read-only. A test
that modifies a tree asks for ``fresh_redist_tree`` (its own copy; compiled artifacts come
from the builders' session cache, so this costs only file copies).
"""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path

import pytest
from hypothesis import settings

from tests.support.builders import (
    COMPRESSIONS,
    REFERENCE_DATA_DIR,
    Compression,
    build_redist_tree,
    tree_from_reference,
    write_tarball,
)

# Property tests have no wall-clock deadline: a loaded machine (a CPU hog on every core, or
# five test runs on two) made an example take 364 ms against Hypothesis' default 200 ms, and
# the suite failed for the load, not for the code. Loaded here, before any test module builds
# its own settings (which inherit this profile's). tests/test_hypothesis_settings.py checks
# that no test sets a deadline of its own.
settings.register_profile("cudasplit", deadline=None)
settings.load_profile("cudasplit")


@pytest.fixture(scope="session")
def redist_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default demo tree: ``.../cuda_demo-linux-x86_64-12.9.79-archive`` (read-only)."""
    return build_redist_tree(tmp_path_factory.mktemp("redist"))


@pytest.fixture
def fresh_redist_tree(tmp_path: Path) -> Path:
    """A private default demo tree that the test may modify."""
    return build_redist_tree(tmp_path)


@pytest.fixture(scope="session")
def redist_tarballs(
    tmp_path_factory: pytest.TempPathFactory, redist_tree: Path
) -> dict[Compression, Path]:
    """The default tree as a tarball per compression (``xz``, ``xz-multiblock``, ``gz``,
    ``bz2``, ``zst``, ``none``), each named like NVIDIA's (``<top>.tar.xz`` ...) in its own
    directory."""
    root = tmp_path_factory.mktemp("tarballs")
    tarballs: dict[Compression, Path] = {}
    for compression in COMPRESSIONS:
        (root / compression).mkdir()
        tarballs[compression] = write_tarball(redist_tree, root / compression, compression)
    return tarballs


@pytest.fixture(scope="session")
def reference_tree_lists() -> dict[str, Path]:
    """The reference member lists (``tests/data/trees/*.txt``) by package name."""
    return {path.stem: path for path in sorted(REFERENCE_DATA_DIR.glob("*.txt"))}


@pytest.fixture(scope="session")
def reference_trees(
    tmp_path_factory: pytest.TempPathFactory, reference_tree_lists: dict[str, Path]
) -> dict[str, Path]:
    """Each reference list built into a tree (top directory path, read-only)."""
    root = tmp_path_factory.mktemp("reference")
    return {name: tree_from_reference(path, root) for name, path in reference_tree_lists.items()}


# Real NVIDIA bytes: a test that reaches the wheel cache (directly, through a fixture, or
# through a helper of its own module) is marked ``realbytes`` and ``slow``, so that
# ``pytest -m "not slow"`` is the quick everyday run and needs no network; the README's full
# command runs them (downloading into ~/.cache/cudasplit on first use).
_REAL_BYTES = re.compile(r"\b(wheel_root|wheel_file|cu12|cu13|redist_tarball|real_tarball)\(")

_RELEASES = "tests.support.releases"  # release(label): real wheels as redist tarballs


def _source_of(obj: object) -> str:
    try:
        return inspect.getsource(obj)  # type: ignore[arg-type]
    except (OSError, TypeError):
        return ""


def _reaches_real_bytes(item: pytest.Function) -> bool:
    sources = [_source_of(item.function)]
    info = getattr(item, "_fixtureinfo", None)
    for defs in (info.name2fixturedefs.values() if info else ()):
        sources += [_source_of(d.func) for d in defs]
    module = item.module
    helpers = {name for text in sources for name in re.findall(r"\b(_?\w+)\(", text)}
    sources += [_source_of(getattr(module, name)) for name in helpers
                if inspect.isfunction(getattr(module, name, None))
                and getattr(module, name).__module__ == module.__name__]
    from_releases = getattr(getattr(module, "release", None), "__module__", "") == _RELEASES
    return any(_REAL_BYTES.search(text) or (from_releases and "release(" in text)
               for text in sources)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if isinstance(item, pytest.Function) and _reaches_real_bytes(item):
            item.add_marker(pytest.mark.realbytes)
            item.add_marker(pytest.mark.slow)


# Real NVIDIA wheels: a download says so on the terminal as it goes (pytest would show dots for
# minutes), past pytest's output capture; the run ends with what the cache gave and took.
def pytest_configure(config: pytest.Config) -> None:
    from tests.support import realwheels

    def say(line: str) -> None:
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        capture = config.pluginmanager.get_plugin("capturemanager")
        if reporter is None or capture is None:
            print(line, file=sys.stderr, flush=True)
            return
        with capture.global_and_fixture_disabled():
            reporter.ensure_newline()
            reporter.write_line(line)

    realwheels.say = say


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    from tests.support.realwheels import cache_dir, usage

    used = usage()
    if not used.used and used.offline is None:
        return
    gb = 1e9
    line = (f"real NVIDIA wheels: {len(used.used)} used ({sum(used.used.values()) / gb:.2f} GB)"
            f", {len(used.downloaded)} downloaded this run "
            f"({sum(used.downloaded.values()) / gb:.2f} GB in {used.download_seconds:.0f} s); "
            f"cache {cache_dir()}")
    terminalreporter.write_sep("-", "wheel cache")
    terminalreporter.write_line(line)
    if used.offline is not None:
        terminalreporter.write_line(f"offline: {used.offline}; the tests that needed an "
                                    "uncached wheel were skipped")
