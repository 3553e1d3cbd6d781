# shellcheck shell=bash
# cudasplit consumer guards: checks a derivation that depends on a CUDA package runs on its own
# outputs after fixup. `split --consumer-guards` writes this file into the package's lib output
# (out when it has none) as nix-support/setup-hook, so stdenv sources it in every consumer
# (dev and out propagate lib); `cudasplit nix consumer-hook` prints its path, to source it by
# hand. One function, cudasplitConsumerGuards, joins postFixupHooks; in order it
#
#   1. runs the stubs hook first when it is loaded (cudasplitRemoveStubsFromRunpathAll; it is
#      idempotent), so a stubs RUNPATH entry it repairs is no violation;
#   2. with cudasplitDlopenRunpaths set: for every CUDA library an ELF file names (libnvrtc,
#      libcublasLt, libcudnn_*, libnvJitLink, ...; the regex below) that its RUNPATH cannot
#      find, appends the first of the consumer's input library directories holding it (what
#      Nixpkgs does by hand with appendRunpaths);
#   3. fails when an ELF file's RUNPATH is ambiguous: two of its directories hold a library of
#      the same name as different files (driver libraries excepted: cuda_compat shadows the
#      driver on purpose), naming file, library and directories;
#   4. fails when the outputs' run-time closure (every /nix/store path named in their bytes,
#      followed through the files of each path reached) holds a forbidden output, printing the
#      chain of files naming store paths; or when it is larger than the byte budget.
#
# Variables (plain, or with __structuredAttrs = true):
#   cudasplitNoAmbiguityCheck  non-empty: skip 3
#   cudasplitAllowAmbiguous    library names 3 accepts (space-separated)
#   cudasplitDlopenRunpaths    non-empty: do 2
#   cudasplitDlopenLibraryPath colon-separated directories 2 searches first; then the lib/ of
#                              every host input (collected with addEnvHooks 0) and the -L
#                              directories of NIX_LDFLAGS
#   cudasplitForbiddenOutputs  what the closure may never hold (default "static stubs compiler
#                              headers"; "" checks nothing): output names (static, stubs,
#                              include, dev, doc, samples, ...), "headers" (= include) and
#                              "compiler" (a path whose nix-support/cuda-component names one)
#   cudasplitClosureBudget     maximum bytes of the whole closure (regular files plus symlink
#                              lengths), all checked outputs together
#   cudasplitClosureOutputs    the consumer's outputs whose closure 4 checks (space-separated;
#                              default: all but dev, include, static and stubs, which are for
#                              builds, not run time: a dev output's .pc naming CUDA headers is
#                              fine; out referencing dev brings dev in and is checked)
#   cudasplitPatchelf          patchelf to use (default: patchelf from PATH)

