# STAND-IN for nixpkgs' pkgs/by-name/ni/ninja/setup-hook.sh (nixpkgs ed142ab1).
ninjaBuildPhase() {
    runHook preBuild
    ninja -j"${NIX_BUILD_CORES:-1}"
    runHook postBuild
}
ninjaInstallPhase() {
    runHook preInstall
    ninja install
    runHook postInstall
}
buildPhase=ninjaBuildPhase
installPhase=ninjaInstallPhase
