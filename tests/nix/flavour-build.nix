# STAND-IN for an ORT build tree, for tests only: a real derivation, built by real Nix, that lays
# out what ORT's CMake install leaves (component archives in $out/lib, headers in $out/include,
# the FetchContent dependencies' archives under _deps/, the hybrid providers in the build tree)
# from real archives and shared objects made with the host's cc and ar, then runs the flavour's
# own steps from nix/flavour-install.nix over it: preConfigure before the "build", postInstall
# after it. What those steps leave is what tests/artefacts/test_flavour_layout.py checks with
# workbench.artefacts.layout.
#
# As in a real build of nixpkgs' onnxruntime (pkgs/by-name/on/onnxruntime/package.nix:
# FETCHCONTENT_TRY_FIND_PACKAGE_MODE=ALWAYS, protobuf and cpuinfo in buildInputs), _deps/ holds
# no protobuf and no cpuinfo archive: find_package found nixpkgs' and ORT built neither. Their
# archives are in `protobuf` and `cpuinfo`, stand-ins for those inputs (directories the test
# makes, with lib/*.a when the input has a static archive).
#
#   linkage            static | hybrid | shared
#   cuda               a CUDA flavour (cuDNN is a stand-in directory with libcudnn.so.9)
#   runtimePathOk      whether the core embeds $out/lib/ (nixpkgs' GetRuntimePath postPatch)
#   dropProvider       leave libonnxruntime_providers_cuda.so out of the build tree
#   nvcc               static CUDA only: a directory with bin/nvcc (tests/nix/standin-nvcc)
#   architectures      the CMAKE_CUDA_ARCHITECTURES list nvcc -dlink gets as -gencode
#   pname              the package's name, as the flavour's attr names it (onnxruntime-cpu):
#                      the store path is then PNAME-1.23.2, as a real flavour's
#
# Its outputs are out and debug, as a real flavour's (nixpkgs' recipe sets separateDebugInfo =
# true; make-derivation.nix adds `debug`): the shared objects are built with -g and a build id,
# and after the install steps the separate-debug-info hook's own steps run over $out
# (pkgs/build-support/setup-hooks/separate-debug-info.sh as stored text 52503013139, the newest
# form the index holds, commit not named; 01f19f54e046417ca52ef67f5277ffe11de91371 is an older
# one: every ELF file of the output with a 40-digit build id gets `objcopy --only-keep-debug`
# into $debug/lib/debug/.build-id/XX/REST.debug and `strip --strip-debug`; a static archive is
# no ELF file, so the hook leaves it to stdenv's strip phase, which the newer hook no longer
# turns off).
{
  linkage,
  cuda ? false,
  runtimePathOk ? true,
  dropProvider ? false,
  cudnn,
  protobuf ? null,
  cpuinfo ? null,
  nvcc ? null,
  architectures ? [ ],
  pname ? null,
}:
let
  staticCore = linkage != "shared";
  install = import ../../nix/flavour-install.nix {
    inherit linkage cuda architectures;
    cudnnLib = if cuda then cudnn else null;
    nvcc = if nvcc == null then null else "${nvcc}";
    # As nix/overrides.nix passes them: the inputs' lib/ directories.
    inputArchives =
      if staticCore then
        {
          "libprotobuf-lite.a" = "${protobuf}/lib";
          "libcpuinfo.a" = "${cpuinfo}/lib";
        }
      else
        { };
  };
