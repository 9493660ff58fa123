# The workbench app itself, built from this repository's pyproject.toml (hatchling).
#
# `src` is the repository (the flake's `self`). Only what the wheel needs is copied into the
# store, so editing configs/settings.toml or patches/ does not rebuild the app.
{
  pkgs,
  src,
}:
let
  lib = import ./lib.nix;
  py = pkgs.python3Packages;
  root = toString src;
  pyproject = builtins.fromTOML (builtins.readFile (root + "/pyproject.toml"));

  hasSuffix =
    suffix: text:
    let
      start = builtins.stringLength text - builtins.stringLength suffix;
    in
    start >= 0 && builtins.substring start (builtins.stringLength suffix) text == suffix;

  source = builtins.path {
    name = "workbench-source";
    path = root;
    filter =
      path: type:
      let
        relative = builtins.substring (builtins.stringLength root + 1) (-1) path;
      in
      builtins.elem relative [
        "pyproject.toml"
        "README.md"
        "LICENSE"
        "workbench"
      ]
      || (
        lib.hasPrefix "workbench/" relative
        && builtins.baseNameOf path != "__pycache__"
        && !(hasSuffix ".pyc" path)
      );
  };
in
py.buildPythonApplication {
  pname = "workbench";
  inherit (pyproject.project) version;
  pyproject = true;
  src = source;
  build-system = [ py.hatchling ];
  # pyproject.toml's [project] dependencies (tomli only matters before Python 3.11).
  dependencies = with py; [
    textual
    psutil
    pygdbmi
    rich
    tomlkit
    platformdirs
    unidiff
  ];
  makeWrapperArgs = [
    # GDB for the backtrace views; appended, so a gdb the user chose comes first.
    "--suffix"
    "PATH"
    ":"
    "${pkgs.gdb}/bin"
    # Installed, the package has no configs/ beside it: from a checkout, use the checkout's
    # (editable) configs unless WORKBENCH_CONFIG or --config says otherwise.
    "--run"
    ''if [ -z "''${WORKBENCH_CONFIG-}" ] && [ -f "$PWD/configs/matrix.toml" ]; then export WORKBENCH_CONFIG="$PWD/configs"; fi''
  ];
  pythonImportsCheck = [ "workbench" ];
  meta = {
    inherit (pyproject.project) description;
    mainProgram = "workbench";
    license = pkgs.lib.licenses.mit or "MIT";
  };
}
