# shellcheck shell=bash
# cudasplit setup hook: split a CUDA redistributable tarball into the derivation's outputs
# and rewrite RUNPATHs in one pass, replacing buildRedist's moves and the autoPatchelf /
# addDriverRunpath / addCudaCompatRunpath hooks.
#
# `cudasplit nix setup-hook` prints this file's path. Add cudasplit to nativeBuildInputs (or
# source this file) and either keep the default installPhase, which this hook sets when the
# derivation has none, or call `cudasplitInstallPhase` yourself.
#
# Variables (all optional; plain or __structuredAttrs = true):
#   cudasplitSource      what to split (default: $src; use dontUnpack = true so the tarball
#                        is streamed, or set it to "$PWD" after unpackPhase)
#   cudasplitCudaCompat  cuda_compat's libcuda directory (e.g. "${cuda_compat}/compat"),
#                        placed first in every RUNPATH
#   cudasplitDriverLink  driver link directory (default /run/opengl-driver; "" disables it)
#   cudasplitLibraryPath colon-separated directories that resolve DT_NEEDED names the
#                        package does not provide (dependencies' lib dirs)
#   cudasplitAppendRunpath colon-separated extra RUNPATH entries (e.g. NVRTC's lib)
#   cudasplitNoNixSupport  non-empty: skip nix-support/ markers and propagated-build-inputs
#   cudasplitStrict      non-empty: fail on empty outputs, unclaimed members, dangling links
#   cudasplitReport      write the JSON report here (default: $NIX_BUILD_TOP/cudasplit-report.json)
#   cudasplitFlags       extra command-line flags (a string, or a bash array with structured attrs)
#   cudasplitCommand     the program to run (default: cudasplit)

cudasplitInstallPhase() {
    runHook preInstall

    local -a flags=(--nix)
    [[ -n "${cudasplitNoNixSupport:-}" ]] || flags+=(--nix-support)
    [[ -n "${cudasplitStrict:-}" ]] && flags+=(--strict)
    [[ -n "${cudasplitCudaCompat:-}" ]] && flags+=(--cuda-compat "$cudasplitCudaCompat")
    if [[ -n "${cudasplitDriverLink+set}" && -z "${cudasplitDriverLink}" ]]; then
        flags+=(--no-driver-link)
    elif [[ -n "${cudasplitDriverLink:-}" ]]; then
        flags+=(--driver-link "$cudasplitDriverLink")
    fi
    local dir
    local -a dirs
    IFS=: read -ra dirs <<< "${cudasplitLibraryPath:-}"
    for dir in "${dirs[@]}"; do [[ -n "$dir" ]] && flags+=(--library-path "$dir"); done
    IFS=: read -ra dirs <<< "${cudasplitAppendRunpath:-}"
    for dir in "${dirs[@]}"; do [[ -n "$dir" ]] && flags+=(--append-runpath "$dir"); done
    flags+=(--report "${cudasplitReport:-${NIX_BUILD_TOP:-.}/cudasplit-report.json}")

    # A bash array under structured attrs, a whitespace-separated string otherwise.
    local -a extra=()
    if [[ "$(declare -p cudasplitFlags 2>/dev/null)" == "declare -a"* ]]; then
        extra=("${cudasplitFlags[@]}")
    else
        read -ra extra <<< "${cudasplitFlags:-}"
    fi

    # shellcheck disable=SC2086  # cudasplitCommand may be "python -m cudasplit"
    ${cudasplitCommand:-cudasplit} split "${cudasplitSource:-$src}" "${flags[@]}" \
        ${extra[@]+"${extra[@]}"}

    runHook postInstall
}

if [[ -z "${installPhase-}" ]]; then
    installPhase=cudasplitInstallPhase
fi
