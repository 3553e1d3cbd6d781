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
#   cudasplitPackageRoots  other packages' roots for @pname@ entries of the package table:
#                        "cuda_nvrtc=/nix/store/...-cuda_nvrtc-lib cuda_cccl=..." (a string,
#                        or a bash array with structured attrs); -> --package-root
#   cudasplitTargetPlatform  compiler packages (nvcc): the NVIDIA platform it builds for
#                        (linux-sbsa, ...); cuda_cudart roots must hold its machine;
#                        -> --target-platform
#   cudasplitInterpreter the PT_INTERP for executables (e.g. "$(cat $NIX_CC/nix-support/
#                        dynamic-linker)"); -> --interpreter
#   cudasplitIgnoreMissing DT_NEEDED names allowed to stay unresolved (space-separated, or an
#                        array; like autoPatchelfIgnoreMissingDeps); -> --ignore-missing
#   cudasplitCudaVersion the CUDA release X.Y for the package table's gates (default: the
#                        cudaMajorMinorVersion variable buildRedist also sets)
#   cudasplitCheckFhsRefs  non-empty: --check-fhs-refs (checkCudaFhsRefs)
#   cudasplitCudaComponentHook  Nixpkgs' cudaComponentHook (its store path): every output with
#                        nix-support/cuda-component gets a setup hook sourcing its collector;
#                        default: $_cudaComponentHookPath when that hook is a build input and
#                        cudaPublishComponent is unset (when set, the hook writes it itself)
#   cudasplitPythonVersion the build's Python X.Y (cuda_gdb keeps only that Python's
#                        cuda-gdb-pythonX.Y-tui); -> --python-version
#   cudasplitGlibcVersion  the glibc X.Y the headers will meet (cuda_crt's noexcept edits
#                        need >= 2.42, e.g. lib.versions.majorMinor stdenv.cc.libc.version);
#                        -> --glibc-version
#   cudasplitConsumerGuardsHook  non-empty: --consumer-guards (lib's setup hook then checks
#                        every consumer: ambiguous RUNPATHs, dlopen entries, closure budgets)
#   cudasplitNoPatch     non-empty: --no-patch (RUNPATHs left alone; stripping stays on)
#   cudasplitNoNixSupport  non-empty: skip nix-support/ markers and propagated-build-inputs
#   cudasplitStrict      non-empty: fail on empty outputs, unclaimed members, dangling links
#   cudasplitReport      write the JSON report here (default: $NIX_BUILD_TOP/cudasplit-report.json)
#   cudasplitFlags       extra command-line flags (a string, or a bash array with structured attrs)
#   cudasplitCommand     the program to run (default: cudasplit)
#
# What stdenv does after the install phase, and what this hook does about it (stdenv's
# setup.sh, multiple-outputs.sh, move-docs.sh, move-lib64.sh, strip.sh, patchelf):
#   * output variables: multiple-outputs.sh defaults outputInclude to $outputDev (and
#     outputMan/outputInfo to $outputBin), so with outputs = [ ... "dev" "include" ... ] stdenv
#     believes the headers belong in dev. cudasplitInstallPhase (and sourcing this hook when it
#     becomes the installPhase) sets outputDev, outputBin, outputInclude, outputLib, outputDoc,
#     outputMan, outputInfo, outputDevman and outputDevdoc to the outputs cudasplit's split
#     puts those files in (the fallbacks of cudasplit's layout: include -> dev -> out, the
#     others -> out), so everything that reads them (the propagated-build-inputs stdenv writes
#     into ${!outputDev}, _multioutPropagateDev, consumers) agrees with the split;
#   * moves: _moveToShare (out's doc/ man/ info/ -> share/), _multioutDocs (share/doc,
#     share/man, ... -> outputDoc/outputMan/...; share/gtk-doc is *removed* without a devdoc
#     output) and _multioutDevs (include/, lib/pkgconfig, share/pkgconfig, lib/cmake,
#     share/aclocal of every output -> outputInclude/outputDev) move files by path after the
#     install phase. cudasplit has already put every file in its output, so the install phase
#     takes these three out of preFixupHooks: what the report says is where the files are;
#   * propagation: stdenv's fixupPhase writes propagatedBuildInputs into
#     ${!outputDev}/nix-support/propagated-build-inputs with `>`, over the outputs cudasplit
#     listed there; the words cudasplit wrote are added back after fixup. propagatedBuildOutputs
#     (unset by the derivation) becomes empty, so _multioutPropagateDev does not add outputBin
#     to what cudasplit's dev output propagates;
#   * strip and patchELF's --shrink-rpath stay off unless the derivation sets dontStrip /
#     dontPatchELF (see below); move-lib64 finds lib64 already a link to lib (cudasplit merges
#     it), patchShebangs only rewrites interpreters of executable scripts, and no output holds
#     a dangling link or a RUNPATH into $TMPDIR, so noBrokenSymlinks and audit-tmpdir pass.

