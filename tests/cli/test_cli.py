"""The click layer: options map onto the API, errors become one line and an exit code."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cudasplit.cli import main
from tests.support.tarutil import write_archive

ENTRIES = [
    ("file", "lib/libdemo.so.12.9.79", b"plain"),
    ("symlink", "lib/libdemo.so.12", "libdemo.so.12.9.79"),
    ("file", "lib/libdemo_static.a", b"!<arch>\n"),
    ("file", "include/demo.h", b"#pragma once\n"),
    ("file", "LICENSE", b"license"),
]


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    return write_archive(tmp_path / "cuda_demo-linux-x86_64-12.9.79-archive.tar.xz", ENTRIES)


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_split_writes_outputs_and_report(tmp_path: Path, archive: Path) -> None:
    out, report_file = tmp_path / "out", tmp_path / "report.json"
    code, stdout, _ = invoke("split", str(archive), "-o", str(out), "--report", str(report_file),
                             "--no-patch")
    assert code == 0, stdout
    assert (out / "lib/lib/libdemo.so.12").is_symlink()
    report = json.loads(report_file.read_text())
    assert report["schema"] == 1
    assert report["package"] == {"name": "cuda_demo", "platform": "linux-x86_64",
                                 "version": "12.9.79", "cuda_variant": None}
    assert report["outputs"]["static"]["files"] == 1
    member = next(m for m in report["members"] if m["path"] == "lib/libdemo_static.a")
    assert member | {"size": 0} == {
        "path": "lib/libdemo_static.a", "kind": "static", "output": "static",
        "dest": "lib/libdemo_static.a", "rule": "default.toml:static-archives", "size": 0,
        "link": None, "note": None}
    assert "lib" in stdout


def test_inspect_lists_every_member_and_writes_nothing(tmp_path: Path, archive: Path) -> None:
    code, stdout, _ = invoke("inspect", str(archive), "--json")
    assert code == 0
    members = {m["path"]: m["output"] for m in json.loads(stdout)["members"]}
    assert members == {"lib/libdemo.so.12.9.79": "lib", "lib/libdemo.so.12": "lib",
                       "lib/libdemo_static.a": "static", "include/demo.h": "include",
                       "LICENSE": "out"}
    code, stdout, _ = invoke("inspect", str(archive))
    assert "default.toml:headers" in stdout


def test_explain_names_the_rule_and_the_ones_passed_over(archive: Path) -> None:
    code, stdout, _ = invoke("explain", str(archive), "include/demo.h")
    assert code == 0
    assert "MATCH default.toml:headers" in stdout
    assert "pass  default.toml:static-archives" in stdout
    assert "=> output: include" in stdout
    code, _, stderr = invoke("explain", str(archive), "nope/x")
    assert code == 2 and "no member 'nope/x'" in stderr


def test_rules_show_and_check(tmp_path: Path) -> None:
    code, stdout, _ = invoke("rules", "show")
    assert code == 0 and "default.toml:static-archives" in stdout
    bad = tmp_path / "bad.toml"
    bad.write_text('[[rule]]\nname = "oops"\nmatch = "x"\noutput = "nowhere"\n')
    code, _, stderr = invoke("rules", "check", str(bad))
    assert code == 2
    assert stderr.count("\n") == 1 and f"{bad}:oops" in stderr


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"", "empty file"), (b"garbage" * 100, "unknown magic"),
     (b"\xfd7zXZ\x00" + b"\x00" * 50, "corrupt")],
)
def test_bad_input_is_one_line_exit_2(tmp_path: Path, content: bytes, message: str) -> None:
    bad = tmp_path / "bad.tar.xz"
    bad.write_bytes(content)
    code, _, stderr = invoke("split", str(bad), "-o", str(tmp_path / "o"))
    assert code == 2
    assert stderr.startswith("cudasplit: error: ") and stderr.count("\n") == 1
    assert str(bad) in stderr and message in stderr
    assert "Traceback" not in stderr
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


def test_strict_exit_code_1(tmp_path: Path, archive: Path) -> None:
    code, _, stderr = invoke("split", str(archive), "-o", str(tmp_path / "o"), "--no-patch",
                             "--strict", "--outputs", "lib,samples")
    assert code == 1 and "output 'samples' received no files" in stderr


def test_usage_errors_exit_2(tmp_path: Path, archive: Path) -> None:
    code, _, _ = invoke("split", str(archive))
    assert code == 2
    code, _, stderr = invoke("split", str(archive), "-o", str(tmp_path), "--outputs", "lib,bogus")
    assert code == 2 and "bogus" in stderr


def test_nix_mode_reads_builder_environment(tmp_path: Path, archive: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    roots = {name: tmp_path / f"store-{name}" for name in ("out", "lib", "dev")}
    monkeypatch.setenv("outputs", " ".join(roots))
    for name, path in roots.items():
        monkeypatch.setenv(name, str(path))
    code, _stdout, stderr = invoke("split", str(archive), "--nix", "--no-patch", "--default-rules")
    assert code == 0, stderr
    assert (roots["lib"] / "lib/libdemo.so.12.9.79").is_file()
    assert (roots["dev"] / "include/demo.h").is_file()  # include falls back to dev
    assert (roots["lib"] / "lib/libdemo_static.a").is_file()  # positional: stays in lib
    monkeypatch.delenv("dev")
    code, _, stderr = invoke("split", str(archive), "--nix")
    assert code == 2 and "$dev is not set" in stderr


def test_nix_structured_attrs(tmp_path: Path, archive: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    attrs = tmp_path / ".attrs.json"
    attrs.write_text(json.dumps({"outputs": {"out": str(tmp_path / "o"), "lib": str(tmp_path / "l")}}))
    monkeypatch.setenv("NIX_ATTRS_JSON_FILE", str(attrs))
    code, _, stderr = invoke("split", str(archive), "--nix", "--no-patch", "--default-rules")
    assert code == 0, stderr
    assert (tmp_path / "l/lib/libdemo.so.12").is_symlink()
    attrs.write_text("{}")
    code, _, stderr = invoke("split", str(archive), "--nix")
    assert code == 2 and "no 'outputs'" in stderr


def test_batch_of_sources_and_directory_of_tarballs(tmp_path: Path) -> None:
    tarballs = tmp_path / "tarballs"
    tarballs.mkdir()
    first = write_archive(tarballs / "cuda_demo-linux-x86_64-12.9.79-archive.tar.xz", ENTRIES)
    second = write_archive(tarballs / "cuda_other-linux-sbsa-12.9.79-archive.tar.zst", ENTRIES,
                           "zst", top="cuda_other-linux-sbsa-12.9.79-archive")
    out, report_file = tmp_path / "out", tmp_path / "batch.json"
    code, _stdout, stderr = invoke("split", str(first), str(second), "-o", str(out), "--no-patch",
                                  "--report", str(report_file), "-j", "2")
    assert code == 0, stderr
    assert (out / "cuda_demo-linux-x86_64-12.9.79/lib/lib/libdemo.so.12").is_symlink()
    assert (out / "cuda_other-linux-sbsa-12.9.79/include/include/demo.h").is_file()
    runs = json.loads(report_file.read_text())["runs"]
    assert [r["report"]["package"]["name"] for r in runs] == ["cuda_demo", "cuda_other"]
    out2 = tmp_path / "out2"
    code, _, stderr = invoke("split", str(tarballs), "-o", str(out2), "--no-patch")
    assert code == 0, stderr
    assert sorted(p.name for p in out2.iterdir()) == ["cuda_demo-linux-x86_64-12.9.79",
                                                      "cuda_other-linux-sbsa-12.9.79"]


def test_batch_reports_each_failure_and_keeps_going(tmp_path: Path, archive: Path) -> None:
    bad = tmp_path / "cuda_bad-linux-x86_64-1.0-archive.tar.xz"
    bad.write_bytes(b"\xfd7zXZ\x00" + b"\x01" * 64)
    out = tmp_path / "out"
    code, _, stderr = invoke("split", str(archive), str(bad), "-o", str(out), "--no-patch")
    assert code == 2
    assert str(bad) in stderr and stderr.count("cudasplit: error:") == 1
    assert (out / "cuda_demo-linux-x86_64-12.9.79/lib").is_dir()
    assert not (out / "cuda_bad-linux-x86_64-1.0").exists()


def test_no_progress_output_when_stderr_is_not_a_terminal(tmp_path: Path, archive: Path) -> None:
    code, _, stderr = invoke("split", str(archive), "-o", str(tmp_path / "o"), "--no-patch",
                             "--default-rules")
    assert code == 0 and "\r" not in stderr and stderr == ""


def test_progress_line_overwrites_itself(capsys: pytest.CaptureFixture[str]) -> None:
    from cudasplit import Progress
    from cudasplit.cli import ProgressLine

    line = ProgressLine()
    line(Progress("/x/cuda_demo.tar.xz", 3, 5_000_000, "lib/libdemo.so"))
    line(Progress("/x/cuda_demo.tar.xz", 4, 6_000_000, "", done=True))
    line.clear()
    err = capsys.readouterr().err
    assert err.startswith("\rcuda_demo.tar.xz: 3 members, 5 MB")
    assert "4 members" in err and err.endswith("\r")