if [[ -z ${cudasplitGuardsHookOnce-} ]]; then
    cudasplitGuardsHookOnce=1

    # Kept equal to cudasplit._dlopenaudit.CUDA_LIBRARY_PATTERN (a test checks).
    _cudasplitCudaLibraryPattern='lib(nvrtc|nvrtc-builtins|nvJitLink|cudart|cublas|cublasLt|cufft|cufftw|curand|cusparse|cusparseLt|cusolver|cusolverMg|nccl|cupti|nvperf_host|nvperf_target|nvToolsExt|nvvm|cudnn[A-Za-z0-9_]*|nvinfer[A-Za-z0-9_]*|nvonnxparser|nvjpeg|nvjpeg2k|npp[a-z_]*|cufile[a-z_]*|cutensor[A-Za-z]*|cudss[a-z_]*|nvshmem[a-z_]*|nvimgcodec|nvfatbin|nvptxcompiler|nvtiff|nvcomp[a-z_]*)\.so(\.[0-9%][0-9A-Za-z%.]*)?'
    # Kept equal to cudasplit._model.OUTPUT_NAMES (a test checks).
    _cudasplitOutputNames="out doc samples python bin dev include lib static stubs"
    cudasplitDlopenInputs=()

    _cudasplitCollectInput() {
        [[ -d "$1/lib" ]] && cudasplitDlopenInputs+=("$1/lib")
        return 0
    }
    if declare -F addEnvHooks >/dev/null; then
        # Offset 0: the consumer's host inputs (its buildInputs and what they propagate), the
        # libraries its outputs run with -- "$hostOffset" when this hook comes from a build
        # input, "$targetOffset" when it comes from a native build input (makeSetupHook).
        addEnvHooks 0 _cudasplitCollectInput
    fi

    # shellcheck disable=SC2154  # outputs: set by stdenv (a string, or an array with structured attrs)
    # _cudasplitOutputDirs RESULT [closure]: the outputs' directories; with "closure" only
    # those cudasplitCheckClosure starts from (cudasplitClosureOutputs).
    _cudasplitOutputDirs() {
        local -n _dirs="$1"
        local output dir
        local -a names=()
        _dirs=()
        if [[ "$(declare -p outputs 2>/dev/null)" == "declare -A"* ]]; then
            names=("${!outputs[@]}")
        else
            read -ra names <<< "${outputs:-out}"
        fi
        for output in "${names[@]}"; do
            if [[ ${2-} == closure ]]; then
                if [[ -n ${cudasplitClosureOutputs+set} ]]; then
                    [[ " $cudasplitClosureOutputs " == *" $output "* ]] || continue
                else
                    [[ " dev include static stubs " != *" $output "* ]] || continue
                fi
            fi
            dir="${!output:-}"
            [[ -n $dir && -d $dir ]] && _dirs+=("$dir")
        done
        return 0
    }

    _cudasplitElfFiles() {
        local dir file
        for dir in "$@"; do
            while IFS= read -r -d '' file; do
                [[ "$(head -c 4 "$file")" == $'\x7fELF' ]] && printf '%s\0' "$file"
            done < <(find "$dir" -type f -print0)
        done
        return 0
    }

    # The RUNPATH's directories, $ORIGIN expanded.
    _cudasplitSearchDirs() {
        local file="$1" rpath entry
        local -n _out="$2"
        local origin="${file%/*}"
        _out=()
        rpath="$("${cudasplitPatchelf:-patchelf}" --print-rpath "$file" 2>/dev/null)" || return 0
        local -a entries=()
        IFS=: read -ra entries <<< "$rpath"
        for entry in ${entries[@]+"${entries[@]}"}; do
            entry="${entry//\$\{ORIGIN\}/$origin}"
            _out+=("${entry//\$ORIGIN/$origin}")
        done
        return 0
    }

    _cudasplitIsDriver() {
        case "$1" in
            libcuda.so* | libnvidia-*.so* | libnvcuvid.so* | libnvrm*) return 0 ;;
        esac
        return 1
    }

    # cudasplitCheckAmbiguousRunpath FILE: messages on stderr, status 1 when ambiguous.
    cudasplitCheckAmbiguousRunpath() {
        local file="$1" dir entry name real status=0
        local -a dirs=()
        local -A firstDir=() firstReal=() seen=() allowed=()
        for name in ${cudasplitAllowAmbiguous-}; do allowed[$name]=1; done
        _cudasplitSearchDirs "$file" dirs
        for dir in ${dirs[@]+"${dirs[@]}"}; do
            [[ -n $dir && -d $dir && -z ${seen[$dir]-} ]] || continue
            seen[$dir]=1
            for entry in "$dir"/*; do
                name="${entry##*/}"
                [[ $name =~ \.so(\.|$) && -e $entry ]] || continue
                [[ -z ${allowed[$name]-} ]] || continue
                _cudasplitIsDriver "$name" && continue
                real="$(readlink -f "$entry")"
                if [[ -z ${firstDir[$name]-} ]]; then
                    firstDir[$name]="$dir"
                    firstReal[$name]="$real"
                elif [[ $real != "${firstReal[$name]}" ]] && ! cmp -s "$real" "${firstReal[$name]}"; then
                    echo "cudasplit: $file: ambiguous RUNPATH: $name is in ${firstDir[$name]} and $dir" \
                        "(different files; which one loads depends on the RUNPATH order)" >&2
                    status=1
                fi
            done
        done
        return $status
    }

    _cudasplitDlopenInputDirs() {
        local -n _inputs="$1"
        local dir flag
        local -a dirs=()
        _inputs=()
        IFS=: read -ra dirs <<< "${cudasplitDlopenLibraryPath:-}"
        dirs+=(${cudasplitDlopenInputs[@]+"${cudasplitDlopenInputs[@]}"})
        for flag in ${NIX_LDFLAGS-}; do
            [[ $flag == -L?* ]] && dirs+=("${flag#-L}")
        done
        for dir in ${dirs[@]+"${dirs[@]}"}; do
            [[ -n $dir && -d $dir ]] && _inputs+=("$dir")
        done
        return 0
    }

    # cudasplitAppendDlopenRunpath FILE: append input dirs for CUDA libraries FILE names.
    cudasplitAppendDlopenRunpath() {
        local file="$1" name glob dir old
        local -a names=() dirs=() inputs=() add=()
        mapfile -t names < <(grep -aoE "$_cudasplitCudaLibraryPattern" "$file" | sort -u)
        ((${#names[@]})) || return 0
        old="$("${cudasplitPatchelf:-patchelf}" --print-rpath "$file" 2>/dev/null)" || return 0
        _cudasplitSearchDirs "$file" dirs
        _cudasplitDlopenInputDirs inputs
        for name in "${names[@]}"; do
            glob="$(sed -E 's/%[0-9.]*[sdu]/*/g' <<< "$name")"
            for dir in ${dirs[@]+"${dirs[@]}"} ${add[@]+"${add[@]}"}; do
                compgen -G "$dir/$glob" >/dev/null && continue 2
            done
            for dir in ${inputs[@]+"${inputs[@]}"}; do
                if compgen -G "$dir/$glob" >/dev/null; then
                    echo "cudasplit: $file dlopens $name: appending $dir to its RUNPATH" >&2
                    add+=("$dir")
                    continue 2
                fi
            done
        done
        ((${#add[@]})) || return 0
        local IFS=:
        "${cudasplitPatchelf:-patchelf}" --set-rpath "${old:+$old:}${add[*]}" "$file"
    }

    # _cudasplitOutputWords PATH: its output name and categories (see cudasplit._budget).
    _cudasplitOutputWords() {
        local path="$1" meta="$1/nix-support/cuda-component" out="" last
        if [[ -f $meta ]] && grep -q '\[output\]="' "$meta"; then
            out="$(sed -nE 's/.*\[output\]="([^"]*)".*/\1/p' "$meta" | head -n 1)"
        else
            last="${path##*-}"
            [[ " $_cudasplitOutputNames " == *" $last "* ]] && out="$last"
        fi
        local words="$out"
        [[ -f $meta ]] && grep -q '\[compiler\]=' "$meta" && words+=" compiler"
        [[ $out == include ]] && words+=" headers"
        echo "$words"
    }

    # cudasplitCheckClosure DIR...: forbidden outputs and the byte budget of their closure.
    cudasplitCheckClosure() {
        local forbidden="${cudasplitForbiddenOutputs-static stubs compiler headers}"
        local budget="${cudasplitClosureBudget:-}"
        [[ -n ${forbidden// /} || -n $budget ]] || return 0
        local store="${NIX_STORE:-/nix/store}"
        local re="$store/[0-9a-df-np-sv-z]{32}-[A-Za-z0-9+._?=-]+"
        local -A parent=() via=() root=()
        local -a queue=()
        local node line ref file target word status=0 total=0 size
        for node in "$@"; do root[$node]=1; parent[$node]=""; queue+=("$node"); done
        while ((${#queue[@]})); do
            node="${queue[0]}"
            queue=("${queue[@]:1}")
            size="$(find "$node" \( -type f -o -type l \) -printf '%s\n' | awk '{s += $1} END {print s + 0}')"
            total=$((total + size))
            while IFS= read -r line; do
                ref="${line##*:}"
                file="${line%:*}"
                [[ $ref == "$node" || -n ${parent[$ref]+set} || ! -e $ref ]] && continue
                parent[$ref]="$node"
                via[$ref]="$file"
                queue+=("$ref")
            done < <(
                grep -rHaoE "$re" "$node" 2>/dev/null || true
                find "$node" -type l -printf '%p\t%l\n' | while IFS=$'\t' read -r file target; do
                    [[ $target =~ ^($re) ]] && echo "$file:${BASH_REMATCH[1]}"
                done
                true
            )
        done
        for node in "${!parent[@]}"; do
            [[ -z ${root[$node]-} ]] || continue
            for word in $(_cudasplitOutputWords "$node"); do
                [[ " $forbidden " == *" $word "* ]] || continue
                echo "cudasplit: closure holds the forbidden $word output $node (cudasplitForbiddenOutputs):" >&2
                ref="$node"
                local -a chain=()
                while [[ -z ${root[$ref]-} ]]; do
                    chain=("    ${via[$ref]} names $ref" ${chain[@]+"${chain[@]}"})
                    ref="${parent[$ref]}"
                done
                printf '%s\n' "${chain[@]}" >&2
                status=1
                break
            done
        done
        if [[ -n $budget ]] && ((total > budget)); then
            echo "cudasplit: run-time closure is $total bytes, over cudasplitClosureBudget=$budget" >&2
            status=1
        fi
        return $status
    }

    cudasplitConsumerGuards() {
        local file status=0
        local -a dirs=() elves=() roots=()
        if declare -F cudasplitRemoveStubsFromRunpathAll >/dev/null; then
            cudasplitRemoveStubsFromRunpathAll
        fi
        _cudasplitOutputDirs dirs
        ((${#dirs[@]})) || return 0
        mapfile -d '' -t elves < <(_cudasplitElfFiles "${dirs[@]}")
        if [[ -n ${cudasplitDlopenRunpaths-} ]]; then
            for file in ${elves[@]+"${elves[@]}"}; do cudasplitAppendDlopenRunpath "$file"; done
        fi
        if [[ -z ${cudasplitNoAmbiguityCheck-} ]]; then
            for file in ${elves[@]+"${elves[@]}"}; do
                cudasplitCheckAmbiguousRunpath "$file" || status=1
            done
        fi
        _cudasplitOutputDirs roots closure
        if ((${#roots[@]})); then
            cudasplitCheckClosure "${roots[@]}" || status=1
        fi
        if ((status)); then
            echo "cudasplit: consumer guards failed (see above; variables: cudasplit/nix/consumer-guards-hook.sh)" >&2
            return 1
        fi
        return 0
    }

    postFixupHooks+=(cudasplitConsumerGuards)
fi