cudasplitInstallPhase() {
    runHook preInstall

    local -a flags=(--nix)
    # One job per core Nix grants the build (NIX_BUILD_CORES=0 means "all"). Only digits are
    # compared: [[ X -gt 0 ]] evaluates X as arithmetic, where a[$(...)] runs a command.
    local cores="${NIX_BUILD_CORES:-0}"
    if [[ "$cores" =~ ^[0-9]{1,6}$ ]] && (( 10#$cores > 0 )); then
        flags+=(--jobs "$((10#$cores))")
    fi
    local cudaVersion="${cudasplitCudaVersion:-${cudaMajorMinorVersion:-}}"
    [[ -n "$cudaVersion" ]] && flags+=(--cuda-version "$cudaVersion")
    [[ -n "${cudasplitCheckFhsRefs:-}" ]] && flags+=(--check-fhs-refs)
    [[ -n "${cudasplitPythonVersion:-}" ]] && flags+=(--python-version "$cudasplitPythonVersion")
    [[ -n "${cudasplitGlibcVersion:-}" ]] && flags+=(--glibc-version "$cudasplitGlibcVersion")
    local componentHook="${cudasplitCudaComponentHook:-}"
    if [[ -z "$componentHook" && -z "${cudaPublishComponent:-}" ]]; then
        componentHook="${_cudaComponentHookPath:-}"
    fi
    [[ -n "$componentHook" && -z "${cudasplitNoNixSupport:-}" ]] \
        && flags+=(--cuda-component-hook "$componentHook")
    [[ -n "${cudasplitNoPatch:-}" ]] && flags+=(--no-patch)
    [[ -n "${cudasplitInterpreter:-}" ]] && flags+=(--interpreter "$cudasplitInterpreter")
    [[ -n "${cudasplitTargetPlatform:-}" ]] \
        && flags+=(--target-platform "$cudasplitTargetPlatform")
    local word
    local -a words=()
    _cudasplitWords cudasplitPackageRoots words
    for word in ${words[@]+"${words[@]}"}; do flags+=(--package-root "$word"); done
    _cudasplitWords cudasplitIgnoreMissing words
    for word in ${words[@]+"${words[@]}"}; do flags+=(--ignore-missing "$word"); done
    [[ -n "${cudasplitNoNixSupport:-}" ]] || flags+=(--nix-support)
    [[ -n "${cudasplitConsumerGuardsHook:-}" && -z "${cudasplitNoNixSupport:-}" ]] \
        && flags+=(--consumer-guards)
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

    _cudasplitKeepSplit
    runHook postInstall
}

# The outputs in this derivation, in its order (plain or structured attrs).
_cudasplitOutputNames() {
    if declare -F getAllOutputNames >/dev/null; then
        getAllOutputNames
    elif [[ "$(declare -p outputs 2>/dev/null)" == "declare -A"* ]]; then
        echo "${!outputs[*]}"
    else
        echo "${outputs:-out}"
    fi
}

# _cudasplitFirst VAR NAME...: VAR becomes the first NAME that is an output, else out.
_cudasplitFirst() {
    local var="$1" name
    shift
    local names=" $(_cudasplitOutputNames) "
    for name in "$@"; do
        if [[ "$names" == *" $name "* ]]; then
            printf -v "$var" %s "$name"
            return 0
        fi
    done
    printf -v "$var" %s out
}

# stdenv's output variables, set to where cudasplit's split puts those files (its layout's
# fallbacks: include -> dev -> out; bin, lib, doc -> out; man, info pages and developer docs
# are documentation, in doc).
_cudasplitSetOutputVars() {
    _cudasplitFirst outputDev dev
    _cudasplitFirst outputBin bin
    _cudasplitFirst outputInclude include dev
    _cudasplitFirst outputLib lib
    _cudasplitFirst outputDoc doc
    outputMan="$outputDoc" outputInfo="$outputDoc" outputDevman="$outputDoc"
    outputDevdoc="$outputDoc"
}

# After the split: stdenv's fixup must not move files between outputs, and must keep the
# propagation cudasplit wrote (the header above says why).
_cudasplitKeepSplit() {
    _cudasplitSetOutputVars
    local hook
    local -a kept=()
    for hook in ${preFixupHooks[@]+"${preFixupHooks[@]}"}; do
        case "$hook" in
            _moveToShare | _multioutDocs | _multioutDevs) ;;
            *) kept+=("$hook") ;;
        esac
    done
    preFixupHooks=(${kept[@]+"${kept[@]}"})
    [[ -n "${cudasplitNoPatch:-}" || -n "${dontPatchELF+set}" ]] || dontPatchELF=1
    [[ -n "${cudasplitNoPatch:-}" || -n "${dontStrip+set}" ]] || dontStrip=1
    [[ -z "${cudasplitNoNixSupport:-}" ]] || return 0
    [[ -n "${propagatedBuildOutputs+set}" ]] || propagatedBuildOutputs=
    _cudasplitPropagated=""
    local file="${!outputDev:-}/nix-support/propagated-build-inputs"
    [[ -z "${!outputDev:-}" || ! -f "$file" ]] || _cudasplitPropagated="$(< "$file")"
    postFixupHooks+=(_cudasplitRestorePropagation)
}

