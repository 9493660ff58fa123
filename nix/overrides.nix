# From a spec (nix/variants.nix) to a package: nixpkgs' onnxruntime, overridden.
#
# The Flox matrix's two-layer pattern, generated instead of copied 66 times:
#   1. the C++ package: pkgs.onnxruntime.override { cudaSupport; cudaPackages; ... }
#      then .overrideAttrs for CMake flags, compiler flags, ninja, ccache and patches (those of
#      patches/series.toml that are enabled for the variant or flavour, in series order);
#   2. the Python package: python3XXPackages.onnxruntime.override { onnxruntime = <1>; }
#      then .overrideAttrs for the variant's pname and meta.
# The builder flake's linkage flavours are layer 1 alone (C/C++ libraries, no Python).
#
# Arguments:
#   pkgs      nixpkgs for one system, or tests/nix/standin-nixpkgs.nix, which records what it is
#             given; only attributes are looked up here (no `lib`), so both work.
#   settings  the checked settings of configs/settings.toml (nix/config.nix).
#   series    the checked patch series, patches/series.toml (nix/series.nix): which patches a
#             package gets, and their files.
#
# What must NOT be in a derivation: ninja's job count. It reaches the build as NIX_BUILD_CORES,
# set per invocation by `nix build --cores N`, which leaves the derivation hash alone, so
# changing ninja_jobs never costs a 20-60 minute rebuild. nixpkgs' ninja setup hook already runs
# `ninja -j$NIX_BUILD_CORES` when enableParallelBuilding is on; nothing here sets ninjaFlags.
{
  pkgs,
  settings,
  series,
}:
let
  lib = import ./lib.nix;
  inherit (builtins)
    concatStringsSep
    filter
    listToAttrs
    map
    match
    ;

  need =
    name:
    pkgs.${name}
      or (throw "workbench: this nixpkgs has no `${name}` (the nixpkgs pin in flake.nix must match configs/matrix.toml's nixpkgs_rev)");

  # -D definitions reach C, C++ and CUDA through CFLAGS / CXXFLAGS / CUDAFLAGS, which CMake reads
  # to initialise CMAKE_<LANG>_FLAGS (flavours.toml: "added to CMAKE_CXX_FLAGS /
  # CMAKE_CUDA_FLAGS"). Environment variables, because cmakeFlags entries are split on spaces.
  defineFlag =
    define:
    if match "[A-Za-z_][A-Za-z0-9_]*(=[A-Za-z0-9_.]*)?" define != null then
      "-D${define}"
    else
      throw "configs/flavours.toml: defines: \"${define}\" is not NAME or NAME=VALUE";

  # Append to environment variables of the derivation, wherever nixpkgs put them: inside `env`
  # (the current convention) unless the package sets the same name as a top-level attribute,
  # in which case that one (mkDerivation refuses a name in both places).
  appendEnv =
    old: vars:
    let
      present = filter (name: vars.${name} != "") (builtins.attrNames vars);
      topLevel = filter (name: old ? ${name}) present;
      inEnv = filter (name: !(old ? ${name})) present;
      joined = previous: name: lib.joinWords [ (toString previous) vars.${name} ];
    in
    {
      env =
        (old.env or { })
        // listToAttrs (
          map (name: {
            inherit name;
            value = joined (old.env.${name} or "") name;
          }) inEnv
        );
    }
    // listToAttrs (
      map (name: {
        inherit name;
        value = joined old.${name} name;
      }) topLevel
    );

  # ccache needs a cache directory the build can write. In the sandbox that is only true when
  # nix.conf has `extra-sandbox-paths = /var/cache/ccache` (the directory group nixbld,
  # mode 2770), so the check happens at build time and a missing directory degrades to a plain
  # build with a message, instead of failing an hour in.
  ccacheHook = ''
    if [ -d /var/cache/ccache ] && [ -w /var/cache/ccache ]; then
      export CCACHE_DIR=/var/cache/ccache CCACHE_UMASK=007 CCACHE_COMPRESS=1
      # Relative paths in the cache key, so builds in different sandbox directories share hits.
      export CCACHE_BASEDIR="$NIX_BUILD_TOP"
      cmakeFlagsArray+=(
        -DCMAKE_C_COMPILER_LAUNCHER=ccache
        -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
        -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache
      )
      echo "workbench: compiling through ccache ($CCACHE_DIR)"
    else
      echo "workbench: ccache = true in configs/settings.toml, but /var/cache/ccache is not writable in this build." >&2
      echo "workbench: add 'extra-sandbox-paths = /var/cache/ccache' to nix.conf and create the directory (group nixbld, mode 2770); building without ccache." >&2
    fi
  '';

  # The C++ package. `cudaArchitectures` null keeps nixpkgs' own value (from cudaCapabilities);
  # `shared` null keeps nixpkgs' linkage (shared, which the Python wheel needs). `seriesPatches`
  # are the package's entries of patches/series.toml (nix/series.nix), already selected and in
  # series order; they go after nixpkgs' own patches.
  mkOrt =
    {
      pname,
      cuda,
      toolkit,
      cudaArchitectures,
      cpuFlags,
      shared,
      seriesPatches,
      defines,
      pythonPackages,
      platforms,
      info,
      # A linkage flavour's "static", "hybrid" or "shared"; null for a variant.
      linkage ? null,
      produces ? [ ],
      # The ONNX Runtime release (nix/releases.nix): the pin's own adds nothing; any other is a
      # source override (nix/ort-release.nix) under everything below.
      release,
    }:
    let
      ortRelease = import ./ort-release.nix { inherit pkgs release cuda; };
      isFlavour = linkage != null;
      archFlags =
        if settings.cuda_architectures != [ ] then
          concatStringsSep ";" settings.cuda_architectures
        else
          cudaArchitectures;
      setsArchitectures = cuda && archFlags != null;
      # Series names (not file names) in passthru, as `workbench patches list` shows them.
      patchNames = map (patch: patch.name) seriesPatches;
      patches = map series.fileOf seriesPatches;
      # ISA and optimisation flags reach C and C++ compiles only, through CFLAGS/CXXFLAGS, which
      # CMake reads once into CMAKE_C_FLAGS/CMAKE_CXX_FLAGS (what the Flox variant files do with
      # `export` in preConfigure). Never NIX_CFLAGS_COMPILE: the cc-wrapper appends that after
      # every command line, so it would also reach nvcc's host compiles of .cu files (AVX-512
      # intrinsic headers break them) and override CMake's Release -O3.
      optimisationLevels = filter (flag: match "-O.*" flag != null) settings.optimization_flags;
      cxxFlags = lib.joinWords (cpuFlags ++ settings.optimization_flags ++ map defineFlag defines);
      # Opt-in (nvcc_host_isa_flags): the ISA flags for nvcc's host compiler too.
      hostIsaFlags =
        if cuda && settings.nvcc_host_isa_flags && cpuFlags != [ ] then
          [ "-Xcompiler=${concatStringsSep "," cpuFlags}" ]
        else
          [ ];
      cudaFlags = lib.joinWords (map defineFlag defines ++ hostIsaFlags);
      # lib.getBin cuda_nvcc, as nixpkgs' disallowedRequisites names it.
      nvccBin =
        let
          nvcc = (need toolkit.nixpkgs_attr).cuda_nvcc;
        in
        nvcc.bin or nvcc;
      # A variant's ISA code must not run where it is built: the build machine may lack the ISA
      # (AVX-512 BF16, VNNI, SVE2) and die of SIGILL in ORT's unit tests or the import check.
      runsIsaCode = cpuFlags != [ ];
      # The flavours are the builder flake's libraries: no unit tests in them either.
      noUnitTests = runsIsaCode || isFlavour;
      staticCore = isFlavour && linkage != "shared";
      staticCuda = isFlavour && cuda && linkage == "static";
      # nixpkgs' protobuf builds shared libraries only (pkgs/development/libraries/protobuf/
      # generic.nix: enableShared ? !isStatic sets protobuf_BUILD_SHARED_LIBS), and ORT finds it
      # instead of building its own (FETCHCONTENT_TRY_FIND_PACKAGE_MODE=ALWAYS): a static core
      # passes a static protobuf as the recipe's `protobuf` argument.
      staticProtobuf = (need "protobuf").override { enableShared = false; };
      # The protobuf ORT is really compiled and linked against: the recipe's own protobuf'
      # (package.nix at 1.23.2: `protobuf.overrideAttrs` adding the nvcc fix, in
      # nativeBuildInputs and ONNX_CUSTOM_PROTOC_EXECUTABLE), which it exposes as
      # passthru.protobuf; a different derivation from `staticProtobuf`, whose archive would
      # not be the one ORT's objects were compiled against. Where nixpkgs moved the fix into
      # protobuf itself, passthru.protobuf is `protobuf`, so this stays right.
      builtProtobuf =
        overridden.passthru.protobuf
          or (throw "workbench: nixpkgs' onnxruntime has no passthru.protobuf: the static core cannot tell which protobuf archive ORT was built against");
      # The same for cpuinfo: nixpkgs' (pkgs/by-name/cp/cpuinfo) leaves CPUINFO_LIBRARY_TYPE at
      # "default" and sets no BUILD_SHARED_LIBS, so CMake builds its libcpuinfo.a.
      cpuinfo = need "cpuinfo";
      # The builder flake's static CUDA recipe links the CUDA math libraries statically.
      staticCudaLibraries =
        let
          set = need toolkit.nixpkgs_attr;
        in
        map (name: set.${name}.static) [
          "libcublas"
          "libcurand"
          "libcusparse"
          "libcufft"
        ];
      install = import ./flavour-install.nix {
        inherit linkage cuda;
        cudnnLib = if cuda then let cudnn = (need toolkit.nixpkgs_attr).cudnn; in cudnn.lib or cudnn else null;
        nvcc = if cuda then nvccBin else null;
        architectures = if archFlags == null then [ ] else lib.splitSemicolons archFlags;
        inputArchives = lib.optionalAttrs staticCore {
          "libprotobuf-lite.a" = "${builtProtobuf}/lib";
          "libcpuinfo.a" = "${cpuinfo}/lib";
        };
      };
      # Static archives are what a consumer links with its own toolchain: no LTO bytecode in them.
      ltoOff = shared == false;
      ourCmakeFlags =
        lib.optional setsArchitectures "-DCMAKE_CUDA_ARCHITECTURES:STRING=${archFlags}"
        ++ lib.optional cuda "-Donnxruntime_NVCC_THREADS:STRING=${toString settings.nvcc_threads}"
        ++ lib.optionals (shared == true) [ "-Donnxruntime_BUILD_SHARED_LIB:BOOL=TRUE" ]
        ++ lib.optionals (shared == false) [
          "-Donnxruntime_BUILD_SHARED_LIB:BOOL=FALSE"
          "-DBUILD_SHARED_LIBS:BOOL=FALSE"
        ]
        ++ lib.optional ltoOff "-Donnxruntime_ENABLE_LTO:BOOL=FALSE"
        ++ lib.optional noUnitTests "-Donnxruntime_BUILD_UNIT_TESTS:BOOL=FALSE"
        # The builder flake's libraries are for one machine: no multi-GPU NCCL.
        ++ lib.optional (isFlavour && cuda) "-Donnxruntime_USE_NCCL:BOOL=FALSE"
        # CMake's Release level (-O3) stays unless the user set one: then the release flags keep
        # only -DNDEBUG, and the user's -O in CFLAGS/CXXFLAGS is the only one on the line.
        ++ lib.optionals (optimisationLevels != [ ]) [
          "-DCMAKE_C_FLAGS_RELEASE:STRING=-DNDEBUG"
          "-DCMAKE_CXX_FLAGS_RELEASE:STRING=-DNDEBUG"
        ];
      replaced =
        lib.optional setsArchitectures "CMAKE_CUDA_ARCHITECTURES"
        ++ lib.optional ltoOff "onnxruntime_ENABLE_LTO"
        ++ lib.optional noUnitTests "onnxruntime_BUILD_UNIT_TESTS"
        ++ lib.optional (isFlavour && cuda) "onnxruntime_USE_NCCL"
        ++ lib.optionals (optimisationLevels != [ ]) [
          "CMAKE_C_FLAGS_RELEASE"
          "CMAKE_CXX_FLAGS_RELEASE"
        ]
        ++ lib.optional cuda "onnxruntime_NVCC_THREADS"
        ++ lib.optionals (shared != null) [
          "onnxruntime_BUILD_SHARED_LIB"
          "BUILD_SHARED_LIBS"
        ];

      overridden = (need "onnxruntime").override (
        {
          cudaSupport = cuda;
          pythonSupport = pythonPackages != null;
        }
        // lib.optionalAttrs cuda { cudaPackages = need toolkit.nixpkgs_attr; }
        // lib.optionalAttrs (isFlavour && cuda) { ncclSupport = false; }
        // lib.optionalAttrs staticCore { protobuf = staticProtobuf; }
        # The wheel inside the C++ build must be built for the variant's Python.
        // lib.optionalAttrs (pythonPackages != null) { python3Packages = need pythonPackages; }
      );
      recipe = if ortRelease.layer == null then overridden else overridden.overrideAttrs ortRelease.layer;
    in
    recipe.overrideAttrs (
      old:
      {
        inherit pname;
        cmakeFlags = lib.dropCmakeVars replaced (old.cmakeFlags or [ ]) ++ ourCmakeFlags;
        # ninja in nativeBuildInputs makes nixpkgs' cmake hook generate Ninja files (Makefiles
        # otherwise): a `[n/total]` progress line the workbench can follow, and a .ninja_log
        # it can time. The job count still comes from NIX_BUILD_CORES (see the top).
        nativeBuildInputs =
          (old.nativeBuildInputs or [ ]) ++ [ (need "ninja") ] ++ lib.optional settings.ccache (need "ccache");
        enableParallelBuilding = true;
        patches = (old.patches or [ ]) ++ patches;
        passthru = (old.passthru or { }) // {
          workbench = info // {
            cmakeCudaArchitectures = if setsArchitectures then archFlags else null;
            nvccThreads = if cuda then settings.nvcc_threads else null;
            compilerFlags = cpuFlags ++ settings.optimization_flags;
            nvccHostFlags = hostIsaFlags;
            # What the workbench tells the user before a build: no tests or import check run.
            skipsBuildTimeChecks = runsIsaCode;
            # A flavour's output layout: the files `workbench build` checks after the build.
            inherit linkage produces;
            inherit patchNames defines;
            # Which ONNX Runtime: version, source, bundled dependencies, fixes and flags.
            ortVersion = release.version;
            release = ortRelease.info;
          };
        };
        meta = (old.meta or { }) // {
          inherit platforms;
        };
      }
      // lib.optionalAttrs noUnitTests { doCheck = false; }
      # The libraries and headers in `out` (no `dev`, no `dist`): ORT_LIB_LOCATION is $out/lib
      # and the headers are $out/include, as the builder flake's consumers expect; the
      # post-install steps lay the libraries out. nixpkgs' recipe sets separateDebugInfo, so
      # mkDerivation still adds `debug` (the shared objects' DWARF, by build id): the package's
      # outputs are out and debug, and `nix build` leaves result-NAME and result-NAME-debug.
      // lib.optionalAttrs isFlavour {
        outputs = [ "out" ];
        # nixpkgs' postInstall (the headers' install) ends without a newline when it is a plain
        # string: ours starts on a line of its own.
        postInstall = (old.postInstall or "") + "\n" + install.postInstall;
        postFixup = install.postFixup;
      }
      // lib.optionalAttrs staticCuda {
        buildInputs = (old.buildInputs or [ ]) ++ staticCudaLibraries;
      }
      // appendEnv old {
        CFLAGS = cxxFlags;
        CXXFLAGS = cxxFlags;
        CUDAFLAGS = if cuda then cudaFlags else "";
      }
      # ccache's hook, then the static core's check that nixpkgs' inputs hold the archives its
      # layout needs (at once, before an hour of compiling), then nixpkgs' own.
      // lib.optionalAttrs (settings.ccache || install.preConfigure != "") {
        preConfigure =
          (if settings.ccache then ccacheHook else "") + install.preConfigure + (old.preConfigure or "");
      }
    );
