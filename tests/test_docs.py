"""The user documentation stays true and readable: generated reference pages are current, the
README stays short and keeps the two quick-start commands CI runs, user pages name no private
module and no issue number, and every relative link leads somewhere."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
# Pages for people changing cudasplit: they may name internal folders and modules.
INTERNAL = {DOCS / "architecture.md", DOCS / "development.md"}
USER_PAGES = [README, *sorted(p for p in DOCS.rglob("*.md") if p not in INTERNAL)]
ALL_PAGES = [README, *sorted(DOCS.rglob("*.md"))]

QUICK_START = [
    "python3 -m venv .venv && .venv/bin/pip install -q . && .venv/bin/cudasplit split "
    "fixtures/cuda_sample-linux-x86_64-12.9.79-archive.tar.xz -o /tmp/cudasplit-demo "
    "--overwrite --default-rules --report /tmp/cudasplit-demo.json",
    "rm -rf .venv && python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && "
    ".venv/bin/python -m pytest -q",
]


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _prose(text: str) -> str:
    """The page without its fenced code blocks (links and headings there are not Markdown)."""
    return re.sub(r"^(```|~~~).*?^\1[^\n]*$", "", text, flags=re.S | re.M)


def test_generated_reference_pages_are_current() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_reference.py"),
                           "--check"], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_readme_is_short() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; move detail into docs/"


def test_readme_quick_start_is_what_ci_runs() -> None:
    """`.ci/run` takes the ```sh blocks of `## Quick start` up to the first `---` line, one
    line each: exactly these two commands, in this order."""
    commands, inside, take_next = [], False, False
    for line in README.read_text().splitlines():
        if take_next:
            commands.append(line)
            take_next = False
        elif line.startswith("## Quick start"):
            inside = True
        elif line == "---":
            inside = False
        elif inside and line == "```sh":
            take_next = True
    assert commands == QUICK_START


def test_readme_says_what_the_test_command_downloads() -> None:
    text = " ".join(README.read_text().split())
    for needed in ("~/.cache/cudasplit", "CUDASPLIT_CACHE", '-m "not slow"'):
        assert needed in text


PRIVATE_MODULE = re.compile(r"(?<![\w.])_[a-z][a-z0-9_]*\.py\b|\bcudasplit[./]_[a-z]")
ISSUE_REFERENCE = re.compile(r"\bissues? \d+|(?<![\w/&])#\d+\b", re.I)


@pytest.mark.parametrize("page", USER_PAGES, ids=_rel)
def test_user_pages_name_no_private_module_and_no_issue(page: Path) -> None:
    bad = [f"{_rel(page)}:{number}: {line.strip()}"
           for number, line in enumerate(page.read_text().splitlines(), 1)
           if PRIVATE_MODULE.search(line) or ISSUE_REFERENCE.search(line)]
    assert bad == []


def test_the_patterns_above_catch_what_they_should() -> None:
    assert PRIVATE_MODULE.search("see `_tarheaders.py`")
    assert PRIVATE_MODULE.search("cudasplit._rulebook.load")
    assert not PRIVATE_MODULE.search("see `__init__.py` or tests/test_docs.py")
    assert ISSUE_REFERENCE.search("fixed in issue 15") and ISSUE_REFERENCE.search("(#12)")
    assert not ISSUE_REFERENCE.search("NixOS/nixpkgs#293320 and [x](#exit-codes)")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    anchors = set()
    for line in _prose(page.read_text()).splitlines():
        match = re.match(r"#{1,6} (.*)", line)
        if not match:
            continue
        slug = _slug(match.group(1))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    anchors |= set(re.findall(r'<a (?:id|name)="([^"]+)"', page.read_text()))
    return anchors


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?: \"[^\"]*\")?\)")


@pytest.mark.parametrize("page", ALL_PAGES, ids=_rel)
def test_relative_links_lead_somewhere(page: Path) -> None:
    broken = []
    for target in LINK.findall(_prose(page.read_text())):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        if not dest.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target} (no heading #{anchor})")
    assert broken == [], f"{_rel(page)}: {broken}"


# -- problem and warning codes: every code the program emits is documented ----------------

CODE = re.compile(r"[a-z]+(?:-[a-z0-9]+)*")     # the first argument of a problem call
PAIR_CODE = re.compile(r"[a-z]+(?:-[a-z0-9]+)+")  # a returned (code, message) pair
PROBLEM_CALLS = {"problem": "problem", "warn": "warning", "Problem": None}


def _code(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) \
        and CODE.fullmatch(node.value) else None


def emitted_codes() -> dict[str, set[str | None]]:
    """Each code the package emits, with how: ``problem`` (``writer.problem``), ``warning``
    (``writer.warn``, ``warn``) or None (a ``Problem(...)`` whose list decides), read from the
    source: the first argument of those calls, and ``(code, message)`` pairs a function
    returns for its caller to pass on (the link refusals). The command line's own messages
    too: ``warn(text, "code")`` (a warning) and ``message("problem", text, "code")``."""
    found: dict[str, set[str | None]] = {}
    for path in sorted((ROOT / "cudasplit").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and node.args:
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                first = node.args[0]
                if (name in PROBLEM_CALLS and isinstance(first, ast.Constant)
                        and isinstance(first.value, str) and CODE.fullmatch(first.value)):
                    found.setdefault(first.value, set()).add(PROBLEM_CALLS[name])
                elif name == "warn" and len(node.args) == 2 and _code(node.args[1]):
                    found.setdefault(str(_code(node.args[1])), set()).add("warning")
                elif name == "message" and len(node.args) == 3 and _code(node.args[2]) \
                        and _code(first) in ("problem", "warning"):
                    found.setdefault(str(_code(node.args[2])), set()).add(str(_code(first)))
            elif isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple) \
                    and len(node.value.elts) == 2:
                first = node.value.elts[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str) \
                        and PAIR_CODE.fullmatch(first.value) \
                        and isinstance(node.value.elts[1], ast.Constant | ast.JoinedStr):
                    found.setdefault(first.value, set()).add("problem")
    return found


def documented_codes(page: Path) -> dict[str, set[str]]:
    """code -> kinds from a page's ``| `code`[, `code`...] | kind[ or kind] | ... |`` rows."""
    table: dict[str, set[str]] = {}
    for line in page.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        kinds = set(cells[1].split(" or ")) if len(cells) >= 3 else set()
        if kinds and kinds <= {"problem", "warning"}:
            for code in re.findall(r"`([a-z0-9-]+)`", cells[0]):
                table.setdefault(code, set()).update(kinds)
    return table


