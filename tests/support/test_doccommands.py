"""The docs-command reader and runner (tests/support/doccommands.py) on small pages."""

from __future__ import annotations

from pathlib import Path

from tests.support.doccommands import (
    output_matches,
    page_blocks,
    parse_block,
    problems,
    program_of,
    run_block,
    unlabelled_command_blocks,
)

PAGE = """# A page

```sh
# a comment, not a command
cudasplit split a.tar.xz \\
    -o out/          # a trailing comment
cudasplit closure out/ --strict   # exit status 1
```

```console
$ false
$ echo $?
1
$ printf '%s\\n' one 'two  words' 12,345
one
two words
...
```

```
cudasplit inspect x.tar.xz
```

```
cudasplit split [OPTIONS] SOURCES...
```
"""


def test_blocks_commands_statuses_and_outputs(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    sh, console = page_blocks(page)
    assert [c.text for c in sh.commands] == [
        "cudasplit split a.tar.xz -o out/          # a trailing comment",
        "cudasplit closure out/ --strict   # exit status 1"]
    assert [c.status for c in sh.commands] == [0, 1]
    assert all(c.expected_output is None for c in sh.commands)
    assert [(c.text, c.status) for c in console.commands] == [
        ("false", 1), ("echo $?", 0), ("printf '%s\\n' one 'two  words' 12,345", 0)]
    assert console.commands[2].expected_output == ["one", "two words", "..."]
    assert unlabelled_command_blocks(page) == [len(PAGE.split("```\ncudasplit inspect")[0]
                                                   .splitlines()) + 1]


def test_output_matching() -> None:
    assert output_matches(["out  4 files  1,234 bytes"], ["out 103 files 9,560,837 bytes"])
    assert not output_matches(["out  4 files"], ["lib 4 files"])
    assert output_matches(["a", "...", "z"], ["a", "b", "c", "z"])
    assert output_matches(["a", "…", "z"], ["a", "z"])
    assert not output_matches(["a", "z"], ["a", "b", "z"])
    assert output_matches(["sha f1477c92…, manifest says eb2b…"],
                          ["sha f1477c92be26, manifest says eb2b1b05"])
    assert output_matches([], []) and not output_matches([], ["something"])


def test_a_block_runs_in_one_shell_and_reports_each_command(tmp_path: Path) -> None:
    block = parse_block("console", 1, [
        "$ mkdir -p /tmp/x && cd /tmp/x && pwd", "/tmp/x",
        "$ pwd", "/tmp/x",
        "$ (exit 3)",
        "$ echo $?", "3",
        "$ echo hello", "goodbye"])
    (tmp_path / "tmp").mkdir()
    results = run_block(block, tmp_path, {"PATH": "/usr/bin:/bin"},
                        substitutions=[("/tmp/", f"{tmp_path}/tmp/")])
    assert [r.status for r in results] == [0, 0, 3, 0, 0]
    assert results[0].output == ["/tmp/x"]  # the substitution undone in what it printed
    found = problems(results, "page.md")
    # (exit 3) is what the echo $? after it says; "hello" is not what the page shows.
    assert len(found) == 1 and "goodbye" in found[0] and "hello" in found[0]


def test_program_of() -> None:
    assert program_of('CUDAToolkit_ROOT=$PWD/cuda CUDACXX=x cmake -S . -B build') == "cmake"
    assert program_of("cuda/bin/nvcc -arch=sm_90") == "cuda/bin/nvcc"
    assert program_of("lib=$(nix-build demo.nix -A lib --no-out-link)") == "nix-build"