in
rec {
  # The C++ package of a variant (its Python package's `onnxruntime`). The variant's patches
  # (series entries whose `variants` patterns match its name) are applied here, so the Python
  # package built on top gets them too.
  variantCpp =
    spec:
    mkOrt {
      pname = "${spec.name}-cpp";
      inherit (spec) cuda toolkit pythonPackages;
      cudaArchitectures = spec.cmakeCudaArchitectures;
      cpuFlags = spec.isa.flags;
      shared = null;
      seriesPatches = series.forVariantAt spec.release.version spec.baseName;
      inherit (spec) release;
      defines = [ ];
      platforms = [ spec.platform ];
      info = {
        inherit (spec) name kind;
        isa = spec.isa.name;
        toolkit = if spec.toolkit == null then null else spec.toolkit.name;
      };
    };

  # A variant: the Python package, as the Flox matrix builds them.
  variant =
    spec:
    let
      cpp = variantCpp spec;
      pythonOrt = (need spec.pythonPackages).onnxruntime.override { onnxruntime = cpp; };
      package = pythonOrt.overrideAttrs (old: {
      pname = spec.name;
      # nixpkgs imports onnxruntime after the build (pythonImportsCheck): that runs the
      # variant's ISA code on the build machine, which may not have it.
      pythonImportsCheck = if cpp.workbench.skipsBuildTimeChecks then [ ] else old.pythonImportsCheck or [ ];
      # Set explicitly: python packages build `name` with their interpreter prefix, and the
      # build list and store path should show the variant's own name.
      name = "${spec.name}-${old.version or spec.ortVersion}";
      passthru = (old.passthru or { }) // {
        inherit cpp;
        workbench = cpp.workbench // {
          inherit (spec) description caveat;
          python = spec.python;
        };
      };
      meta = (old.meta or { }) // {
        inherit (spec) description;
        platforms = [ spec.platform ];
        # nvcc older than the SM (cuda12_4 + Blackwell) cannot build it: say so at evaluation
        # (NIXPKGS_ALLOW_BROKEN=1 still tries) rather than after an hour of compiling.
        broken = spec.caveat != null;
      };
    });
    in
    # The variant's Python with it installed (`nix build .#NAME.environment`): what
    # `workbench smoke NAME` runs, as a Flox environment's bin/python would be. Beside the
    # package rather than in its passthru, so the package never refers to itself.
    package
    // {
      environment = (need spec.pythonPackages).python.withPackages (_: [ package ]);
    };

  # A linkage flavour of the builder flake: C/C++ libraries, no Python. Its patches are the
  # series entries whose `flavours` list names it.
  flavour =
    spec:
    mkOrt {
      pname = spec.attr;
      inherit (spec) cuda toolkit shared defines platforms linkage produces;
      # settings.toml's cuda_architectures win (mkOrt); else the flavour's own, never nixpkgs'
      # every-architecture default (hours of nvcc).
      cudaArchitectures = if spec.cudaArchitectures == [ ] then null else concatStringsSep ";" spec.cudaArchitectures;
      cpuFlags = [ ];
      seriesPatches = series.forFlavourAt spec.release.version spec.baseName;
      inherit (spec) release;
      pythonPackages = null;
      info = {
        inherit (spec) name attr kind experimental linkage;
        toolkit = if spec.toolkit == null then null else spec.toolkit.name;
      };
    };
}
