"""cuda_cccl -> cccl at CUDA 13.3 (nixpkgs#528773): the package table's references to
cuda_cccl (nvcc.profile, cudart's Cflags) follow the rename (issue 27)."""

from __future__ import annotations

from pathlib import Path

from cudasplit._release.nixify import package_roots, table_needs
from cudasplit._rulebook import Where, aliases, load_ruleset, name_at, renamed_pairs
from cudasplit._split.rewrites import package_root


def test_name_at_and_aliases() -> None:
    assert name_at("cuda_cccl", "13.2") == "cuda_cccl"
    assert name_at("cuda_cccl", "13.3") == "cccl"
    assert name_at("cuda_cccl", None) == "cuda_cccl"
    assert name_at("cuda_cudart", "13.4") == "cuda_cudart"
    assert aliases("cccl") == ("cccl", "cuda_cccl") and aliases("cuda_cccl")[1] == "cccl"
    assert renamed_pairs({"cuda_cccl", "x"}, {"cccl", "x"}) == [("cuda_cccl", "cccl", "13.3")]
    assert renamed_pairs({"cuda_cccl"}, {"cuda_cccl", "cccl"}) == []


def test_package_root_answers_to_either_name() -> None:
    assert package_root({"cccl.include": "/c"}, "cuda_cccl", "include") == "/c"
    assert package_root({"cuda_cccl": "/o"}, "cccl", "include") == "/o"
    assert package_root({}, "cuda_cccl", "include") is None


def test_nixify_names_cccl_from_13_3() -> None:
    nvcc = load_ruleset("cuda_nvcc").package
    needs = table_needs(nvcc, Where("13.4.48", "13.4"))
    assert "cccl" in needs and "cuda_cccl" not in needs
    roots = dict(package_roots(nvcc, needs, "13.4"))
    assert roots["cccl.include"] == 'lib.getOutput "include" (cccl.__spliced.targetTarget or cccl)'
    assert "cuda_cccl" in table_needs(nvcc, Where("13.0.88", "13.0"))
    # cudart's .pc Cflags name crt and cccl: nixify passes their include roots.
    cudart = load_ruleset("cuda_cudart").package
    needs = table_needs(cudart, Where("13.4.92", "13.4"))
    assert needs == {"cccl": "cflags_packages", "cuda_crt": "cflags_packages"}
    assert dict(package_roots(cudart, needs, "13.4"))["cuda_crt.include"] == \
        'lib.getOutput "include" cuda_crt'


def test_cudart_13_4_pc_takes_the_cccl_root(tmp_path: Path) -> None:
    """A 13.4 build gives ``--package-root cccl=DIR`` (the manifest's name): cudart's Cflags
    use it although the table says cuda_cccl."""
    from cudasplit import SplitOptions, split_to_dir
    from tests.support.builders import pkgconfig_text

    top = tmp_path / "cuda_cudart-linux-x86_64-13.4.92-archive"
    (top / "pkg-config").mkdir(parents=True)
    (top / "pkg-config/cudart-13.4.pc").write_text(
        pkgconfig_text("cudart", "CUDA Runtime", "13.4", "x86_64-linux", "-lcudart"))
    roots = (("cuda_crt", "/nix/store/c-crt"), ("cccl", "/nix/store/d-cccl"))
    report = split_to_dir(top, tmp_path / "o", SplitOptions(package_roots=roots, patch=False))
    text = (tmp_path / "o/out/share/pkgconfig/cudart-13.4.pc").read_text()
    assert "-I/nix/store/c-crt/include -I/nix/store/d-cccl/include" in text
    assert not [w for w in report.warnings if w.code == "package-root-missing"]