in
derivation {
  outputs = [
    "out"
    "debug"
  ];
  name = if pname != null then "${pname}-1.23.2" else "standin-ort-${linkage}${if cuda then "-cuda" else ""}";
  version = "1.23.2";
  system = builtins.currentSystem;
  builder = "/bin/sh";
  PATH = "/usr/local/bin:/usr/bin:/bin";
  AR = "ar";
  RANLIB = "ranlib";
  inherit (install) preConfigure postInstall;
  runtimePath = if runtimePathOk then "OUT/lib/" else "/nowhere/lib/";
  inherit linkage;
  cuda = if cuda then "1" else "";
  dropProvider = if dropProvider then "1" else "";
  args = [
    "-c"
    ''
      set -eu
      mkdir -p "$TMPDIR/build" && cd "$TMPDIR/build"
      eval "$preConfigure"
      echo "stand-in: building the ORT tree"
      where=$(printf '%s' "$runtimePath" | sed "s|^OUT|$out|")
      printf 'const char *ort_runtime_path = "%s";\nint ort_core(void) { return 1; }\n' "$where" > core.c
      cc -g -c -fPIC core.c -o core.o
      mkdir -p "$out/lib" "$out/include"
      touch "$out/include/onnxruntime_c_api.h" "$out/include/onnxruntime_cxx_api.h"
      if [ "$linkage" = shared ]; then
        cc -shared -Wl,--build-id core.o -o "$out/lib/libonnxruntime.so"
        cc -shared -Wl,--build-id core.o -o "$out/lib/libonnxruntime_providers_cuda.so"
        cc -shared -Wl,--build-id core.o -o "$out/lib/libonnxruntime_providers_shared.so"
      else
        ar rcs "$out/lib/libonnxruntime_common.a" core.o
        ar rcs "$out/lib/libonnxruntime_session.a" core.o
        # What ORT builds itself from FETCHCONTENT_SOURCE_DIR_*: no protobuf, no cpuinfo.
        for dep in onnx-build/libonnx.a onnx-build/libonnx_proto.a re2-build/libre2.a \
            abseil_cpp-build/absl/base/libabsl_base.a; do
          mkdir -p "_deps/$(dirname "$dep")"
          ar rcs "_deps/$dep" core.o
        done
      fi
      if [ "$linkage" = static ] && [ -n "$cuda" ]; then
        # The static CUDA provider as ORT's install leaves it: host objects and the .cu objects
        # whose relocatable device code nvcc -dlink links.
        printf 'int provider_kernel_%s(void) { return 2; }\n' a > kernels_a.c
        printf 'int provider_kernel_%s(void) { return 3; }\n' b > kernels_b.c
        cc -c -fPIC kernels_a.c -o kernels_a.cu.o
        cc -c -fPIC kernels_b.c -o kernels_b.cu.o
        cp core.o cuda_execution_provider.cc.o
        ar rcs "$out/lib/libonnxruntime_providers_cuda.a" \
          kernels_a.cu.o kernels_b.cu.o cuda_execution_provider.cc.o
      fi
      if [ "$linkage" = hybrid ]; then
        mkdir -p onnxruntime/providers
        [ -n "$dropProvider" ] || cc -shared -Wl,--build-id core.o -o onnxruntime/providers/libonnxruntime_providers_cuda.so
        cc -shared -Wl,--build-id core.o -o onnxruntime/providers/libonnxruntime_providers_shared.so
      fi
      eval "$postInstall"
      # separate-debug-info.sh's _separateDebugInfo, over $out.
      dst="$debug/lib/debug/.build-id"
      mkdir -p "$dst"
      find "$out" -type f | while read -r i; do
        magic=$(head -c 4 "$i" | tail -c 3)
        [ "$magic" = ELF ] || continue
        id=$(readelf -n "$i" | sed 's/.*Build ID: \([0-9a-f]*\).*/\1/; t; d')
        [ "''${#id}" = 40 ] || { echo "could not find build ID of $i, skipping" >&2; continue; }
        mkdir -p "$dst/$(printf %.2s "$id")"
        objcopy --only-keep-debug "$i" "$dst/$(printf %.2s "$id")/''${id#??}.debug"
        strip --strip-debug "$i"
      done
      # The shell's own exit last, not a coreutil's (tests/iterate/test_standin_builders.py).
      exit 0
    ''
  ];
}
