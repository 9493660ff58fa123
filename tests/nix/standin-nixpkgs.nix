# STAND-IN FOR NIXPKGS, for tests only. It builds no ONNX Runtime.
#
# nixpkgs cannot be fetched where the tests run (no network), so this file offers the
# attributes nix/ uses, with nixpkgs' calling conventions, and RECORDS what it is given:
#   - pkgs.onnxruntime, pkgs.protobuf and pythonXXXPackages.onnxruntime have `override`
#     (arguments are merged, as with callPackage) and `overrideAttrs` (old: { ... }, applied in
#     order on top of the recipe's `finalAttrs: { ... }`, as in mkDerivation); their attributes
#     are the real recipes' (below), with leaves for the packages and fetchers they name;
#   - every package is a real derivation with mkDerivation's outputs (`nix build` of it leaves
#     one out-link per output), and every package-like value has `standinRecord`: plain data
#     describing it, so a test can evaluate it with `nix-instantiate --eval --strict --json`.
# Package sets (cudaPackages_12_9, python313Packages) record as "<name>".
#
# FAITHFUL where nix/ depends on nixpkgs' behaviour. Each modelled behaviour cites the nixpkgs
# file it models and the revision it was read at. The pin is
# ed142ab1b3a092c4d149245d0c4126a5d7ea00b0 (nixpkgs-unstable of 2026-01-20); the reference
# store holds none of these files at the pin itself, so each was read at the nearest stored
# version, as said:
#   - CUDA package sets: pkgs/top-level/all-packages.nix (cudaPackages_12_6/_12_8/_12_9/_13_0;
#     cudaPackages = cudaPackages_12 = cudaPackages_12_8) and pkgs/top-level/aliases.nix
#     (cudaPackages_12_0 ... _12_5 = throw "CUDA 12.x has been removed from Nixpkgs, ...",
#     added 2025-08-08); read at aliases.nix 51cf5b747fa2b5c5364a17a0b13210965e4191cd.
#   - onnxruntime (ortBase below): pkgs/by-name/on/onnxruntime/package.nix at 1.23.2, the
#     version with `mkDerivation (finalAttrs: ...)`, protobuf' and the musl-cstdint patch (ORT
#     PR 26969); the index holds it as stored text 1275900338 without naming its commit, and
#     holds no version at the pin. It differs from 02688433ee15c0ca0913e2955e0c44a7477e497d
#     (1.22.2: `rec`, cpuinfo-logging.patch), which this file modelled before. Modelled:
#     __structuredAttrs = true; separateDebugInfo = true; outputs out dev (+ dist with
#     pythonSupport); the five patches in order (fetchpatch d6e712c5..., fetchpatch
#     8ebd0bf1..., ./musl-execinfo.patch, ./musl-cstdint.patch, fetchurl Alpine's
#     0001-Remove-MATH_NO_EXCEPT-macro.patch); env.NIX_LDFLAGS = "-z,noexecstack" on Linux;
#     postPatch (libonnxruntime.pc, cudnn_frontend, GetRuntimePath() -> "$out/lib/");
#     FETCHCONTENT_SOURCE_DIR_{ABSEIL_CPP,DLPACK,FLATBUFFERS,MP11,ONNX,RE2,SAFEINT} (+ CUTLASS
#     with CUDA); ONNX_CUSTOM_PROTOC_EXECUTABLE = getExe protobuf'; onnxruntime_USE_FULL_PROTOBUF;
#     onnxruntime_BUILD_UNIT_TESTS = finalAttrs.doCheck; onnxruntime_ENABLE_LTO off for CUDA
#     >= 12.8; "--compile-no-warning-as-error" with CUDA; requiredSystemFeatures big-parallel,
#     disallowedRequisites = [ getBin cuda_nvcc ] and postFixup's remove-references-to on
#     libonnxruntime_providers_cuda.so with CUDA; passthru cudaSupport, cudaPackages,
#     ncclSupport, protobuf = protobuf', tests.python; protobuf' = protobuf.overrideAttrs
#     (conda-forge's nvcc fix for message_lite.h) in nativeBuildInputs, protobuf itself in no
#     input list.
#   - protobuf (protobufBase): pkgs/development/libraries/protobuf/generic.nix at
#     0145c6da2896513d94440e7fb41c11487aa3de16 (AFTER the pin: it already carries patches for
#     protobuf 34, and the nvcc fix itself for 30 <= version < 35, which would make
#     package.nix's protobuf' unnecessary; nix/ takes passthru.protobuf, right either way):
#     `enableShared ? !isStatic` sets protobuf_BUILD_SHARED_LIBS, __structuredAttrs,
#     separateDebugInfo, meta.mainProgram protoc. Version 32.1 from package.nix's comment.
#   - python3Packages.onnxruntime: pkgs/development/python-modules/onnxruntime/default.nix at
#     0145c6da2896513d94440e7fb41c11487aa3de16 (after the pin; not stored nearer):
#     src = onnxruntime.dist, buildInputs [ onednn re2 onnxruntime.protobuf onnxruntime ] and
#     the CUDA libraries from onnxruntime.passthru, env.NIX_LDFLAGS,
#     pythonImportsCheck = [ "onnxruntime" ] except on aarch64-linux, meta = onnxruntime.meta.
#   - mkDerivation: pkgs/stdenv/generic/make-derivation.nix (stored text 51776062159, commit
#     not named by the index): a name in both `env` and the derivation's attributes is refused
#     ("The `env` attribute set cannot contain any attributes passed to derivation"); `env`
#     values must be strings (or bools, ints, derivations); with __structuredAttrs only `env`
#     becomes environment variables, and {dis,}allowed{Requisites,References} become
#     outputChecks.<output> for every output but `debug`; `outputs' = outputs ++ optional
#     separateDebugInfo' "debug"`, and separateDebugInfo with reference checks but without
#     __structuredAttrs is refused.
#   - the cc-wrapper: pkgs/build-support/cc-wrapper/cc-wrapper.sh runs
#     `cc $NIX_CFLAGS_COMPILE_BEFORE <the command line> $NIX_CFLAGS_COMPILE`, so those flags come
#     AFTER CMake's and win; nvcc's host compiler is that same wrapped compiler. CMake puts
#     CFLAGS/CXXFLAGS (read at configure) into CMAKE_<LANG>_FLAGS, followed by
#     CMAKE_<LANG>_FLAGS_RELEASE ("-O3 -DNDEBUG"); CUDAFLAGS reach nvcc, whose -Xcompiler
#     arguments reach its host compiles. `derived.compileLines` is that order, per kind of file.
#   - pythonRuntimeDepsCheckHook: pkgs/development/interpreters/python/hooks/
#     python-runtime-deps-check-hook.py at 0137840114d1444c766db37c01e96258e4edf5fb: every
#     requirement in the wheel's METADATA (pyproject's dependencies; markers evaluated) must be
#     installed and its version inside the specifier, else the build fails with
#     "  - NAME<spec> not satisfied by version V". The real hook fails the build; here the same
#     check fails evaluation of the package, with the same message.
#
# Used as `import ./standin-nixpkgs.nix { system = ...; config = ...; }`, like nixpkgs.
{
  system ? "x86_64-linux",
  config ? { },
  overlays ? [ ],
  ...
}:
let
  inherit (builtins)
    foldl'
    isAttrs
    isFunction
    isList
    isPath
    mapAttrs
    ;

  # Any value -> JSON-able data. Paths become strings (no copy into the store), functions a
  # marker, stand-in packages their record.
  describe =
    value:
    if isFunction value then
      "<function>"
    else if isPath value then
      toString value
    else if isList value then
      map describe value
    else if isAttrs value then
      if value ? standinOpaque then
        "<${value.standinOpaque}>"
      else if value ? standinRecord then
        value.standinRecord
      else if value ? standinSet then
        "<${value.standinSet}>"
      else
        mapAttrs (_: describe) value
    else
      value;

  storePath = name: "/nix/store/00000000000000000000000000000000-standin-${name}";

  # A package nothing overrides: records as its name.
  leaf = name: {
    inherit name;
    pname = name;
    outPath = storePath name;
    standinRecord = name;
    meta = { };
  };

  # callPackage + mkDerivation in miniature. `base args finalAttrs` gives the attributes (the
  # recipe's `mkDerivation (finalAttrs: { ... })`, fed back the final attributes, so an
  # overrideAttrs of `version` or `doCheck` reaches what the recipe derives from them);
  # overrideAttrs functions apply on top in order; passthru is merged into the package; the
  # outputs are mkDerivation's (`separateDebugInfo` adds `debug`), each one an attribute.
  overridable =
    standin: base: args: layers:
    let
      attrs = foldl' (acc: layer: acc // layer acc) (base args attrs) layers;
      # A real derivation that `nix build` builds here: it records what it was given and lays
      # out the files the workbench looks for afterwards (a flavour's promised layout), one
      # directory per output. Its out path hashes every attribute, so asking for it forces them
      # all, and make-derivation's checks with them.
      # mkDerivation's name when only pname and version are given (pkgs/stdenv/generic/
      # make-derivation.nix): `flox build` reads it, and nix-instantiate needs it.
      name = attrs.name or "${attrs.pname}-${attrs.version}";
      outputs = outputsOf attrs;
      built = standinDerivation name attrs outputs;
      forced = value: builtins.deepSeq (describe attrs) (builtins.seq (derive attrs) value);
      # `drv.dev`, `drv.debug`, ...: the same package seen as that output, as a real one.
      outputAttr = output: {
        name = output;
        value = {
          inherit name;
          type = "derivation";
          outputName = output;
          inherit (built.${output}) drvPath;
          outPath = forced built.${output}.outPath;
          standinRecord = "${name}.${output}";
        };
      };
    in
    (attrs.passthru or { })
    // attrs
    // builtins.listToAttrs (map outputAttr outputs)
    // {
      inherit name outputs;
      inherit (built) type drvPath outputName;
      outPath = forced built.outPath;
      standinRecord = {
        inherit standin importArgs;
        overrideArgs = describe args;
        overrideAttrsCalls = builtins.length layers;
        attrs = describe attrs;
        derived = describe (derive attrs);
      };
      override = more: overridable standin base (args // more) layers;
      overrideAttrs = layer: overridable standin base args (layers ++ [ layer ]);
    };

  # pkgs/stdenv/generic/make-derivation.nix (stored text id 51776062159, see the top):
  # `outputs' = outputs ++ optional separateDebugInfo' "debug"` (separateDebugInfo' is
  # separateDebugInfo on Linux), and separateDebugInfo with {dis,}allowed{Requisites,References}
  # but without __structuredAttrs is refused.
  outputsOf =
    attrs:
    let
      separate = (attrs.separateDebugInfo or false) && isLinux;
      checks = builtins.any (name: attrs ? ${name}) [
        "disallowedReferences"
        "disallowedRequisites"
        "allowedRequisites"
        "allowedReferences"
      ];
    in
    if separate && checks && !(attrs.__structuredAttrs or false) then
      throw "separateDebugInfo = true in ${attrs.pname or "mkDerivation argument"} requires __structuredAttrs if {dis,}allowedRequisites or {dis,}allowedReferences is set"
    else
      (attrs.outputs or [ "out" ]) ++ (if separate then [ "debug" ] else [ ]);

  isLinux = builtins.match ".*-linux" system != null;

  # What `nix build` of a stand-in package really builds: no ORT (it cannot be built here), but
  # one directory per output: `out` holds its record as nix-support/workbench-standin.json and
  # a flavour's promised files (each glob with its `*` as "standin", so the workbench's layout
  # check finds them), for a Python environment bin/python running the Python on the build's
  # PATH; `debug` holds lib/debug/.build-id/ (where separate-debug-info.sh puts the .debug
  # files gdb finds by build id); every other output a nix-support/ directory.
  standinDerivation =
    name: attrs: outputs:
    derivation {
      inherit name system outputs;
      builder = "/bin/sh";
      PATH = "/usr/local/bin:/usr/bin:/bin";
      record = builtins.toJSON (describe attrs);
      produces = builtins.concatStringsSep " " (
        map (builtins.replaceStrings [ "*" ] [ "standin" ]) (attrs.passthru.workbench.produces or [ ])
      );
      pythonEnvironment = if attrs.standinPythonEnvironment or false then "1" else "";
      # The release of the onnxruntime in a Python environment: the real one's module reports
      # the version it was built as; this environment runs the build machine's Python, whose
      # onnxruntime wheel (if any) is another version, so its bin/python makes
      # onnxruntime.__version__ say this one (what `workbench smoke` checks).
      ortVersion = attrs.standinOrtVersion or "";
      args = [
        "-c"
        ''
          set -e
          for output in $outputs; do
            eval "dir=\$$output"
            mkdir -p "$dir/nix-support"
            echo "$output" > "$dir/nix-support/standin-output"
          done
          case " $outputs " in
            *" debug "*) mkdir -p "$debug/lib/debug/.build-id" ;;
          esac
          printf '%s' "$record" > "$out/nix-support/workbench-standin.json"
          for path in $produces; do
            mkdir -p "$out/$(dirname "$path")"
            echo "stand-in $path" > "$out/$path"
          done
          if [ -n "$pythonEnvironment" ]; then
            mkdir -p "$out/bin"
            printf '#!/bin/sh\nexec python3 "$@"\n' > "$out/bin/python"
            if [ -n "$ortVersion" ]; then
              mkdir -p "$out/standin-site"
              printf '%s\n' \
                'import importlib.abc, importlib.util, sys' \
                'class StandinRelease(importlib.abc.MetaPathFinder):' \
                '    def find_spec(self, name, path=None, target=None):' \
                '        if name != "onnxruntime":' \
                '            return None' \
                '        sys.meta_path.remove(self)' \
                '        try:' \
                '            spec = importlib.util.find_spec(name)' \
                '        finally:' \
                '            sys.meta_path.insert(0, self)' \
                '        if spec is None or spec.loader is None:' \
                '            return spec' \
                '        run = spec.loader.exec_module' \
                '        def exec_module(module):' \
                '            run(module)' \
                "            module.__version__ = '$ortVersion'" \
                '        spec.loader.exec_module = exec_module' \
                '        return spec' \
                'sys.meta_path.insert(0, StandinRelease())' \
                > "$out/standin-site/sitecustomize.py"
              printf '#!/bin/sh\nPYTHONPATH="%s/standin-site''${PYTHONPATH:+:$PYTHONPATH}" exec python3 "$@"\n' "$out" > "$out/bin/python"
            fi
            chmod +x "$out/bin/python"
          fi
          # The shell's own exit last, not chmod's (tests/iterate/test_standin_builders.py).
          exit 0
        ''
      ];
    };

  # python.withPackages: an environment whose bin/python imports the packages chosen.
  pythonWithPackages =
    label: set: choose:
    let
      chosen = choose set;
      built = standinDerivation "${label}-env" {
        standinPythonEnvironment = true;
        packages = chosen;
        standinOrtVersion = builtins.head (map (package: package.version or "") chosen ++ [ "" ]);
      } [ "out" ];
    in
    recordedCall "${label}.withPackages" "${label}-env" chosen
    // {
      inherit (built) type drvPath outPath outputName;
    };

  # pkgs/by-name/on/onnxruntime/package.nix at 1.23.2, as the pin has it (see the top for the
  # revision read): every attribute the recipe sets, with the stand-in's leaves for nixpkgs'
  # packages and fetchers. `finalAttrs` is the final attribute set (mkDerivation (finalAttrs:
  # ...)): the unit tests follow finalAttrs.doCheck, the source tag finalAttrs.version.
  ortBase =
    args: finalAttrs:
    let
      cuda = args.cudaSupport;
      python = args.pythonSupport;
      py = args.python3Packages;
      cudaPackages = args.cudaPackages;
      nvcc = cudaPackages.cuda_nvcc;
      ncclSupport = args.ncclSupport or (cuda && cudaPackages.nccl.meta.available);
      withFullProtobuf = args.withFullProtobuf or false;
      protobuf = args.protobuf or pkgs.protobuf;
      # protobuf' = protobuf.overrideAttrs (old: { patches = old.patches ++ [ nvcc fix ]; }):
      # the protobuf ORT is built with (nativeBuildInputs, ONNX_CUSTOM_PROTOC_EXECUTABLE) and
      # passthru.protobuf, a different derivation from `protobuf` itself.
      protobuf' = protobuf.overrideAttrs (old: {
        patches = (old.patches or [ ]) ++ [
          (fetchpatch {
            name = "Workaround nvcc bug in message_lite.h";
            url = "https://raw.githubusercontent.com/conda-forge/protobuf-feedstock/737a13ea0680484c08e8e0ab0144dab82c10c1b3/recipe/patches/0010-Workaround-nvcc-bug-in-message_lite.h.patch";
          })
        ];
      });
      cmakeBool = name: value: "-D${name}:BOOL=${if value then "TRUE" else "FALSE"}";
      cmakeFeature = name: value: "-D${name}:STRING=${value}";
      source = name: fetchFromGitHub { inherit name; };
      effectiveSystem = system;
    in
    {
      pname = "onnxruntime";
      version = "1.23.2";
      src = fetchFromGitHub {
        name = "onnxruntime-src";
        owner = "microsoft";
        repo = "onnxruntime";
        tag = "v${finalAttrs.version}";
      };
      # nixpkgs' own five, in this order.
      patches = [
        (fetchpatch { url = "https://github.com/microsoft/onnxruntime/commit/d6e712c5b7b6260a61e54d1fe40107cf5366ee77.patch"; })
        (fetchpatch { url = "https://github.com/microsoft/onnxruntime/commit/8ebd0bf1cf02414584d15d7244b07fa97d65ba02.patch"; })
        "nixpkgs/pkgs/by-name/on/onnxruntime/musl-execinfo.patch"
        "nixpkgs/pkgs/by-name/on/onnxruntime/musl-cstdint.patch"
        (fetchurl { url = "https://gitlab.alpinelinux.org/alpine/aports/-/raw/462dfe0eb4b66948fe48de44545cc22bb64fdf9f/community/onnxruntime/0001-Remove-MATH_NO_EXCEPT-macro.patch"; })
      ];
      nativeBuildInputs = [
        pkgs.cmake
        pkgs.pkg-config
        py.python
        protobuf'
      ]
      ++ (if python then [ py.pip py.python py.pythonOutputDistHook py.setuptools py.wheel ] else [ ])
      ++ (if cuda then [ nvcc pkgs.removeReferencesTo ] else [ ]);
      # No protobuf here: ORT finds protobuf' (nativeBuildInputs) with find_package.
      buildInputs = [
        pkgs.eigen
        pkgs.glibcLocales
        pkgs.howard-hinnant-date
        pkgs.libpng
        pkgs.nlohmann_json
        pkgs.microsoft-gsl
        pkgs.zlib
        pkgs.cpuinfo
      ]
      ++ (if python then [ py.numpy py.pybind11 py.packaging ] else [ ])
      ++ (
        if cuda then
          map (name: cudaPackages.${name}) [
            "cuda_cccl"
            "libcublas"
            "libcurand"
            "libcusparse"
            "libcufft"
            "cudnn"
            "cudnn-frontend"
            "cuda_cudart"
          ]
          ++ (if ncclSupport then [ cudaPackages.nccl ] else [ ])
        else
          [ ]
      );
      nativeCheckInputs = [ pkgs.gtest ] ++ (if python then [ py.onnx py.pytest py.sympy ] else [ ]);
      outputs = [
        "out"
        "dev"
      ]
      ++ (if python then [ "dist" ] else [ ]);
      separateDebugInfo = true;
      enableParallelBuilding = true;
      cmakeDir = "../cmake";
      cmakeFlags = [
        (cmakeBool "ABSL_ENABLE_INSTALL" true)
        (cmakeBool "FETCHCONTENT_FULLY_DISCONNECTED" true)
        (cmakeBool "FETCHCONTENT_QUIET" false)
        (cmakeFeature "FETCHCONTENT_SOURCE_DIR_ABSEIL_CPP" "${pkgs.abseil-cpp_202407.src}")
        (cmakeFeature "FETCHCONTENT_SOURCE_DIR_DLPACK" "${source "dlpack-src"}")
        (cmakeFeature "FETCHCONTENT_SOURCE_DIR_FLATBUFFERS" "${pkgs.flatbuffers_23.src}")
        (cmakeFeature "FETCHCONTENT_SOURCE_DIR_MP11" "${source "mp11-src"}")
        (cmakeFeature "FETCHCONTENT_SOURCE_DIR_ONNX" "${source "onnx-src"}")
        (cmakeFeature "FETCHCONTENT_SOURCE_DIR_RE2" "${pkgs.re2.src}")
        (cmakeFeature "FETCHCONTENT_SOURCE_DIR_SAFEINT" "${source "safeint-src"}")
        (cmakeFeature "FETCHCONTENT_TRY_FIND_PACKAGE_MODE" "ALWAYS")
        (cmakeFeature "ONNX_CUSTOM_PROTOC_EXECUTABLE" "${protobuf'}/bin/protoc")
        (cmakeBool "onnxruntime_BUILD_SHARED_LIB" true)
        (cmakeBool "onnxruntime_BUILD_UNIT_TESTS" finalAttrs.doCheck)
        (cmakeBool "onnxruntime_USE_FULL_PROTOBUF" withFullProtobuf)
        (cmakeBool "onnxruntime_USE_CUDA" cuda)
        (cmakeBool "onnxruntime_USE_NCCL" (cuda && ncclSupport))
        (cmakeBool "onnxruntime_USE_MIGRAPHX" false)
        (cmakeBool "onnxruntime_ENABLE_LTO" (!cuda || cudaPackages.cudaOlder "12.8"))
      ]
      ++ (if python then [ (cmakeBool "onnxruntime_ENABLE_PYTHON" true) ] else [ ])
      ++ (
        if cuda then
          [
            "--compile-no-warning-as-error"
            (cmakeFeature "FETCHCONTENT_SOURCE_DIR_CUTLASS" "${source "cutlass-src"}")
            (cmakeFeature "onnxruntime_CUDNN_HOME" "${cudaPackages.cudnn}")
            (cmakeFeature "CMAKE_CUDA_ARCHITECTURES" cudaPackages.flags.cmakeCudaArchitecturesString)
            (cmakeFeature "onnxruntime_NVCC_THREADS" "1")
          ]
        else
          [ ]
      );
      # Only this reaches the builder's environment (__structuredAttrs).
      env = if isLinux then { NIX_LDFLAGS = "-z,noexecstack"; } else { };
      doCheck = !(cuda || effectiveSystem == "aarch64-linux");
      requiredSystemFeatures = if cuda then [ "big-parallel" ] else [ ];
      hardeningEnable = [ ];
      # The last substitution is what a hybrid flavour's static core relies on: ORT looks for
      # its provider libraries in the output's lib/.
      postPatch = ''
        substituteInPlace cmake/libonnxruntime.pc.cmake.in \
          --replace-fail '$'{prefix}/@CMAKE_INSTALL_ @CMAKE_INSTALL_
        echo "find_package(cudnn_frontend REQUIRED)" > cmake/external/cudnn_frontend.cmake
      ''
      + ''
        substituteInPlace onnxruntime/core/platform/env.h --replace-fail \
          "GetRuntimePath() const { return PathString(); }" \
          "GetRuntimePath() const { return PathString(\"$out/lib/\"); }"
      ''
      + (if effectiveSystem == "aarch64-linux" then ''
        rm -v onnxruntime/test/optimizer/nhwc_transformer_test.cc
      '' else "");
      postBuild = if python then ''
        ${py.python.interpreter} ../setup.py bdist_wheel
      '' else "";
      postInstall = ''
        install -m644 -Dt $out/include \
          ../include/onnxruntime/core/framework/provider_options.h \
          ../include/onnxruntime/core/providers/cpu/cpu_provider_factory.h \
          ../include/onnxruntime/core/session/onnxruntime_*.h
      '';
      postFixup =
        if cuda then
          ''
            remove-references-to -t "${nvcc.bin}" ''${!outputLib}/lib/libonnxruntime_providers_cuda.so
          ''
        else
          "";
      disallowedRequisites = if cuda then [ nvcc.bin ] else [ ];
      __structuredAttrs = true;
      passthru = {
        cudaSupport = cuda;
        inherit cudaPackages ncclSupport;
        protobuf = protobuf';
        tests = if python then { python = opaque "python3Packages.onnxruntime" py.onnxruntime; } else { };
      };
      meta = {
        description = "Cross-platform, high performance scoring engine for ML models";
        platforms = [
          "x86_64-linux"
          "aarch64-linux"
          "aarch64-darwin"
        ];
        broken = withFullProtobuf;
      };
    };

  # A value `describe` does not enter (passthru.tests would lead back to the package itself).
  opaque = label: value: value // { standinOpaque = label; };

  # fetchFromGitHub, fetchpatch, fetchurl: a source records as what it names.
  fetchFromGitHub = spec: leaf "source-${spec.name or "${spec.repo}-${spec.tag or spec.rev or "?"}"}" // { inherit spec; };
  fetchpatch = spec: leaf "patch-${baseNameOf spec.url}" // { inherit (spec) url; standinRecord = spec.url; };
  fetchurl = spec: leaf "url-${baseNameOf spec.url}" // { inherit (spec) url; standinRecord = spec.url; };

  # pkgs/development/libraries/protobuf/generic.nix (see the top): shared libraries unless
  # enableShared = false (protobuf_BUILD_SHARED_LIBS), __structuredAttrs, separateDebugInfo,
  # mainProgram protoc. nixpkgs' protobuf at the pin is 32.1 (package.nix's comment).
  protobufBase =
    args: finalAttrs:
    {
      pname = "protobuf";
      version = "32.1";
      __structuredAttrs = true;
      patches = [ ];
      separateDebugInfo = true;
      cmakeFlags = [ "-Dprotobuf_USE_EXTERNAL_GTEST:BOOL=TRUE" ]
        ++ (if args.enableShared then [ "-Dprotobuf_BUILD_SHARED_LIBS:BOOL=TRUE" ] else [ ]);
      # What its lib/ holds, for the flavour-build stand-in and the tests.
      passthru.standinArchives = if args.enableShared then [ "libprotobuf-lite.so" "libprotobuf.so" ] else [ "libprotobuf-lite.a" "libprotobuf.a" ];
      meta.mainProgram = "protoc";
    };

  words = text: builtins.filter (w: builtins.isString w && w != "") (builtins.split " +" text);

  # -DNAME[:TYPE]=VALUE of a cmakeFlags list, or null.
  cmakeValue =
    flags: name:
    let
      found = builtins.filter (m: m != null) (
        map (flag: builtins.match "-D${name}(:[A-Z]+)?=(.*)" flag) flags
      );
    in
    if found == [ ] then null else builtins.elemAt (builtins.head found) 1;

  # What make-derivation.nix and the cc-wrapper make of the final attributes: environment,
  # compile lines, build-time runs and the closure check. Throws where nixpkgs refuses.
  derive =
    attrs:
    let
      env = attrs.env or { };
      topLevel = builtins.removeAttrs attrs [
        "env"
        "passthru"
        "meta"
      ];
      overlapping = builtins.filter (name: topLevel ? ${name}) (builtins.attrNames env);
      badEnv = builtins.filter (
        name:
        let
          v = env.${name};
        in
        !(builtins.isString v || builtins.isBool v || builtins.isInt v || (builtins.isAttrs v && v ? outPath))
      ) (builtins.attrNames env);
      structured = attrs.__structuredAttrs or false;
      environment =
        if structured then
          env
        else
          env // builtins.mapAttrs (_: toString) (
            builtins.removeAttrs (
              builtins.listToAttrs (
                map (name: {
                  inherit name;
                  value = topLevel.${name};
                }) (builtins.filter (name: builtins.isString topLevel.${name}) (builtins.attrNames topLevel))
              )
            ) [ ]
          );
      var = name: environment.${name} or "";
      flags = attrs.cmakeFlags or [ ];
      release = lang: let v = cmakeValue flags "CMAKE_${lang}_FLAGS_RELEASE"; in if v == null then [ "-O3" "-DNDEBUG" ] else words v;
      xcompiler = builtins.concatLists (
        map (w: let m = builtins.match "-Xcompiler=(.*)" w; in if m == null then [ ] else builtins.filter builtins.isString (builtins.split "," (builtins.head m))) (words (var "CUDAFLAGS"))
      );
      wrapped = line: words (var "NIX_CFLAGS_COMPILE_BEFORE") ++ line ++ words (var "NIX_CFLAGS_COMPILE");
      cuda = cmakeValue flags "onnxruntime_USE_CUDA" == "TRUE";
      staticLibs = cmakeValue flags "onnxruntime_BUILD_SHARED_LIB" == "FALSE";
      fixup = attrs.postFixup or "";
      # make-derivation.nix: with __structuredAttrs the reference checks are not attributes of
      # the derivation but outputChecks.<output>, for every output except `debug` (which
      # separateDebugInfo fills with files that refer to the source).
      outputChecks =
        if structured then
          builtins.listToAttrs (
            map (output: {
              name = output;
              value =
                if output == "debug" && (attrs.separateDebugInfo or false) then
                  { }
                else
                  builtins.intersectAttrs {
                    disallowedRequisites = null;
                    disallowedReferences = null;
                    allowedRequisites = null;
                    allowedReferences = null;
                  } attrs;
            }) (outputsOf attrs)
          )
        else
          null;
      disallowedOfOut =
        if structured then outputChecks.out.disallowedRequisites or [ ] else attrs.disallowedRequisites or [ ];
      # nixpkgs' own scrub names libonnxruntime_providers_cuda.so alone; archives need every
      # file of the output scrubbed.
      scrubs =
        builtins.match ".*remove-references-to.*" fixup != null
        && (if staticLibs then builtins.match ".*find \"[$]out\" -type f.*" fixup != null else true);
    in
    if overlapping != [ ] then
      throw "The `env` attribute set cannot contain any attributes passed to derivation. The following attributes are overlapping: ${builtins.concatStringsSep ", " overlapping}"
    else if badEnv != [ ] then
      throw "The `env` attribute set can only contain derivation, string, boolean or integer attributes. The `${builtins.head badEnv}` attribute is of type ${builtins.typeOf env.${builtins.head badEnv}}."
    else
      {
        inherit environment;
        compileLines = {
          c = wrapped (words (var "CFLAGS") ++ release "C");
          cxx = wrapped (words (var "CXXFLAGS") ++ release "CXX");
          # nvcc runs the wrapped host compiler with its -Xcompiler flags and -O3; CFLAGS and
          # CXXFLAGS never reach it.
          cudaHost = if cuda then wrapped (xcompiler ++ [ "-O3" ]) else null;
        };
        runsTestsAtBuild = attrs.doCheck or false;
        runsImportCheckAtBuild = (attrs.pythonImportsCheck or [ ]) != [ ];
        inherit outputChecks;
        # A CUDA build's libraries embed nvcc's store path until scrubbed; nixpkgs forbids it
        # (with __structuredAttrs through outputChecks.out, which the check reads).
        violatesDisallowedRequisites = cuda && disallowedOfOut != [ ] && !scrubs;
      };

  cudaSet = attr: version: {
    standinSet = attr;
    cudaVersion = version;
    # lib.versionOlder on the set's version, as cudaPackages.cudaOlder.
    cudaOlder = other: builtins.compareVersions version other < 0;
    # Different from every SM of the matrix, so a test can tell nixpkgs' value from ours.
    flags.cmakeCudaArchitecturesString = "52;standin-default";
    cuda_nvcc = leaf "${attr}.cuda_nvcc" // {
      bin = leaf "${attr}.cuda_nvcc.bin";
    };
    cudnn = leaf "${attr}.cudnn" // {
      lib = leaf "${attr}.cudnn.lib";
    };
    nccl = leaf "${attr}.nccl" // {
      meta.available = true;
    };
  }
  // builtins.listToAttrs (
    map (name: {
      inherit name;
      value = leaf "${attr}.${name}";
    }) [ "cuda_cccl" "cudnn-frontend" "cuda_cudart" ]
  )
  # The CUDA redistributables' outputs (pkgs/development/cuda-modules: a package whose redist
  # has lib/*.a gets a `static` output): the math libraries ORT links.
  // builtins.listToAttrs (
    map
      (name: {
        inherit name;
        value = leaf "${attr}.${name}" // {
          static = leaf "${attr}.${name}.static";
        };
      })
      [
        "libcublas"
        "libcurand"
        "libcusparse"
        "libcufft"
      ]
  );

  # aliases.nix at the pin: the removed toolkits are throws, which `or` does not catch.
  removedCuda =
    version:
    throw "CUDA ${version} has been removed from Nixpkgs, as it is unmaintained upstream and depends on unsupported compilers";

  pythonSet =
    attr: version:
    let
      set = {
        standinSet = attr;
        pythonVersion = version;
        python = leaf "python${version}" // {
          withPackages = pythonWithPackages "python${version}" set;
          interpreter = "${storePath "python${version}"}/bin/python${version}";
        };
        # pkgs/development/python-modules/onnxruntime/default.nix (see the top): the wheel of
        # the C++ package's `dist` output, linked against that package and its protobuf (the
        # one it was built with, passthru.protobuf), CUDA libraries by its passthru.
        onnxruntime = overridable "${attr}.onnxruntime" (args: finalAttrs: let ort = args.onnxruntime; in {
          inherit (ort) pname version;
          name = "python${version}-onnxruntime-${ort.version}";
          format = "wheel";
          src = ort.dist;
          env = if isLinux then { NIX_LDFLAGS = "-z,noexecstack"; } else { };
          pythonRemoveDeps = [ "flatbuffers" "protobuf" "sympy" ];
          buildInputs = [
            set.onednn
            pkgs.re2
            ort.protobuf
            ort
          ]
          ++ (
            if ort.passthru.cudaSupport then
              map (name: ort.passthru.cudaPackages.${name}) [ "libcublas" "libcurand" "libcufft" "cudnn" "cuda_cudart" ]
              ++ (if ort.passthru.ncclSupport then [ ort.passthru.cudaPackages.nccl ] else [ ])
            else
              [ ]
          );
          dependencies = [ set.coloredlogs set.numpy set.packaging ];
          pythonImportsCheck = if system == "aarch64-linux" then [ ] else [ "onnxruntime" ];
          meta = ort.meta;
        }) { onnxruntime = pkgs.onnxruntime.override { python3Packages = set; pythonSupport = true; }; } [ ];
        buildPythonApplication =
          args:
          let
            # The wheel's Requires-Dist is pyproject.toml's [project] dependencies.
            declared = (builtins.fromTOML (builtins.readFile "${args.src}/pyproject.toml")).project.dependencies;
            failures = runtimeDepsFailures declared;
          in
          if failures != [ ] then
            throw "pythonRuntimeDepsCheckHook: checking runtime dependencies for ${args.pname}-${args.version}-py3-none-any.whl\n${builtins.concatStringsSep "\n" failures}"
          else
            {
              inherit (args) pname version;
              name = "${args.pname}-${args.version}";
              outPath = storePath "${args.pname}-${args.version}";
              meta = args.meta or { };
              standinRecord = {
                standin = "${attr}.buildPythonApplication";
                inherit importArgs;
                args = describe args;
              };
            };
      }
      // builtins.listToAttrs (
        map
          (name: {
            inherit name;
            value = leaf "${attr}.${name}" // {
              version = pinVersions.${name} or "0";
            };
          })
          [
            "hatchling"
            "textual"
            "psutil"
            "pygdbmi"
            "rich"
            "tomlkit"
            "platformdirs"
            "unidiff"
            "argcomplete"
            "pytest"
            "pytest-timeout"
            "hypothesis"
            # onnxruntime's inputs
            "pip"
            "pythonOutputDistHook"
            "setuptools"
            "wheel"
            "numpy"
            "pybind11"
            "packaging"
            "onnx"
            "sympy"
            "onednn"
            "coloredlogs"
          ]
      );
    in
    set;

  # The Python packages the workbench needs, at the versions the pin has (no higher). textual:
  # pkgs/development/python-modules/textual/default.nix read at
  # 0177fbb41ef7aba03aba3911861b1bb47b9eed07 (6.2.1; textual 8.2.0 was released after the pin).
  # The others could not be read at the pin here; these are releases that nixpkgs had already
  # packaged before the pin (2025-10), so the pin has them or newer.
  pinVersions = {
    textual = "6.2.1";
    rich = "14.1.0";
    psutil = "7.0.0";
    pygdbmi = "0.11.0.0";
    tomlkit = "0.13.2";
    platformdirs = "4.3.6";
    unidiff = "0.7.5";
    # argcomplete 3.5.1 (2024-10) was in nixpkgs a year before the pin, as the others above.
    argcomplete = "3.5.1";
  };

  # The hook's test_requirement for the specifier forms pyproject uses (>=, >, <=, <, ==, !=,
  # joined by commas); a requirement with a marker (`; python_version < '3.11'`) is skipped,
  # as the real hook skips markers that do not hold on the pin's Python 3.13.
  runtimeDepsFailures =
    requirements:
    let
      one =
        requirement:
        let
          parsed = builtins.match "([A-Za-z0-9_.-]+)([^;]*)(;.*)?" requirement;
          name = builtins.elemAt parsed 0;
          spec = builtins.replaceStrings [ " " ] [ "" ] (builtins.elemAt parsed 1);
          marker = builtins.elemAt parsed 2;
          clauses = builtins.filter (c: builtins.isString c && c != "") (builtins.split "," spec);
          have = pinVersions.${name} or null;
          holds =
            clause:
            let
              m = builtins.match "(>=|<=|==|!=|>|<)(.*)" clause;
              op = builtins.elemAt m 0;
              order = builtins.compareVersions have (builtins.elemAt m 1);
            in
            if op == ">=" then
              order >= 0
            else if op == "<=" then
              order <= 0
            else if op == ">" then
              order > 0
            else if op == "<" then
              order < 0
            else if op == "==" then
              order == 0
            else
              order != 0;
        in
        if marker != null then
          [ ]
        else if have == null then
          [ "  - ${name} not installed" ]
        else if builtins.all holds clauses then
          [ ]
        else
          [ "  - ${name}${spec} not satisfied by version ${have}" ];
    in
    builtins.concatMap one requirements;

  recordedCall = standin: name: args: {
    inherit name;
    outPath = storePath name;
    standinRecord = {
      inherit standin importArgs;
      args = describe args;
    };
  };

  # What `import nixpkgs { ... }` was given, in every record: the flake must set allowUnfree
  # (CUDA is unfree) and must not set cudaSupport globally.
  importArgs = describe { inherit system config overlays; };

  pkgs = {
    standinSet = "standin-nixpkgs";
    inherit system;

    onnxruntime = overridable "onnxruntime" ortBase {
      cudaSupport = config.cudaSupport or false;
      pythonSupport = true;
      cudaPackages = pkgs.cudaPackages;
      python3Packages = pkgs.python3Packages;
    } [ ];

    cudaPackages_12_6 = cudaSet "cudaPackages_12_6" "12.6";
    cudaPackages_12_8 = cudaSet "cudaPackages_12_8" "12.8";
    cudaPackages_12_9 = cudaSet "cudaPackages_12_9" "12.9";
    cudaPackages_13_0 = cudaSet "cudaPackages_13_0" "13.0";
    cudaPackages_12 = pkgs.cudaPackages_12_8;
    cudaPackages = cudaSet "cudaPackages" "12.8";
    cudaPackages_12_0 = removedCuda "12.0";
    cudaPackages_12_1 = removedCuda "12.1";
    cudaPackages_12_2 = removedCuda "12.2";
    cudaPackages_12_3 = removedCuda "12.3";
    cudaPackages_12_4 = removedCuda "12.4";
    cudaPackages_12_5 = removedCuda "12.5";

    python312Packages = pythonSet "python312Packages" "3.12";
    python313Packages = pythonSet "python313Packages" "3.13";
    python3Packages = pkgs.python313Packages;
    python3 = leaf "python3" // {
      withPackages = pythonWithPackages "python3" pkgs.python3Packages;
    };

    # pkgs/development/libraries/protobuf/generic.nix: `enableShared ? !isStatic` (shared
    # libraries only, unless overridden); the override is recorded.
    # callPackage'd from generic.nix: `override { enableShared = false; }` and overrideAttrs
    # (package.nix's protobuf') each give another derivation, with its own store path.
    protobuf = overridable "protobuf" protobufBase { enableShared = true; } [ ];
    cpuinfo = leaf "cpuinfo";
    # The sources package.nix hands ORT through FETCHCONTENT_SOURCE_DIR_*.
    abseil-cpp_202407 = leaf "abseil-cpp_202407" // { src = leaf "abseil-cpp_202407.src"; };
    flatbuffers_23 = leaf "flatbuffers_23" // { src = leaf "flatbuffers_23.src"; };
    re2 = leaf "re2" // { src = leaf "re2.src"; };
    eigen = leaf "eigen";
    glibcLocales = leaf "glibcLocales";
    howard-hinnant-date = leaf "howard-hinnant-date";
    libpng = leaf "libpng";
    nlohmann_json = leaf "nlohmann_json";
    microsoft-gsl = leaf "microsoft-gsl";
    zlib = leaf "zlib";
    gtest = leaf "gtest";
    removeReferencesTo = leaf "removeReferencesTo";
    ninja = leaf "ninja";
    cmake = leaf "cmake";
    pkg-config = leaf "pkg-config";
    gdb = leaf "gdb";
    ccache = leaf "ccache";
    ruff = leaf "ruff";

    # pkgs/build-support/fetchgithub/default.nix: fetchFromGitHub { owner; repo; tag or rev;
    # hash; fetchSubmodules; name } is a fixed-output derivation of the source tree; `tag` is
    # refs/tags/TAG. Nothing can be fetched here: the stand-in is a path that records its
    # arguments (a store path string, as the real one's outPath interpolates into cmakeFlags).
    fetchFromGitHub =
      args:
      let
        ref = args.tag or args.rev or (throw "fetchFromGitHub: give tag or rev");
        name = args.name or "source";
      in
      leaf "fetchFromGitHub-${args.owner}-${args.repo}-${ref}"
      // {
        inherit name;
        outPath = storePath "${name}-${args.owner}-${args.repo}-${ref}";
        standinRecord = {
          standin = "fetchFromGitHub";
          args = describe args;
        };
      };

    # callPackage as Flox calls a .flox/pkgs file: its arguments, by name, from this set.
    callPackage =
      fn: overrides:
      let
        f = if builtins.isFunction fn then fn else import fn;
      in
      f (builtins.intersectAttrs (builtins.functionArgs f) pkgs // overrides);

    mkShell = args: recordedCall "mkShell" "shell" args;
    writeShellApplication = args: recordedCall "writeShellApplication" args.name args;
  };
in
pkgs
