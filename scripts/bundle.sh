#!/usr/bin/env bash
# Builds a relocatable detforge for an offline GPU host that has only a Python with torch
# (version BUNDLE_TORCH_VERSION in versions.env) and an NVIDIA driver: docs/bundle.md.
#   scripts/bundle.sh            build dist/detforge-<commit>-torch<version>-linux-x86_64.tar.gz
#   scripts/bundle.sh --check    then unpack it into a temporary folder and run it from there with
#                                the build trees moved away (the pinned torch stands in for the
#                                host's)
# Everything it downloads or builds lives in build-bundle/ (git-ignored); a second run reuses it.
# The tarball holds the three detforge executables, gpu_test, the libraries they load that are
# neither torch's nor glibc's (OpenCV is built here, static, with only core, imgproc
# and imgcodecs: Debian's libopencv pulls in GDAL, poppler and 60 more libraries), configs/,
# bench/, a launcher, bin/detforge-run, that puts the host torch's lib/ on the library path,
# bin/gpu_check.sh (the GPU visit in one command) and wheels/ with the Python packages it needs
# that the host lacks (mlperf-logging, the MLCommons checker; ultralytics, the YOLO peer).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=versions.env
source "$root/scripts/versions.env"
work="$root/build-bundle"
venv="$work/venv"
opencv_src="$work/opencv-$BUNDLE_OPENCV_VERSION"
opencv_prefix="$work/opencv-install"
build="$work/build"
check=0
[ "${1:-}" = "--check" ] && check=1

log() { printf '[bundle] %s\n' "$*"; }

install_torch() {
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  local stamp="$venv/.detforge-torch"
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$BUNDLE_TORCH_VERSION" ] && return
  log "torch $BUNDLE_TORCH_VERSION (with its CUDA libraries, as the host has them) into $venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "torch==$BUNDLE_TORCH_VERSION"
  echo "$BUNDLE_TORCH_VERSION" > "$stamp"
}

# The OpenCV modules detforge links (videoio: `predict --source video`, Motion-JPEG AVI only
# without FFmpeg).
opencv_modules=core,imgproc,imgcodecs,videoio

build_opencv() {
  [ "$(cat "$opencv_prefix/.detforge-done" 2> /dev/null)" = "$opencv_modules" ] && return
  local tarball="$work/opencv_${BUNDLE_OPENCV_VERSION}+dfsg.orig.tar.xz"
  if [ ! -f "$tarball" ]; then
    log "downloading Debian's OpenCV $BUNDLE_OPENCV_VERSION source"
    curl -sSfL -o "$tarball.part" "$BUNDLE_OPENCV_URL"
    mv "$tarball.part" "$tarball"
  fi
  echo "$BUNDLE_OPENCV_SHA256  $tarball" | sha256sum -c --quiet
  rm -rf "$opencv_src" && mkdir -p "$opencv_src"
  tar -xf "$tarball" -C "$opencv_src" --strip-components=1
  log "building OpenCV ($opencv_modules; static; JPEG, PNG and WebP from Debian)"
  cmake -S "$opencv_src" -B "$work/opencv-build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$opencv_prefix" -DBUILD_SHARED_LIBS=OFF \
    -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DBUILD_LIST="$opencv_modules" \
    -DBUILD_TESTS=OFF -DBUILD_PERF_TESTS=OFF -DBUILD_EXAMPLES=OFF -DBUILD_opencv_apps=OFF \
    -DBUILD_JAVA=OFF -DBUILD_opencv_python3=OFF -DWITH_IPP=OFF -DWITH_ITT=OFF \
    -DWITH_OPENCL=OFF -DWITH_LAPACK=OFF -DWITH_EIGEN=OFF -DWITH_TBB=OFF -DWITH_OPENMP=OFF \
    -DWITH_GDAL=OFF -DWITH_GDCM=OFF -DWITH_OPENEXR=OFF -DWITH_TIFF=OFF -DWITH_JASPER=OFF \
    -DWITH_OPENJPEG=OFF -DWITH_IMGCODEC_HDR=OFF -DWITH_IMGCODEC_SUNRASTER=OFF \
    -DWITH_IMGCODEC_PXM=OFF -DWITH_IMGCODEC_PFM=OFF -DWITH_PROTOBUF=OFF -DWITH_QUIRC=OFF \
    -DWITH_ADE=OFF -DWITH_VA=OFF -DWITH_GTK=OFF -DWITH_QT=OFF -DWITH_FFMPEG=OFF \
    -DWITH_GSTREAMER=OFF -DWITH_V4L=OFF -DWITH_1394=OFF -DWITH_CUDA=OFF -DWITH_JPEG=ON \
    -DWITH_PNG=ON -DWITH_WEBP=ON -DBUILD_JPEG=OFF -DBUILD_PNG=OFF -DBUILD_WEBP=OFF \
    -DBUILD_ZLIB=OFF -DOPENCV_GENERATE_PKGCONFIG=OFF >/dev/null
  cmake --build "$work/opencv-build" -j "${DETFORGE_JOBS:-2}"
  cmake --install "$work/opencv-build" >/dev/null
  echo "$opencv_modules" > "$opencv_prefix/.detforge-done"
}

