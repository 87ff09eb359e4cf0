#!/usr/bin/env bash
# The libraries and unit tests built with AddressSanitizer and UndefinedBehaviorSanitizer (gcc,
# build-asan/), then run: any report fails the test it ran in (docs/security.md).
#   scripts/sanitize.sh                 the unit tests (ctest -L unit -LE integration)
#   scripts/sanitize.sh -R Config       other ctest arguments instead
# The first build takes several times the normal one (no shared ccache entries); LibTorch itself
# is not instrumented, so reports point into detforge's code.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build-asan"
venv="$root/.venv"
tests=(core_test structures_test weights_test data_test plot_test ops_test losses_test models_test)
# gcc warns falsely of uninitialised values in std::regex and std::function under ASan.
flags="-fsanitize=address,undefined -fno-sanitize=vptr -fno-sanitize-recover=undefined -fno-omit-frame-pointer -Wno-maybe-uninitialized"

if [ ! -f "$build/build.ninja" ]; then
  prefix="$("$venv/bin/python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')"
  echo "[sanitize] configuring $build"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DCMAKE_PREFIX_PATH="$prefix" -DDETFORGE_PYTHON="$venv/bin/python" >/dev/null
fi
echo "[sanitize] building ${tests[*]} (-j${DETFORGE_JOBS:-2})"
cmake --build "$build" -j "${DETFORGE_JOBS:-2}" --target "${tests[@]}"
cd "$build"
# Leak checking is off: LibTorch keeps its global allocations to the end of the process.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
if [ $# -eq 0 ]; then set -- -L unit -LE integration; fi
ctest --output-on-failure -j "${DETFORGE_JOBS:-2}" "$@"
