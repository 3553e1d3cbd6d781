"""Tests for cudasplit._searchpath: entry spelling and de-duplication, no plan."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cudasplit._searchpath import dedupe, entry_key, split_search_path


@pytest.mark.parametrize(("entry", "key"), [
    ("${ORIGIN}", "$ORIGIN"),
    ("${ORIGIN}/../lib/", "$ORIGIN/../lib"),
    ("/a//b/", "/a/b"),
    ("/", "/"),
    ("//", "/"),
    ("$ORIGIN/x/..", "$ORIGIN/x/.."),  # ".." is kept: x may be a symlink
    ("", ""),
])
def test_entry_key_normalises_spelling_only(entry: str, key: str) -> None:
    assert entry_key(entry) == key


def test_dedupe_keeps_the_first_spelling() -> None:
    assert dedupe(["${ORIGIN}", "/a//b", "$ORIGIN", "/a/b/", "/c"]) == ("${ORIGIN}", "/a//b", "/c")


def test_split_keeps_empty_entries() -> None:
    assert split_search_path("$ORIGIN:") == ("$ORIGIN", "")
    assert split_search_path(None) == ()


@given(st.lists(st.sampled_from(["$ORIGIN", "${ORIGIN}", "/a", "/a/", "//a", "/b", ""])))
def test_dedupe_is_idempotent_and_keeps_one_per_key(entries: list[str]) -> None:
    once = dedupe(entries)
    assert dedupe(once) == once
    assert len({entry_key(e) for e in once}) == len(once)
    assert {entry_key(e) for e in once} == {entry_key(e) for e in entries}
