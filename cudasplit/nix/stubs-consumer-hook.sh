# shellcheck shell=bash
# cudasplit: written into every output that holds a stubs directory as nix-support/setup-hook,
# so stdenv sources it in each derivation that depends on that output (what Nixpkgs does by
# propagating removeStubsFromRunpathHook from its stubs outputs).
#
# A consumer linked against a stub (libcuda.so, libnvidia-ml.so) records the stubs directory
# in its RUNPATH; at run time the loader would then pick the stub and the program fails with
# "CUDA driver is a stub library" (NixOS/nixpkgs#320145). After fixup, the first RUNPATH entry
# ending in /lib/stubs becomes the driver directory and later ones are dropped (#459416); an
# entry that already names the driver directory counts as the first.
#
# Variables: cudasplitDriverLinkLib (default @driverLinkLib@), cudasplitPatchelf (default
# patchelf from PATH).

if [[ -z ${cudasplitStubsHookOnce-} ]]; then
    cudasplitStubsHookOnce=1

    cudasplitRemoveStubsFromRunpath() {
        local file="$1" entry old
        local driver="${cudasplitDriverLinkLib:-@driverLinkLib@}"
        local patchelf="${cudasplitPatchelf:-patchelf}"
        local -i seen=0
        local -a entries=() kept=()
        # Files that are not dynamically linked make patchelf fail: nothing to do for them.
        old="$("$patchelf" --print-rpath "$file" 2>/dev/null)" || return 0
        [[ -n $old ]] || return 0
        IFS=: read -ra entries <<< "$old"
        for entry in "${entries[@]}"; do
            case $entry in
                */lib/stubs | */lib/stubs/)
                    if ((seen == 0)); then kept+=("$driver"); seen=1; fi
                    ;;
                *)
                    kept+=("$entry")
                    [[ $entry != "$driver" ]] || seen=1
                    ;;
            esac
        done
        local IFS=:
        [[ "${kept[*]}" == "$old" ]] || "$patchelf" --set-rpath "${kept[*]}" "$file"
    }

    cudasplitRemoveStubsFromRunpathAll() {
        local output dir file
        local -a names=()
        # outputs is an associative array under __structuredAttrs, a string otherwise.
        if [[ "$(declare -p outputs 2>/dev/null)" == "declare -A"* ]]; then
            names=("${!outputs[@]}")
        else
            read -ra names <<< "${outputs:-out}"
        fi
        for output in "${names[@]}"; do
            dir="${!output:-}"
            [[ -n $dir && -d $dir ]] || continue
            while IFS= read -r -d '' file; do
                # Only ELF files (magic \x7fELF); patchelf skips static ones itself.
                [[ "$(head -c 4 "$file")" == $'\x7fELF' ]] || continue
                cudasplitRemoveStubsFromRunpath "$file"
            done < <(find "$dir" -type f -print0)
        done
    }

    postFixupHooks+=(cudasplitRemoveStubsFromRunpathAll)
fi