# postFixup: the outputs cudasplit listed in ${!outputDev}'s propagated-build-inputs, added
# back after stdenv's fixupPhase replaced that file with propagatedBuildInputs.
_cudasplitRestorePropagation() {
    [[ -n "${_cudasplitPropagated:-}" ]] || return 0
    local file="${!outputDev}/nix-support/propagated-build-inputs" word
    mkdir -p "${!outputDev}/nix-support"
    local now=""
    [[ ! -f "$file" ]] || now=" $(< "$file") "
    for word in $_cudasplitPropagated; do
        if [[ "$now" != *" $word "* ]]; then
            printf ' %s' "$word" >> "$file"
            now+=" $word "
        fi
    done
}

# _cudasplitWords VAR RESULT: VAR's words (a bash array under structured attrs, else a string).
_cudasplitWords() {
    local -n _result="$2"
    _result=()
    if [[ "$(declare -p "$1" 2>/dev/null)" == "declare -a"* ]]; then
        local -n _array="$1"
        _result=(${_array[@]+"${_array[@]}"})
    else
        read -ra _result <<< "${!1:-}"
    fi
}

if [[ -z "${installPhase-}" ]]; then
    installPhase=cudasplitInstallPhase
    # Our phase will run: the output variables say where the split puts things from now on
    # (multiple-outputs.sh, sourced after this hook, keeps values already set).
    _cudasplitSetOutputVars
    # Only when our phase runs: the tarball is streamed from $src rather than unpacked, ...
    if [[ -z "${cudasplitSource:-}" && -z "${dontUnpack+set}" ]]; then
        dontUnpack=1
    fi
    if [[ -z "${cudasplitNoPatch:-}" ]]; then
        # ... patchELF's --shrink-rpath would drop the driver dir and dlopen'ed package roots
        # (nothing NEEDs them), and strip breaks files whose program headers cudasplit moved
        # (elf-runpath.md: cupti 12.8 segfaults in dlopen after strip).
        [[ -n "${dontPatchELF+set}" ]] || dontPatchELF=1
        [[ -n "${dontStrip+set}" ]] || dontStrip=1
    fi
fi
