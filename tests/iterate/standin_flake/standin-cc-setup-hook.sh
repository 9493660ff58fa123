# STAND-IN for nixpkgs' pkgs/build-support/cc-wrapper/setup-hook.sh (nixpkgs ed142ab1): the
# wrapped compilers are the ones CMake finds.
export CC=cc CXX=c++
