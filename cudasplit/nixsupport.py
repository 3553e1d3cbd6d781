"""The ``nix-support/`` files buildRedist writes (``--nix-support``).

* every output: ``nix-support/include-in-cudatoolkit-root`` (empty marker: the output belongs
  in a merged cudatoolkit root);
* ``out``: ``nix-support/propagated-build-inputs`` listing the other outputs, so depending on
  ``out`` brings the whole package (stdenv's convention for multi-output packages).

Written through the sink, so they land in whatever the sink produces (Nix outputs, a
directory, tarballs). ``out`` referencing the others means no other output may reference
``out`` (Nix would report a cycle); the pipeline never links outputs to each other.
"""

from __future__ import annotations

from .sinks.base import Sink

MARKER = "nix-support/include-in-cudatoolkit-root"
PROPAGATED = "nix-support/propagated-build-inputs"


def write_nix_support(sink: Sink) -> None:
    """Write the markers into every output the sink holds, and the propagation list to ``out``."""
    sink.ensure_output("out")
    outputs = sink.outputs()
    for output in outputs:
        sink.write_bytes(output, MARKER, b"", 0o644)
    others = [sink.output_root(name) for name in outputs if name != "out"]
    text = " ".join(others) + "\n" if others else ""
    sink.write_bytes("out", PROPAGATED, text.encode(), 0o644)