build_detforge() {
  local prefix
  prefix="$("$venv/bin/python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')"
  if [ ! -f "$build/build.ninja" ]; then
    log "configuring $build against torch $BUNDLE_TORCH_VERSION"
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDETFORGE_RELOCATABLE=ON \
      -DCMAKE_PREFIX_PATH="$prefix;$opencv_prefix" -DOpenCV_DIR="$opencv_prefix/lib/cmake/opencv4" \
      -DDETFORGE_PYTHON=python3 >/dev/null
  fi
  log "building detforge and gpu_test (-j${DETFORGE_JOBS:-2})"
  cmake --build "$build" -j "${DETFORGE_JOBS:-2}" --target detforge gpu_test
}

# torch_paths [DIR:]TORCH_LIB: those and the pip torch's CUDA libraries beside TORCH_LIB, as the
# launcher puts them on the library path.
torch_paths() {
  local paths="$1" d
  for d in "${1##*:}"/../../nvidia/*/lib; do
    [ -d "$d" ] && paths="$paths:$(cd "$d" && pwd)"
  done
  echo "$paths"
}

# The libraries the binaries load that the bundle must carry: not torch's (the host's torch brings
# them and CUDA's), not glibc's (the host's: 2.34 or newer). libstdc++ and libgcc_s travel: GCC 12's
# are newer than those of RHEL 9, and torch's libraries need only manylinux_2_28's.
bundled_libs() {
  local torch_lib="$1"
  shift
  LD_LIBRARY_PATH="$(torch_paths "$torch_lib")" ldd "$@" | awk '/=> \// {print $3}' | sort -u |
    grep -v -E "/(torch|nvidia)/|/lib(c|m|dl|rt|pthread|util)\.so|/ld-linux" || true
}

stage() {
  local torch_lib commit name dir
  torch_lib="$("$venv/bin/python" -W ignore -c 'import os, torch; print(os.path.dirname(torch.__file__))')/lib"
  commit="$(git -C "$root" rev-parse --short HEAD)"
  name="detforge-$commit-torch$BUNDLE_TORCH_VERSION-linux-x86_64"
  dir="$work/stage/$name"
  rm -rf "$work/stage" && mkdir -p "$dir/bin/libexec" "$dir/lib" "$root/dist"
  cp "$build/detforge" "$build/tests/gpu_test" "$dir/bin/"
  cp "$build/libexec/detforge-data" "$build/libexec/detforge-torch" "$dir/bin/libexec/"
  strip "$dir/bin/detforge" "$dir/bin/gpu_test" "$dir/bin/libexec/"*
  local missing
  missing="$(LD_LIBRARY_PATH="$(torch_paths "$torch_lib")" ldd "$dir/bin/libexec/"* "$dir/bin/gpu_test" | grep "not found" || true)"
  [ -z "$missing" ] || { echo "[bundle] unresolved libraries:" >&2; echo "$missing" >&2; exit 1; }
  for lib in $(bundled_libs "$torch_lib" "$dir/bin/detforge" "$dir/bin/gpu_test" "$dir/bin/libexec/"*); do
    cp -L "$lib" "$dir/lib/"
  done
  cp -r "$root/configs" "$root/bench" "$dir/"
  cp "$root/scripts/detforge-run" "$root/scripts/gpu_check.sh" "$dir/bin/"
  "$venv/bin/python" -m pip download -q --disable-pip-version-check --no-deps -d "$dir/wheels" \
    "mlperf-logging==$MLPERF_LOGGING_VERSION" "ultralytics==$ULTRALYTICS_VERSION"
  echo "$BUNDLE_TORCH_VERSION" > "$dir/TORCH_VERSION"
  tar -C "$work/stage" -czf "$root/dist/$name.tar.gz" "$name"
  log "dist/$name.tar.gz: $(du -h "$root/dist/$name.tar.gz" | cut -f1); bundled libraries: $(ls "$dir/lib" | tr '\n' ' ')"
  echo "$root/dist/$name.tar.gz" > "$work/last"
}

# Build trees moved away during the check (restored on any exit).
hidden=()
restore_hidden() {
  for d in "${hidden[@]}"; do mv "$d.hidden" "$d"; done
  hidden=()
}
trap restore_hidden EXIT

# Runs the tarball as the GPU host would: unpacked elsewhere, no build tree, torch from a Python.
check_bundle() {
  local tarball tmp run
  tarball="$(cat "$work/last")"
  tmp="$(mktemp -d)"
  tar -C "$tmp" -xzf "$tarball"
  run="$(ls -d "$tmp"/detforge-*)/bin/detforge-run"
  for d in "$root/build" "$build"; do
    [ ! -e "$d.hidden" ] || { echo "[bundle] $d.hidden exists: move it back to $d first" >&2; exit 1; }
    [ -d "$d" ] && mv "$d" "$d.hidden" && hidden+=("$d")
  done
  # Every library must resolve into the bundle, the torch or the C/C++ runtime, never into
  # this machine's /usr/lib (which the GPU host does not have).
  local torch_lib outside
  torch_lib="$("$venv/bin/python" -W ignore -c 'import os, torch; print(os.path.dirname(torch.__file__))')/lib"
  outside="$(bundled_libs "$(dirname "$(dirname "$run")")/lib:$torch_lib" "$(dirname "$run")/detforge" "$(dirname "$run")/gpu_test" \
    "$(dirname "$run")/libexec/"* | xargs -r realpath -s | grep -v "^$(dirname "$(dirname "$run")")/lib/" || true)"
  [ -z "$outside" ] || { echo "[bundle] resolved outside the bundle:" >&2; echo "$outside" >&2; exit 1; }
  # libstdc++ must come first among each binary's libraries: torch 2.11's libtorch.so exports
  # std::filesystem functions of its own that crash when the C++ runtime's are bound to them.
  local bin first
  for bin in "$(dirname "$run")/detforge" "$(dirname "$run")/gpu_test" "$(dirname "$run")/libexec/"*; do
    first="$(readelf -d "$bin" | awk '/NEEDED/ {print $NF; exit}')"
    [ "$first" = "[libstdc++.so.6]" ] ||
      { echo "[bundle] $bin: first library $first, not libstdc++.so.6" >&2; exit 1; }
  done
  log "check: running $run from $tmp with the build trees moved away"
  (
    cd "$tmp"
    export DETFORGE_PYTHON="$venv/bin/python"
    "$run" --version
    "$run" synth --out data --train 16 --val 8 --size 128
    cat > quick.yaml <<EOF
_base_: $(dirname "$run")/../configs/retinanet/synth_r18.yaml
output_dir: $tmp/run
data: {root: $tmp/data, min_size: 128, max_size: 128, workers: 1}
train: {epochs: 1}
EOF
    "$run" train --config quick.yaml
    # Two Gloo ranks: the gradient engine (c10d::Reducer) and SyncBN against this torch, on
    # YOLOv8n, whose batch norms train (the RetinaNet above has GroupNorm and no SyncBN layer).
    cat > quick_bn.yaml <<EOF
_base_: $(dirname "$run")/../configs/yolo/synth_yolov8n.yaml
output_dir: $tmp/run2
data: {root: $tmp/data, min_size: 128, max_size: 128, workers: 1}
train: {epochs: 2}
EOF
    "$run" launch --nproc-per-node 2 -- "$run" train --config quick_bn.yaml dist.sync_bn=true
    "$run" gpu_test --gtest_brief=1
  )
  restore_hidden
  rm -rf "$tmp"
  log "check passed"
}

mkdir -p "$work"
install_torch
build_opencv
build_detforge
stage
[ "$check" -eq 0 ] || check_bundle
