# cuda-nvcc_@target_platform@'s activation (cudasplit's conda-forge profile; sourced by the
# conda client's activation, with CONDA_PREFIX set to the environment).
#
# The host compiler finds the CUDA headers (CCCL's too: thrust/, cub/, cuda/ live in
# include/cccl) and the libraries, the driver stub included, of this environment's
# targets/@targets_dir@ through the usual flags; nvcc uses $CXX as its host compiler when one is
# set (conda-forge's compiler packages set it). Each variable's previous value, or that it was
# unset, is kept in _CUDASPLIT_NVCC_SAVED_<name> so that deactivation restores it exactly.

_cudasplit_nvcc_save() {
    if eval "[ -n \"\${_CUDASPLIT_NVCC_SAVED_$1+x}\" ]"; then
        return 0    # activated twice without deactivating: the first saved value stays
    fi
    if eval "[ -n \"\${$1+x}\" ]"; then
        eval "export _CUDASPLIT_NVCC_SAVED_$1=\"set:\${$1}\""
    else
        eval "export _CUDASPLIT_NVCC_SAVED_$1=unset"
    fi
}

_cudasplit_nvcc_targets="${CONDA_PREFIX}/targets/@targets_dir@"
_cudasplit_nvcc_cflags="-I${_cudasplit_nvcc_targets}/include -I${_cudasplit_nvcc_targets}/include/cccl"
_cudasplit_nvcc_ldflags="-L${_cudasplit_nvcc_targets}/lib -L${_cudasplit_nvcc_targets}/lib/stubs"

for _cudasplit_nvcc_name in CFLAGS CPPFLAGS CXXFLAGS LDFLAGS NVCC_PREPEND_FLAGS; do
    _cudasplit_nvcc_save "$_cudasplit_nvcc_name"
done

export CFLAGS="${CFLAGS:+$CFLAGS }${_cudasplit_nvcc_cflags}"
export CPPFLAGS="${CPPFLAGS:+$CPPFLAGS }${_cudasplit_nvcc_cflags}"
export CXXFLAGS="${CXXFLAGS:+$CXXFLAGS }${_cudasplit_nvcc_cflags}"
export LDFLAGS="${LDFLAGS:+$LDFLAGS }${_cudasplit_nvcc_ldflags}"
# Without $CXX (no conda-forge compiler in the environment) nvcc keeps its own default, the
# g++ on PATH, and NVCC_PREPEND_FLAGS is left as it is.
if [ -n "${CXX:-}" ]; then
    export NVCC_PREPEND_FLAGS="${NVCC_PREPEND_FLAGS:+$NVCC_PREPEND_FLAGS }-ccbin=${CXX}"
fi

unset _cudasplit_nvcc_name _cudasplit_nvcc_targets _cudasplit_nvcc_cflags _cudasplit_nvcc_ldflags
unset -f _cudasplit_nvcc_save
