"""Errors of the public API derive from CudasplitError, and keep their builtin meaning where a
caller may already catch that: ``directory_kind`` of a missing path is a FileNotFoundError,
``Report.member`` of an unknown path a KeyError (both used to be the bare builtins)."""

from __future__ import annotations

from pathlib import Path

import pytest

import cudasplit
from cudasplit import (
    CudasplitError,
    NotFoundError,
    SourceError,
    SourceNotADirectoryError,
    SourceNotFoundError,
    directory_kind,
)
from tests.support.public import public


def test_directory_kind_of_what_is_not_a_directory(tmp_path: Path) -> None:
    with pytest.raises(SourceNotFoundError) as missing:
        directory_kind(tmp_path / "nowhere")
    assert isinstance(missing.value, FileNotFoundError | SourceError | CudasplitError)
    assert str(missing.value) == f"{tmp_path / 'nowhere'}: No such file or directory"
    (tmp_path / "file").write_text("x")
    with pytest.raises(SourceNotADirectoryError) as file:
        directory_kind(tmp_path / "file")
    assert isinstance(file.value, NotADirectoryError) and isinstance(file.value, CudasplitError)
    assert file.value.exit_code == 2


def test_report_member_of_an_unknown_path(redist_tree: Path) -> None:
    report = cudasplit.inspect(redist_tree)
    first = report.members[0].path
    assert report.member(first).path == first
    with pytest.raises(NotFoundError) as unknown:
        report.member("no/such/member")
    assert isinstance(unknown.value, KeyError) and isinstance(unknown.value, CudasplitError)
    assert str(unknown.value).startswith("no member 'no/such/member' in the report of ")
    with pytest.raises(KeyError):  # what callers caught before still works
        report.member("no/such/member")


def test_manifest_package_of_an_unknown_name(tmp_path: Path) -> None:
    manifest = tmp_path / "redistrib_1.0.json"
    manifest.write_text('{"release_label": "1.0", "cuda_cudart": {"name": "x", "version": '
                        '"1.0", "linux-x86_64": {"relative_path": "a.tar.xz", "sha256": "' + '0' * 64 + '",'
                        ' "md5": "' + '0' * 32 + '", "size": "1"}}}')
    loaded = cudasplit.releases.load_manifest(manifest)
    assert loaded.package("cuda_cudart").version == "1.0"
    with pytest.raises(NotFoundError, match="no package 'libcublas'"):
        loaded.package("libcublas")


@pytest.mark.parametrize(("name", "more"), [
    ("ambiguous_runpaths", ()), ("closure_budget", ()), ("dlopen_audit", ()), ("ldd", ()),
    ("gpu_prune_plan", ("8.0",))])
def test_readers_of_a_missing_path_raise_what_they_document(tmp_path: Path, name: str,
                                                            more: tuple[str, ...]) -> None:
    """Issue 43: the guards documented OutputError and raised SourceError; gpu_prune_plan
    raised a bare FileNotFoundError. Each reads its path: SourceNotFoundError, as documented."""
    import inspect as pyinspect

    function = public()[name]
    with pytest.raises(SourceNotFoundError) as missing:
        function(tmp_path / "nowhere", *more)
    assert isinstance(missing.value, FileNotFoundError)
    assert str(missing.value) == f"{tmp_path / 'nowhere'}: no such file or directory"
    raises = (pyinspect.getdoc(function) or "").split("Raises:")[1]
    assert "SourceError" in raises and "OutputError" not in raises


def test_open_source_of_what_is_no_archive_says_so_at_once(tmp_path: Path) -> None:
    """Issue 43: a text file opened as a TarSource, and the error came only when read."""
    text = tmp_path / "notes.txt"
    text.write_text("not an archive\n")
    with pytest.raises(SourceError, match="not a tar archive"):
        cudasplit.open_source(text)
    empty = tmp_path / "empty.tar.xz"
    empty.write_bytes(b"")
    with pytest.raises(SourceError, match="empty file"):
        cudasplit.open_source(empty)
