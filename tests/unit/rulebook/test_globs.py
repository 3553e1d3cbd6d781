import fnmatch
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cudasplit._globs import GlobError, compile_glob


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("**/*.a", "x.a", True),
        ("**/*.a", "lib/stubs/libfoo.a", True),
        ("**/*.a", "lib/x64/deep/er/libfoo.a", True),
        ("**/*.a", "lib/libfoo.so", False),
        ("*.a", "lib/stubs/libfoo.a", True),  # no slash: any depth
        ("lib/**", "lib/libcudart.so", True),
        ("lib/**", "lib/stubs/libcuda.so", True),
        ("lib/**", "lib", False),
        ("lib/**", "libx/foo", False),
        ("lib/*", "lib/stubs/libcuda.so", False),  # one star never crosses "/"
        ("host-*/**", "host-linux-x64/Plugins/imageformats/libqtiff.so", True),
        ("host-*/**", "nsight/host-linux-x64/x", False),  # anchored at the root
        ("lib/stubs/", "lib/stubs/libcuda.so", True),
        ("share/[dm]*/**", "share/man/man1/x.1", True),
        ("share/[!dm]*/**", "share/man/man1/x.1", False),
        ("lib/**/*.so", "lib/a/b/c.so", True),
        ("lib/**/*.so", "lib/c.so", True),
        ("?.h", "include/a.h", True),
        ("?.h", "include/ab.h", False),
        ("**", "anything/at/all", True),
    ],
)
def test_glob_semantics(pattern: str, path: str, expected: bool) -> None:
    assert compile_glob(pattern).matches(path) is expected


@pytest.mark.parametrize("bad", ["", "/abs/**", "lib/**x", "a//b", "lib/[abc", "x\x00y"])
def test_bad_globs_are_refused(bad: str) -> None:
    with pytest.raises(GlobError):
        compile_glob(bad)


component = st.text(alphabet="abcxyz.-_0123", min_size=1, max_size=6).filter(
    lambda s: s not in (".", "..")
)
paths = st.lists(component, min_size=1, max_size=6).map("/".join)


@given(paths)
def test_double_star_suffix_matches_any_depth(path: str) -> None:
    name = path.rsplit("/", 1)[-1]
    assert compile_glob("**/" + name).matches(path)
    assert compile_glob(name).matches(path)


@given(paths, component)
def test_dir_double_star_is_exactly_below(path: str, top: str) -> None:
    glob = compile_glob(top + "/**")
    assert glob.matches(top + "/" + path)
    assert not glob.matches(top)
    assert glob.matches(path) == (path.startswith(top + "/"))


@given(st.lists(component, min_size=1, max_size=4).map("/".join))
def test_single_component_globs_agree_with_fnmatch_on_names(path: str) -> None:
    # Within one component our "*" is fnmatch's "*"; it must never cross "/".
    name = path.rsplit("/", 1)[-1]
    pattern = name[:1] + "*"
    assert compile_glob(pattern).matches(path) == fnmatch.fnmatchcase(name, pattern)
    anchored = compile_glob("x/" + pattern)
    assert anchored.matches("x/" + name)
    assert not anchored.matches("x/y/" + name) or re.fullmatch(r"x/.*", "x/y/" + name) is None
