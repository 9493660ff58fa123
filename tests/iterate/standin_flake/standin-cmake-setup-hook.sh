# STAND-IN for nixpkgs' pkgs/by-name/cm/cmake/setup-hook.sh (nixpkgs ed142ab1): the parts of
# cmakeConfigurePhase that decide the build directory and the cache.
cmakeConfigurePhase() {
    runHook preConfigure
    cmakeBuildDir=${cmakeBuildDir:-build}
    mkdir -p "$cmakeBuildDir"
    cd "$cmakeBuildDir"
    cmakeDir=${cmakeDir:-..}
    local flags=()
    if [[ "${buildPhase:-}" == ninjaBuildPhase ]]; then flags+=(-GNinja); fi
    flags+=(
        "-DCMAKE_BUILD_TYPE=${cmakeBuildType:-Release}"
        "-DCMAKE_SKIP_BUILD_RPATH=ON"
        "-DCMAKE_INSTALL_PREFIX=$prefix"
    )
    # shellcheck disable=SC2086
    echo "cmake flags: ${flags[*]} $cmakeFlags ${cmakeFlagsArray[*]:-}"
    # shellcheck disable=SC2086
    cmake "$cmakeDir" "${flags[@]}" $cmakeFlags "${cmakeFlagsArray[@]}"
    runHook postConfigure
}
configurePhase=cmakeConfigurePhase
