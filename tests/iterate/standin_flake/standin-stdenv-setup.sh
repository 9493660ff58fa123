# STAND-IN for nixpkgs' pkgs/stdenv/generic/setup.sh (nixpkgs ed142ab1): only what
# `workbench iterate` relies on (see README.md). nixpkgs cannot exist here.
# shellcheck shell=bash

runHook() {
    local hook=$1
    if [[ -n "${!hook:-}" ]]; then eval "${!hook}"; fi
}

runPhase() {
    local curPhase=$1
    echo "Running phase: $curPhase"
    eval "${!curPhase:-$curPhase}"
}

stripHash() {
    local base
    base=$(basename "$1")
    if [[ "${base:32:1}" == "-" ]]; then echo "${base:33}"; else echo "$base"; fi
}

unpackPhase() {
    runHook preUnpack
    local name
    name=$(stripHash "$src")
    cp -pr -- "$src" "$name"
    sourceRoot=$name
    chmod -R u+w -- "$sourceRoot"
    runHook postUnpack
}

patchPhase() {
    runHook prePatch
    local i
    for i in ${patches:-}; do
        echo "applying patch $i"
        patch -p1 --no-backup-if-mismatch < "$i"
    done
    runHook postPatch
}

installPhase() { :; }

genericBuild() {
    local phase
    for phase in unpackPhase patchPhase configurePhase buildPhase installPhase; do
        runPhase "$phase"
        if [[ "$phase" == unpackPhase ]]; then cd "$sourceRoot"; fi
    done
}

# Inputs: bin/ on PATH, include/ through the compiler wrapper, their setup hooks sourced.
PATH=/usr/bin:/bin
for input in ${nativeBuildInputs:-} ${buildInputs:-}; do
    if [[ -d "$input/bin" ]]; then PATH="$input/bin:$PATH"; fi
    if [[ -d "$input/include" ]]; then
        NIX_CFLAGS_COMPILE="${NIX_CFLAGS_COMPILE:-} -isystem $input/include"
    fi
    if [[ -d "$input/lib" ]]; then NIX_LDFLAGS="${NIX_LDFLAGS:-} -L$input/lib"; fi
    CMAKE_PREFIX_PATH="${CMAKE_PREFIX_PATH:+$CMAKE_PREFIX_PATH:}$input"
    if [[ -f "$input/nix-support/setup-hook" ]]; then source "$input/nix-support/setup-hook"; fi
done
export PATH NIX_CFLAGS_COMPILE NIX_LDFLAGS CMAKE_PREFIX_PATH
prefix=${prefix:-$out}
export prefix
