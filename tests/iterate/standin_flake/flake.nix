# STAND-IN for the builder flake's onnxruntime-cpu (nixpkgs' onnxruntime with the flake's
# overrides): see README.md beside this file for what each piece stands for and why.
{
  description = "workbench iterate tests: a stand-in onnxruntime-cpu built by real Nix";

  outputs = { self }:
    let
      system = "x86_64-linux";
      # What nix/config.nix and nix/patches.nix read in the real flake.
      settings = builtins.fromTOML (builtins.readFile ./configs/settings.toml);
      series = builtins.fromTOML (builtins.readFile ./patches/series.toml);
      forCpu = p: p.enabled && builtins.elem "cpu" p.flavours;
      # nix/series.nix: an entry with `releases` applies only at those releases.
      atRelease = version: p: !(p ? releases) || builtins.elem version p.releases;
      seriesAt =
        version:
        map (p: ./patches + "/${p.file}") (
          builtins.filter (p: forCpu p && atRelease version p) series.patches
        );
      seriesPatches = seriesAt "1.23.2";
      # configs/releases.toml, as nix/releases.nix reads it.
      releases = builtins.fromTOML (builtins.readFile ./configs/releases.toml);
      releaseOf = version: builtins.head (builtins.filter (r: r.version == version) releases.releases);
      levels = builtins.filter (f: builtins.match "-O.*" f != null) settings.optimization_flags;

      # Host tools stand in for nixpkgs' coreutils, bash, g++, cmake and ninja (no sandbox).
      hostPath = "/usr/bin:/bin";
      # The script ends with bash's own `exit`: bash runs the last command of `-c` in its own
      # process (exec), and coreutils (cp, sed, ...) close stdout and stderr before they exit;
      # Nix 2.8 takes the end of the builder's output for its end and SIGKILLs the process
      # group, so a loaded machine's builder "failed due to signal 9" (NixOS/nix#2176;
      # tests/iterate/test_standin_builders.py). nixpkgs' builders end in bash functions.
      plain = name: script: derivation {
        inherit name system;
        builder = "/bin/bash";
        PATH = hostPath;
        args = [ "-c" "${script}exit $?" ];
      };
      stdenv = plain "standin-stdenv" ''
        mkdir -p $out
        cp ${./standin-stdenv-setup.sh} $out/setup
      '';
      ccWrapper = plain "standin-cc-wrapper" ''
        mkdir -p $out/bin $out/nix-support
        sed 's|@real@|/usr/bin/gcc|' ${./standin-cc-wrapper.sh} > $out/bin/cc
        sed 's|@real@|/usr/bin/g++|' ${./standin-cc-wrapper.sh} > $out/bin/c++
        chmod +x $out/bin/cc $out/bin/c++
        cp ${./standin-cc-setup-hook.sh} $out/nix-support/setup-hook
      '';
      tool = name: hook: plain "standin-${name}" ''
        mkdir -p $out/bin $out/nix-support
        ln -s /usr/bin/${name} $out/bin/${name}
        cp ${hook} $out/nix-support/setup-hook
      '';
      cmake = tool "cmake" ./standin-cmake-setup-hook.sh;
      ninja = tool "ninja" ./standin-ninja-setup-hook.sh;
      # A dependency from another derivation, as abseil or protobuf are for the real package.
      dep = plain "standin-dep-1.0" ''
        mkdir -p $out/include
        echo '#define STANDIN_DEP_VALUE 7' > $out/include/standin_dep.h
      '';

      package = derivation {
        name = "onnxruntime-standin-1.23.2";
        inherit system stdenv;
        builder = "/bin/bash";
        args = [ "-c" "source $stdenv/setup; genericBuild" ];
        outputs = [ "out" ];
        src = ./source;
        nativeBuildInputs = [ ccWrapper cmake ninja ];
        buildInputs = [ dep ];
        # nixpkgs' own patches first, then the series (nix/overrides.nix appends it).
        patches = [ ./nixpkgs-own.patch ] ++ seriesPatches;
        postPatch = ''
          sed -i 's/add_library(fixture STATIC/add_library(fixture SHARED/' CMakeLists.txt
          echo 'install(TARGETS fixture fixture_main)' >> CMakeLists.txt
        '';
        cmakeFlags = [
          "-DFIXTURE_STANDIN:BOOL=ON"
          "-Donnxruntime_NVCC_THREADS=${toString settings.nvcc_threads}"
        ] ++ (if levels != [ ] then [ "-DCMAKE_CXX_FLAGS_RELEASE=-DNDEBUG" ] else [ ]);
        CXXFLAGS = builtins.concatStringsSep " " settings.optimization_flags;
      };

      # Another release of the package, as nix/ort-release.nix layers it (onnxruntime-cpu-ort1_24_2
      # in the real flake): its own version and name; nixpkgs' own patches (for 1.23.2) dropped and
      # only the series entries for this release; each bundled dependency given to CMake as
      # FETCHCONTENT_SOURCE_DIR_<NAME> (a stand-in directory per dependency: ORT's sources cannot
      # be fetched here), and the release's flags. `src` stays the fixture source (the real layer
      # fetches the release's tag).
      atReleaseOf =
        version:
        let
          release = releaseOf version;
          deps = builtins.filter (d: !d.cuda_only) release.deps;
          depSource = d: plain "standin-${d.repo}-${d.tag or d.rev}" ''
            mkdir -p $out
            echo '${d.owner}/${d.repo} ${d.tag or d.rev}' > $out/STANDIN
          '';
        in
        derivation (
          package.drvAttrs
          // {
            name = "onnxruntime-standin-${version}";
            patches = seriesAt version;
            cmakeFlags =
              package.drvAttrs.cmakeFlags
              ++ [ "-DSTANDIN_ORT_RELEASE:STRING=${version}" ]
              ++ map (d: "-DFETCHCONTENT_SOURCE_DIR_${d.fetchcontent}:PATH=${depSource d}") deps
              ++ map (flag: "-D${flag}") release.cmake_flags;
          }
        );
    in
    {
      packages.${system} = {
        onnxruntime-cpu = package;
        onnxruntime-cpu-ort1_24_2 = atReleaseOf "1.24.2";
        standin-dep = dep;
      };
    };
}
