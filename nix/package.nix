# cudasplit as a Nix package: `callPackage ./nix/package.nix { }` (or the flake's overlay).
# Installs the `cudasplit` command and its setup hook: a derivation with cudasplit in
# nativeBuildInputs gets `cudasplitInstallPhase` (and it becomes the installPhase when the
# derivation sets none). See cudasplit/nix/setup-hook.sh for the hook's variables.
{
  lib,
  python3Packages,
  xz,
  zstd,
}:

python3Packages.buildPythonApplication {
  pname = "cudasplit";
  version = "0.1.0";
  pyproject = true;

  # Only what the wheel is built from: a change to tests or docs does not rebuild it.
  src = lib.fileset.toSource {
    root = ../.;
    fileset = lib.fileset.unions [
      ../pyproject.toml
      ../README.md
      ../cudasplit
      ../rules
    ];
  };

  build-system = [ python3Packages.hatchling ];

  dependencies = with python3Packages; [
    click
    lief
    pyelftools
    zstandard
  ];

  # The decoder binaries a split runs (docs/explanation/performance.md): on PATH after the
  # builder's own, so the split never falls back to the slower in-process decoder for want
  # of them (stdenv brings xz, not always zstd).
  makeWrapperArgs = [ "--suffix" "PATH" ":" "${xz}/bin:${zstd}/bin" ];

  # stdenv copies this to $out/nix-support/setup-hook; dependents source it.
  setupHook = ../cudasplit/nix/setup-hook.sh;

  # The consumer-guards hook (ambiguous RUNPATHs, dlopen RUNPATH entries, closure budgets), for
  # a consumer to use as a setup hook by hand; `split --consumer-guards` ships it in lib outputs.
  passthru.consumerGuardsHook = ../cudasplit/nix/consumer-guards-hook.sh;

  pythonImportsCheck = [ "cudasplit" ];

  meta = {
    description = "Split NVIDIA CUDA redistributable tarballs into outputs and rewrite ELF RUNPATHs";
    license = lib.licenses.mit;
    mainProgram = "cudasplit";
    platforms = lib.platforms.linux;
  };
}
