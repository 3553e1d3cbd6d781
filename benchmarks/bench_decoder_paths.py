"""One single-stream decoder, every way its bytes can reach a reader, side by side.

Issue 40 asked why the split's decoding looked slower than the decoder binaries. This isolates
the decoder from the split: the binary writing to /dev/null, the binary through a pipe into
`cat` (what tar does), into Python (`os.read`, `os.readv` into one buffer), and the in-process
library (`lzma`, `zstandard`), on the main thread and on a thread of its own, with tar's
extraction as the anchor. Rounds are interleaved; median / min seconds are printed as a
Markdown table.

    python benchmarks/bench_decoder_paths.py P.tar.xz P.tar.zst [--rounds 5] [--deadline 240]

Make the payloads from any large ELF files, one block and one frame each, e.g.
    tar -cf p.tar lib*.so.* && xz -3 -T1 -kc p.tar >p.tar.xz && zstd -q -3 -c p.tar >p.tar.zst
"""

from __future__ import annotations

import argparse
import lzma
import os
import shlex
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable

import zstandard

CHUNK = 1 << 20


def _shell(command: str) -> None:
    subprocess.run(command, shell=True, check=True)


def _pipe_read(argv: list[str]) -> int:
    with subprocess.Popen(argv, stdout=subprocess.PIPE) as child:
        assert child.stdout is not None
        fd, total = child.stdout.fileno(), 0
        while data := os.read(fd, CHUNK):
            total += len(data)
    return total


def _pipe_readv(argv: list[str]) -> int:
    with subprocess.Popen(argv, stdout=subprocess.PIPE) as child:
        assert child.stdout is not None
        buffer, fd, total = bytearray(CHUNK), child.stdout.fileno(), 0
        while count := os.readv(fd, [buffer]):
            total += count
    return total


def _lzma_in_process(path: str) -> int:
    decoder, total = lzma.LZMADecompressor(), 0
    with open(path, "rb") as archive:
        while not decoder.eof:
            data = archive.read(CHUNK) if decoder.needs_input else b""
            if decoder.needs_input and not data:
                break
            total += len(decoder.decompress(data, CHUNK))
    return total


def _on_a_thread(work: Callable[[], int]) -> int:
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(work()))
    thread.start()
    thread.join()
    return result[0]


def _zstandard_in_process(path: str) -> int:
    total, buffer = 0, bytearray(CHUNK)
    with open(path, "rb") as archive:
        reader = zstandard.ZstdDecompressor().stream_reader(archive, read_size=CHUNK)
        while count := reader.readinto(buffer):
            total += count
    return total


def _cases(xz_path: str, zst_path: str, scratch: str) -> dict[str, Callable[[], object]]:
    xz, zst = shlex.quote(xz_path), shlex.quote(zst_path)  # for the shell lines below

    def untar(flags: str, path: str) -> None:
        shutil.rmtree(scratch, ignore_errors=True)
        os.mkdir(scratch)
        _shell(f"tar -C {shlex.quote(scratch)} {flags} -xf {path}")

    return {
        "`xz -dc >/dev/null`": lambda: _shell(f"xz -dc -T1 {xz} >/dev/null"),
        "`xz -dc | cat >/dev/null`": lambda: _shell(f"xz -dc -T1 {xz} | cat >/dev/null"),
        "`xz -dc` into Python, `os.read` 1 MiB": lambda: _pipe_read(["xz", "-dc", "-T1", xz_path]),
        "`xz -dc` into Python, `os.readv` one buffer": lambda: _pipe_readv(
            ["xz", "-dc", "-T1", xz_path]
        ),
        "`lzma` in-process, main thread": lambda: _lzma_in_process(xz_path),
        "`lzma` in-process, own thread": lambda: _on_a_thread(lambda: _lzma_in_process(xz_path)),
        "`tar -xJf` (anchor)": lambda: untar("-J", xz),
        "`zstd -dc >/dev/null`": lambda: _shell(f"zstd -qdc {zst} >/dev/null"),
        "`zstd -dc | cat >/dev/null`": lambda: _shell(f"zstd -qdc {zst} | cat >/dev/null"),
        "`zstd -dc` into Python, `os.read` 1 MiB": lambda: _pipe_read(["zstd", "-qdc", zst_path]),
        "`zstandard` in-process, main thread": lambda: _zstandard_in_process(zst_path),
        "`zstandard` in-process, own thread": lambda: _on_a_thread(
            lambda: _zstandard_in_process(zst_path)
        ),
        "`tar -I zstd -xf` (anchor)": lambda: untar("-I zstd", zst),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("xz")
    parser.add_argument("zst")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--deadline", type=float, default=240.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        cases = _cases(args.xz, args.zst, os.path.join(work, "x"))
        samples: dict[str, list[float]] = {name: [] for name in cases}
        end = time.monotonic() + args.deadline
        for _ in range(args.rounds):
            if time.monotonic() > end:
                break
            for name, run in cases.items():
                start = time.perf_counter()
                run()
                samples[name].append(time.perf_counter() - start)
    print(
        f"{len(next(iter(samples.values())))} interleaved rounds, load {os.getloadavg()[0]:.1f}, "
        f"{os.cpu_count()} CPUs, zstandard {zstandard.__version__}\n"
    )
    print("| path | s (median / min) |\n|---|---|")
    for name, times in samples.items():
        cell = name.replace("|", "\\|")  # a pipe inside a table cell must be escaped
        print(f"| {cell} | {statistics.median(times):.2f} / {min(times):.2f} |")


if __name__ == "__main__":
    main()
