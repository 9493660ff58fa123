# The workbench app itself, built from this repository's pyproject.toml (hatchling).
#
# `src` is the repository (the flake's `self`). Only what the wheel needs is copied into the
# store: the sources and what the wheel carries as the defaults of a workbench run outside any
# checkout (pyproject.toml's force-include: configs/, patches/, nix/, flake.nix, .flox/). Per-user
# settings (jobs, theme...) live in the user's config directory, so they never rebuild the app.
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
        "hatch_build.py"
        "README.md"
        "LICENSE"
        "flake.nix"
        "workbench"
        "configs"
        "patches"
        "nix"
        ".flox"
      ]
      || (
        builtins.any (top: lib.hasPrefix "${top}/" relative) [
          "workbench"
          "configs"
          "patches"
          "nix"
          ".flox"
        ]
        && builtins.baseNameOf path != "__pycache__"
        && !(hasSuffix ".pyc" path)
      );
  };
in
py.buildPythonApplication {
  pname = pyproject.project.name;
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
    argcomplete
  ];
  makeWrapperArgs = [
    # GDB for the backtrace views; appended, so a gdb the user chose comes first.
    "--suffix"
    "PATH"
    ":"
    "${pkgs.gdb}/bin"
    # No WORKBENCH_CONFIG: the workbench finds the checkout the current directory is in itself
    # (workbench/configs/paths.py), else the user's default checkout, else its packaged defaults.
  ];
  pythonImportsCheck = [ "workbench" ];
  meta = {
    inherit (pyproject.project) description;
    mainProgram = "workbench";
    license = pkgs.lib.licenses.mit or "MIT";
  };
}
