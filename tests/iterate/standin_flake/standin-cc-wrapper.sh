#!/bin/bash
# STAND-IN for nixpkgs' pkgs/build-support/cc-wrapper/cc-wrapper.sh (nixpkgs ed142ab1): the
# real compiler with NIX_CFLAGS_COMPILE appended after its own arguments (and NIX_LDFLAGS when
# it links), so flags and include paths from the derivation's environment reach every compile.
real=@real@
linking=1
for arg in "$@"; do
    case "$arg" in -c | -S | -E | -M | -MM) linking= ;; esac
done
# shellcheck disable=SC2086
if [[ -n "$linking" ]]; then
    exec "$real" "$@" ${NIX_CFLAGS_COMPILE:-} ${NIX_LDFLAGS:-}
else
    exec "$real" "$@" ${NIX_CFLAGS_COMPILE:-}
fi
