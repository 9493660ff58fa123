# The builder flake's post-install steps for the linkage flavours (configs/flavours.toml), as
# shell text for mkDerivation's postInstall and postFixup. Written from the builder flake's
# description of its outputs (bugeats/onnxruntime-builder, flake.nix at 4a9d5af: "Implement
# hybrid CUDA build"); our own code.
#
# Plain shell and the tools stdenv puts on PATH ($AR, $RANLIB, find, cp), so
# tests/artefacts/test_flavour_layout.py runs these very steps under real Nix over a build tree of real
# archives, and checks the layout they leave.
#
#   linkage      "static", "hybrid" or "shared"
#   cuda         whether it is a CUDA build
#   cudnnLib     cuDNN's lib output (CUDA only), copied into lib/cudnn for consumers
#   nvcc         nvcc's bin output (static CUDA only): device-link the provider's objects
#   architectures  the CMAKE_CUDA_ARCHITECTURES list, for nvcc -dlink's -gencode
#   inputArchives  archive file name -> the lib/ directory of the nixpkgs input that holds it
#                  (static core only), for the dependencies ORT does not build itself (below)
{
  linkage,
  cuda,
  cudnnLib ? null,
  nvcc ? null,
  architectures ? [ ],
  inputArchives ? { },
}:
let
  inherit (builtins) attrNames concatStringsSep map;
  staticCore = linkage != "shared";
  # The archives of the dependencies ORT fetches and builds itself (FetchContent, under
  # _deps/), which a static link of libonnxruntime.a needs beside it. Not all of them are there
  # in a real build: nixpkgs' onnxruntime sets FETCHCONTENT_TRY_FIND_PACKAGE_MODE=ALWAYS and
  # gives ORT nixpkgs' protobuf and cpuinfo as buildInputs, so find_package finds those and ORT
  # builds neither; their archives come from the inputs instead (inputArchives).
  dependencyArchives = [
    "libonnx*.a"
    "libprotobuf*.a"
    "libre2.a"
    "libabsl_*.a"
    "libcpuinfo*.a"
    "libclog*.a"
    "libnsync*.a"
    "libflatbuffers*.a"
  ];
  gencode = concatStringsSep " " (
    map (arch: "-gencode=arch=compute_${arch},code=sm_${arch}") architectures
  );
  # "NAME DIR" lines, one per archive a nixpkgs input must supply.
  inputArchiveLines = concatStringsSep "\n" (
    map (name: "${name} ${inputArchives.${name}}") (attrNames inputArchives)
  );
  # Whether every input archive is there: checked before the build starts (preConfigure),
  # since the inputs are known then; an hour of compiling must not end in a layout without them.
  checkInputArchives = ''
    missing=""
    while read -r name dir; do
      [ -n "$name" ] || continue
      [ -f "$dir/$name" ] || missing="$missing $dir/$name"
    done <<'INPUTS'
    ${inputArchiveLines}
    INPUTS
    if [ -n "$missing" ]; then
      echo "workbench: the static core needs archives that nixpkgs' inputs do not have:$missing" >&2
      echo "workbench: ORT finds these dependencies with find_package (FETCHCONTENT_TRY_FIND_PACKAGE_MODE=ALWAYS) and builds none of them, so a static link would lack them" >&2
      exit 1
    fi
  '';
