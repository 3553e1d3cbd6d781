"""The split run: identity and layout fixed first, then source -> classify -> place -> links
and rewrites -> ELF plan -> patch -> report, each stage returning values to the one report
writer (:mod:`cudasplit._split.pipeline` drives it)."""
