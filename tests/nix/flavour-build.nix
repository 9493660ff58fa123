# STAND-IN for an ORT build tree, for tests only: a real derivation, built by real Nix, that lays
# out what ORT's CMake install leaves (component archives in $out/lib, headers in $out/include,
# the FetchContent dependencies' archives under _deps/, the hybrid providers in the build tree)
# from real archives and shared objects made with the host's cc and ar, then runs the flavour's
# own post-install steps from nix/flavour-install.nix over it. What those steps leave is what
# tests/artefacts/test_flavour_layout.py checks with workbench.artefacts.layout.
#
#   linkage            static | hybrid | shared
#   cuda               a CUDA flavour (cuDNN is a stand-in directory with libcudnn.so.9)
#   runtimePathOk      whether the core embeds $out/lib/ (nixpkgs' GetRuntimePath postPatch)
#   dropProvider       leave libonnxruntime_providers_cuda.so out of the build tree
{
  linkage,
  cuda ? false,
  runtimePathOk ? true,
  dropProvider ? false,
  cudnn,
}:
let
  install = import ../../nix/flavour-install.nix {
    inherit linkage cuda;
    cudnnLib = if cuda then cudnn else null;
    nvcc = null;
  };
in
derivation {
  name = "standin-ort-${linkage}${if cuda then "-cuda" else ""}";
  version = "1.23.2";
  system = builtins.currentSystem;
  builder = "/bin/sh";
  PATH = "/usr/local/bin:/usr/bin:/bin";
  AR = "ar";
  RANLIB = "ranlib";
  inherit (install) postInstall;
  runtimePath = if runtimePathOk then "OUT/lib/" else "/nowhere/lib/";
  inherit linkage;
  dropProvider = if dropProvider then "1" else "";
  args = [
    "-c"
    ''
      set -eu
      mkdir -p "$TMPDIR/build" && cd "$TMPDIR/build"
      where=$(printf '%s' "$runtimePath" | sed "s|^OUT|$out|")
      printf 'const char *ort_runtime_path = "%s";\nint ort_core(void) { return 1; }\n' "$where" > core.c
      cc -c -fPIC core.c -o core.o
      mkdir -p "$out/lib" "$out/include"
      touch "$out/include/onnxruntime_c_api.h" "$out/include/onnxruntime_cxx_api.h"
      if [ "$linkage" = shared ]; then
        cc -shared core.o -o "$out/lib/libonnxruntime.so"
        cc -shared core.o -o "$out/lib/libonnxruntime_providers_cuda.so"
        cc -shared core.o -o "$out/lib/libonnxruntime_providers_shared.so"
      else
        ar rcs "$out/lib/libonnxruntime_common.a" core.o
        ar rcs "$out/lib/libonnxruntime_session.a" core.o
        for dep in onnx-build/libonnx.a onnx-build/libonnx_proto.a \
            protobuf-build/libprotobuf-lite.a re2-build/libre2.a \
            abseil_cpp-build/absl/base/libabsl_base.a pytorch_cpuinfo-build/libcpuinfo.a; do
          mkdir -p "_deps/$(dirname "$dep")"
          ar rcs "_deps/$dep" core.o
        done
      fi
      if [ "$linkage" = hybrid ]; then
        mkdir -p onnxruntime/providers
        [ -n "$dropProvider" ] || cc -shared core.o -o onnxruntime/providers/libonnxruntime_providers_cuda.so
        cc -shared core.o -o onnxruntime/providers/libonnxruntime_providers_shared.so
      fi
      eval "$postInstall"
    ''
  ];
}
