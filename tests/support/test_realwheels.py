"""The wheel cache (tests/support/realwheels.py): offline is decided once per run."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support import realwheels

# Called through a name of its own: these tests use no real bytes (not marked realbytes).
fetch = realwheels.wheel_file


def test_offline_is_decided_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first download that cannot connect marks the run offline; the next uncached wheel
    skips at once, naming why, without asking pip again."""
    monkeypatch.setenv("CUDASPLIT_CACHE", str(tmp_path))
    monkeypatch.delenv("CUDASPLIT_REQUIRE_WHEELS", raising=False)
    monkeypatch.delenv("CUDASPLIT_OFFLINE", raising=False)
    for proxy in ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY"):
        monkeypatch.setenv(proxy, "http://127.0.0.1:9")  # nothing listens: no network
    monkeypatch.setattr(realwheels, "_USAGE", realwheels.Usage())
    said: list[str] = []
    monkeypatch.setattr(realwheels, "say", said.append)
    with pytest.raises(pytest.skip.Exception, match="cannot download nvidia-curand-cu12"):
        fetch("nvidia-curand-cu12", "10.3.10.19")
    assert realwheels.usage().offline is not None
    assert any("no network" in line for line in said)

    def no_pip(*_: object, **__: object) -> tuple[int, str]:
        raise AssertionError("pip asked again after the run was found offline")

    monkeypatch.setattr(realwheels, "_pip_download", no_pip)
    started = time.monotonic()
    with pytest.raises(pytest.skip.Exception, match="this run is offline"):
        fetch("nvidia-cufft-cu12", "11.4.1.4")
    assert time.monotonic() - started < 1


def test_cached_wheels_are_counted_as_used(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDASPLIT_CACHE", str(tmp_path))
    monkeypatch.setattr(realwheels, "_USAGE", realwheels.Usage())
    wheel = tmp_path / "wheels" / "nvidia_x-1.0-py3-none-manylinux2014_x86_64.whl"
    wheel.parent.mkdir()
    wheel.write_bytes(b"PK" * 10)
    assert fetch("nvidia-x", "1.0") == wheel
    assert realwheels.usage().used == {wheel.name: 20}
    assert realwheels.usage().downloaded == {}
