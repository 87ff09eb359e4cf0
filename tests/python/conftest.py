"""Fixtures of the Python package's tests (pytest under ctest: tests/CMakeLists.txt).

`binary` is the build's detforge ($DETFORGE_BINARY, set by ctest). `installed` is a fresh venv
made here with the package's wheel (`pip wheel` of the repository) installed; it reuses the project
venv's torch (linked into its site-packages, where the installed executables look for it) and
its other packages (a .pth file); pip builds it in an isolated environment with the build
requirements of pyproject.toml (from PyPI)."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]
# The quick config every test trains, on a small synthetic set; 2 epochs take seconds on a CPU.
QUICK = ["train.log_interval=1", "eval.interval=1", "data.workers=0", "seed=3"]


def binary():
    return os.environ.get("DETFORGE_BINARY", str(REPOSITORY / "build" / "detforge"))


def detforge(*args, check=True, **kwargs):
    completed = subprocess.run([binary(), *map(str, args)], capture_output=True, text=True,
                               stdin=subprocess.DEVNULL, **kwargs)
    if check and completed.returncode != 0:
        raise AssertionError(f"detforge {' '.join(map(str, args))} exited "
                             f"{completed.returncode}:\n{completed.stdout}\n{completed.stderr}")
    return completed


@pytest.fixture(scope="session")
def synth(tmp_path_factory):
    out = tmp_path_factory.mktemp("synth")
    detforge("synth", "--out", out, "--train", 16, "--val", 8, "--size", 128)
    return out


@pytest.fixture(scope="session")
def installed(tmp_path_factory):
    """The python of a fresh venv with `detforge` installed from the repository."""
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    project = Path(sys.prefix)
    project_site = next(project.glob("lib/python3*/site-packages"))
    site = next(venv.glob("lib/python3*/site-packages"))
    for shared in ("torch", "nvidia"):
        if (project_site / shared).exists():
            (site / shared).symlink_to(project_site / shared)
    (site / "project_venv.pth").write_text(str(project_site) + "\n")
    python = venv / "bin" / "python"
    env = {**os.environ, "DETFORGE_BUILD_DIR": str(Path(binary()).parent)}
    # `pip wheel .`, then the wheel installed: the path of a wheel built once and installed
    # elsewhere, and the steps `pip install .` takes.
    wheels = tmp_path_factory.mktemp("wheel")
    pip = [python, "-m", "pip", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "wheel", "--no-deps", "-w", wheels, REPOSITORY], check=True, env=env,
                   cwd=venv)
    (wheel,) = wheels.glob("detforge-*.whl")
    assert "linux_x86_64" in wheel.name, wheel.name
    subprocess.run([*pip, "install", "--no-deps", wheel], check=True, cwd=venv)
    return python


def run_python(python, code, timeout=600, **kwargs):
    """Runs `code` with `python` (outside the repository, so `import detforge` is the installed
    one); returns the JSON the code prints on its last line."""
    env = {k: v for k, v in os.environ.items() if k != "DETFORGE_BINARY"}
    completed = subprocess.run([str(python), "-c", textwrap.dedent(code)], capture_output=True,
                               text=True, timeout=timeout, cwd="/", env=env, **kwargs)
    if completed.returncode != 0:
        raise AssertionError(f"python exited {completed.returncode}:\n{completed.stdout}\n"
                             f"{completed.stderr}")
    return json.loads(completed.stdout.strip().splitlines()[-1])
