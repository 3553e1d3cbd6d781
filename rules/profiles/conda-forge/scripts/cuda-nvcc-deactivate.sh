# cuda-nvcc_@target_platform@'s deactivation (cudasplit's conda-forge profile): every variable
# its activation changed gets back the value it had before, or is unset again if it was unset.
# A variable the activation did not save is left alone.

for _cudasplit_nvcc_name in CFLAGS CPPFLAGS CXXFLAGS LDFLAGS NVCC_PREPEND_FLAGS; do
    if eval "[ -n \"\${_CUDASPLIT_NVCC_SAVED_$_cudasplit_nvcc_name+x}\" ]"; then
        eval "_cudasplit_nvcc_saved=\"\${_CUDASPLIT_NVCC_SAVED_$_cudasplit_nvcc_name}\""
        case "$_cudasplit_nvcc_saved" in
            set:*) eval "export $_cudasplit_nvcc_name=\"\${_cudasplit_nvcc_saved#set:}\"" ;;
            *) unset "$_cudasplit_nvcc_name" ;;
        esac
        unset "_CUDASPLIT_NVCC_SAVED_$_cudasplit_nvcc_name"
    fi
done
unset _cudasplit_nvcc_name _cudasplit_nvcc_saved
