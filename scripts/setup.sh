#!/usr/bin/env bash
# Installs everything detforge needs on a fresh Debian 12 machine (as root), then configures
# and builds. Idempotent: a second run installs nothing that is already there.
#   scripts/setup.sh            install + build everything (the binary and the tests)
#   SETUP_TARGET=detforge ...   install + build only that target (the quickstart)
#   SETUP_SKIP_BUILD=1 ...      install only
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=versions.env
source "$root/scripts/versions.env"
venv="$root/.venv"
build="$root/build"

log() { printf '[setup] %s\n' "$*"; }
# Runs "$@" and says how long it took.
timed() {
  local t0=$SECONDS
  "$@"
  log "$1: done in $((SECONDS - t0)) s"
}

install_apt() {
  local missing=()
  for p in $APT_PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then log "Debian packages: all present"; return; fi
  log "Debian packages: installing ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

install_python() {
  [ -x "$venv/bin/python" ] || { log "creating $venv"; python3 -m venv "$venv"; }
  local want=(
    "torch==$TORCH_VERSION" "torchvision==$TORCHVISION_VERSION"
    "pycocotools==$PYCOCOTOOLS_VERSION" "faster-coco-eval==$FASTER_COCO_EVAL_VERSION"
    "hotcoco==$HOTCOCO_VERSION" "mlperf-logging==$MLPERF_LOGGING_VERSION"
    "numpy==$NUMPY_VERSION" "pillow==$PILLOW_VERSION"
    "scipy==$SCIPY_VERSION" "transformers==$TRANSFORMERS_VERSION"
    "ultralytics==$ULTRALYTICS_VERSION" "tensorboard==$TENSORBOARD_VERSION"
    "onnx==$ONNX_VERSION" "onnxruntime==$ONNXRUNTIME_VERSION" "sahi==$SAHI_VERSION"
    "rfdetr==$RFDETR_VERSION" "supervision==$SUPERVISION_VERSION" "timm==$TIMM_VERSION"
    "pytest==$PYTEST_VERSION" "jsonschema==$JSONSCHEMA_VERSION"
  )
  local stamp="$venv/.detforge-pins"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "${want[*]}" ]; then
    log "Python packages: all present"; return
  fi
  log "Python packages: installing ${want[*]}"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "${want[@]}"
  echo "${want[*]}" > "$stamp"
}

# clang (Debian's clang 14) by default: its precompiled LibTorch header keeps the header's template
# instantiations, which g++ 12 redoes in every file (about 9 s each; the whole build 2x faster:
# docs/development.md, "Build time"). DETFORGE_CXX=g++ builds with g++ instead.
configure_and_build() {
  local prefix cxx cached fresh=()
  prefix="$("$venv/bin/python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')"
  cxx="$(command -v "${DETFORGE_CXX:-clang++}")" ||
    { log "no compiler ${DETFORGE_CXX:-clang++} on PATH (DETFORGE_CXX)"; exit 1; }
  cached="$(sed -n 's/^CMAKE_CXX_COMPILER:FILEPATH=//p' "$build/CMakeCache.txt" 2>/dev/null || true)"
  if [ -n "$cached" ] && [ "$(realpath "$cached")" != "$(realpath "$cxx")" ]; then
    log "$build was configured for $cached: configuring it afresh for $cxx"
    fresh=(--fresh)
  fi
  if [ ! -f "$build/build.ninja" ] || [ ${#fresh[@]} -gt 0 ]; then
    log "configuring $build ($cxx)"
    CXX="$cxx" cmake "${fresh[@]}" -S "$root" -B "$build" -G Ninja \
      -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
      -DDETFORGE_PYTHON="$venv/bin/python" >/dev/null
  fi
  log "building ${SETUP_TARGET:-everything} (-j${DETFORGE_JOBS:-2})"
  cmake --build "$build" -j "${DETFORGE_JOBS:-2}" ${SETUP_TARGET:+--target "$SETUP_TARGET"}
}

# The Debian packages and the wheels do not depend on each other (the wheels need only the
# system python3), so apt runs beside pip; the build waits for both.
start=$SECONDS
timed install_apt &
apt_pid=$!
timed install_python
wait "$apt_pid" || { log "install_apt failed (its error is above)"; exit 1; }
log "installs: done in $((SECONDS - start)) s"
[ "${SETUP_SKIP_BUILD:-0}" = 1 ] || timed configure_and_build