in
{
  # Runs before CMake: fails at once when an input lacks an archive the layout needs.
  preConfigure = if staticCore && inputArchives != { } then checkInputArchives else "";

  postInstall =
    ''
      mkdir -p "$out/lib"
    ''
    + (
      if staticCore then
        ''
          # Dependency archives a static link needs (they are not installed by ORT's CMake).
          for pattern in ${concatStringsSep " " (map (p: "'${p}'") dependencyArchives)}; do
            find _deps -name "$pattern" -type f -exec cp -n {} "$out/lib/" \; 2>/dev/null || true
          done
          # Those ORT found in nixpkgs instead of building: from the inputs (checked present
          # in preConfigure; checked again here, never dropped silently).
          while read -r name dir; do
            [ -n "$name" ] || continue
            [ -f "$out/lib/$name" ] && continue
            if [ ! -f "$dir/$name" ]; then
              echo "workbench: $name is neither under _deps nor in $dir" >&2
              exit 1
            fi
            cp "$dir/$name" "$out/lib/"
            chmod u+w "$out/lib/$name"
          done <<'INPUTS'
          ${inputArchiveLines}
          INPUTS
        ''
      else
        ""
    )
    + (
      if cuda && linkage == "hybrid" then
        ''
          # The CUDA provider and the bridge, loaded with dlopen from the static core's
          # GetRuntimePath() ($out/lib/, nixpkgs' postPatch): copied if install left them out.
          for f in libonnxruntime_providers_cuda.so libonnxruntime_providers_shared.so; do
            if [ ! -f "$out/lib/$f" ]; then
              found=$(find . -name "$f" -not -path "$out/*" -print -quit)
              if [ -z "$found" ]; then
                echo "workbench: hybrid build produced no $f" >&2
                exit 1
              fi
              cp "$found" "$out/lib/"
            fi
          done
        ''
      else
        ""
    )
    + (
      if cuda && linkage == "static" && nvcc != null then
        ''
          # Separable CUDA compilation needs a device link of the provider's objects.
          if [ ! -f "$out/lib/libonnxruntime_providers_cuda.a" ]; then
            found=$(find . -name libonnxruntime_providers_cuda.a -not -path "$out/*" -print -quit)
            if [ -z "$found" ]; then
              echo "workbench: static CUDA build produced no libonnxruntime_providers_cuda.a" >&2
              exit 1
            fi
            cp "$found" "$out/lib/"
          fi
          dlink=$(mktemp -d)
          ( cd "$dlink" && "$AR" x "$out/lib/libonnxruntime_providers_cuda.a" )
          objects=$(find "$dlink" -name '*.cu.o')
          if [ -n "$objects" ]; then
            "${nvcc}/bin/nvcc" -dlink ${gencode} -o "$out/lib/cuda_device_link.o" $objects
          fi
          rm -rf "$dlink"
        ''
      else
        ""
    )
    + (
      if staticCore then
        ''
          # One merged libonnxruntime.a of ORT's component archives.
          ( cd "$out/lib"
            components=$(ls libonnxruntime_*.a 2>/dev/null || true)
            if [ -z "$components" ]; then
              echo "workbench: no libonnxruntime_*.a component archives to merge" >&2
              exit 1
            fi
            { echo "CREATE libonnxruntime.a"
              for f in $components; do echo "ADDLIB $f"; done
              echo "SAVE"; echo "END"; } > merge.mri
            "$AR" -M < merge.mri
            rm merge.mri
            if [ -f cuda_device_link.o ]; then "$AR" r libonnxruntime.a cuda_device_link.o; fi
            "$RANLIB" libonnxruntime.a )
          if [ ! -f "$out/lib/pkgconfig/libonnxruntime.pc" ]; then
            mkdir -p "$out/lib/pkgconfig"
            libs=$(cd "$out/lib" && ls lib*.a | sed -e 's/^lib/-l/' -e 's/\.a$//' | grep -v '^-lonnxruntime$' | tr '\n' ' ')
            cat > "$out/lib/pkgconfig/libonnxruntime.pc" <<PC
          prefix=$out
          libdir=$out/lib
          includedir=$out/include
          Name: onnxruntime
          Description: ONNX Runtime ($version, static core)
          Version: $version
          Libs: -L$out/lib -lonnxruntime $libs
          Cflags: -I$out/include
          PC
          fi
        ''
      else
        ""
    )
    + (
      if cuda then
        ''
          # cuDNN beside the libraries: a consumer's LD_LIBRARY_PATH is $out/lib/cudnn.
          mkdir -p "$out/lib/cudnn"
          cp -L ${cudnnLib}/lib/libcudnn*.so* "$out/lib/cudnn/"
        ''
      else
        ""
    );

  # nixpkgs forbids nvcc in the closure (disallowedRequisites) and scrubs only
  # libonnxruntime_providers_cuda.so; every library here can hold its path.
  postFixup =
    if cuda && nvcc != null then
      ''
        find "$out" -type f -print0 | xargs -0 --no-run-if-empty remove-references-to -t "${nvcc}"
      ''
    else
      "";
}