@pytest.mark.parametrize("page", [DOCS / "reference" / "report.md",
                                  DOCS / "explanation" / "problems-and-warnings.md"], ids=_rel)
def test_every_emitted_code_is_documented_with_its_kind(page: Path) -> None:
    emitted = emitted_codes()
    table = documented_codes(page)
    assert sorted(set(emitted) - set(table)) == [], "emitted but not documented"
    assert sorted(set(table) - set(emitted)) == [], "documented but never emitted"
    wrong = {code: (sorted(table[code]), sorted(k for k in kinds if k))
             for code, kinds in emitted.items()
             if any(k is not None and k not in table[code] for k in kinds)}
    assert wrong == {}


def test_strict_warnings_are_documented_as_failing_strict() -> None:
    from cudasplit._split.checks import STRICT_WARNINGS

    text = (DOCS / "reference" / "report.md").read_text()
    rows = {code: line for line in text.splitlines()
            for code in re.findall(r"^\| `([a-z0-9-]+)`", line)}
    assert {code for code in STRICT_WARNINGS if "fails `--strict`" not in rows[code]} == set()


def test_the_code_reader_finds_what_it_should() -> None:
    emitted = emitted_codes()
    # The command line's own messages (issue 43: four codes were in no table).
    assert emitted["tarball-missing"] == {"problem", "warning"}  # features; nixify
    assert emitted["deprecated-option"] == {"warning"}
    assert emitted["closure-reach"] == {"warning"}
    assert emitted["unsafe-symlink"] == {"problem"}       # returned, then passed on
    assert emitted["cuda-major-unknown"] == {"warning"}   # writer.warn
    assert None in emitted["no-package-rules"]             # Problem(...)


# -- the test data's READMEs name files that exist --------------------------------------------

DATA_READMES = sorted((ROOT / "tests" / "data").rglob("README*"))
REPO_PATH = re.compile(r"(?<![\w./-])((?:tests|docs|cudasplit|scripts|rules)/[\w./-]*\w)")


@pytest.mark.parametrize("readme", DATA_READMES, ids=_rel)
def test_data_readmes_name_paths_that_exist(readme: Path) -> None:
    """A README of test data that names a test or a page names one that is there (issue 43:
    tests/data/manifests/README.md named three tests by paths they had left, and a file
    outside the repository)."""
    text = readme.read_text()
    dead = [p for p in REPO_PATH.findall(text) if not (ROOT / p).exists()
            and not (readme.parent / p).exists()]
    assert dead == []
    assert "/work/" not in text  # a path of one machine, not of the repository
