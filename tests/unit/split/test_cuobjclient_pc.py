"""libcuobjclient's ``.pc``: ``Requires: cufile-X.Y`` always and, from CUDA 13.4 (whose
cuobjextrc_types.h includes infiniband/verbs.h), ``libibverbs``, rdma-core's module, as
Nixpkgs' libcuobjclient.nix writes it (the package table's ``requires_modules``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudasplit import SplitOptions, split_to_dir
from cudasplit._rulebook import build_ruleset
from cudasplit.errors import RulesError
from tests.support.tarutil import tar_bytes

PC = """prefix=${pcfiledir}/../..
cudaroot=${prefix}
libdir=${prefix}/lib
includedir=${prefix}/include

Name: cuobjclient
Description: cuObject client
Version: 1.0
Libs: -L${libdir} -lcuobjclient
Cflags: -I${includedir}
"""


@pytest.mark.parametrize(("release", "modules"), [("13.3", ["cufile-13.3"]),
                                                  ("13.4", ["cufile-13.4", "libibverbs"])])
def test_requires(tmp_path: Path, release: str, modules: list[str]) -> None:
    top = "libcuobjclient-linux-x86_64-1.3.1.55-archive"
    tarball = tmp_path / f"{top}.tar"
    tarball.write_bytes(tar_bytes([("file", "include/cuobjclient.h", b"int x;\n"),
                                   ("file", f"pkg-config/cuobjclient-{release}.pc",
                                    PC.encode())], top=top))
    split_to_dir(tarball, tmp_path / "out", SplitOptions(patch=False, cuda_version=release))
    pc = (tmp_path / "out/dev/share/pkgconfig" / f"cuobjclient-{release}.pc").read_text()
    (line,) = [x for x in pc.splitlines() if x.startswith("Requires:")]
    assert [m.strip() for m in line.removeprefix("Requires:").split(",")] == modules


def test_requires_modules_must_be_strings() -> None:
    with pytest.raises(RulesError, match="requires_modules"):
        build_ruleset([("t.toml", {"package": {"pkgconfig_edits": [
            {"files": ["x-*.pc"], "requires_modules": [1]}]}})])
