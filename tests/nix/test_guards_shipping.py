"""How the consumer-guards hook reaches consumers (issue 28): ``split --consumer-guards`` writes it
into lib's (else out's) ``nix-support/setup-hook``; the build setup hook's
``cudasplitConsumerGuardsHook`` turns the flag on."""

from __future__ import annotations

from pathlib import Path

from cudasplit import SplitOptions, split_to_dir
from cudasplit.guards import consumer_guards_hook
from tests.support.tarutil import write_archive
from tests.unit.rulebook.test_package_rules import _run_hook

HOOK_ROOT = "/nix/store/" + "h" * 32 + "-cuda-component-hook"


def _split(tmp: Path, members: list[tuple[str, str, bytes]], **options: object) -> Path:
    archive = write_archive(tmp / "demo-linux-x86_64-1.2.3-archive.tar", members, codec="none")
    split_to_dir(archive, tmp / "o", SplitOptions(nix_markers=True, **options))  # type: ignore[arg-type]
    return tmp / "o"


def test_lib_gets_the_hook(tmp_path: Path) -> None:
    guards = Path(consumer_guards_hook()).read_text()
    out = _split(tmp_path, [("file", "lib/libdemo.so.1", b"not elf"),
                            ("file", "include/demo.h", b"")], consumer_guards=True)
    assert (out / "lib/nix-support/setup-hook").read_text() == guards
    assert not (out / "out/nix-support/setup-hook").exists()


def test_out_when_there_is_no_lib_and_after_the_collector(tmp_path: Path) -> None:
    guards = Path(consumer_guards_hook()).read_text()
    out = _split(tmp_path, [("file", "include/demo.h", b"")], consumer_guards=True,
                 outputs=("out",), cuda_component_hook=HOOK_ROOT)
    text = (out / "out/nix-support/setup-hook").read_text()
    assert text.startswith(f"source {HOOK_ROOT}/nix-support/setup-hook\n")
    assert text.endswith(guards)


def test_off_by_default(tmp_path: Path) -> None:
    out = _split(tmp_path, [("file", "lib/libdemo.so.1", b"not elf")])
    assert not (out / "lib/nix-support/setup-hook").exists()


def test_setup_hook_variable_becomes_the_flag() -> None:
    args, _settings = _run_hook("cudasplitConsumerGuardsHook=1")
    assert "--consumer-guards" in args and "--nix-support" in args
    args, _settings = _run_hook("cudasplitConsumerGuardsHook=1\ncudasplitNoNixSupport=1")
    assert "--consumer-guards" not in args
    args, _settings = _run_hook("")
    assert "--consumer-guards" not in args


def test_package_nix_exposes_the_hook(tmp_path: Path) -> None:
    from tests.nix.test_nix_package import PACKAGE, _eval, _need_nix

    _need_nix()
    got = _eval(f"toString (callPackage {PACKAGE} {{ }}).passthru.consumerGuardsHook", tmp_path)
    assert isinstance(got, str) and Path(got).samefile(consumer_guards_hook())
