#!/usr/bin/env bash
# Runs the whole test suite: makes sure everything is installed and built (scripts/setup.sh,
# seconds when nothing changed), then every ctest test, then counts the skipped tests by reason
# (scripts/skip_report.py; with CI=true a skip for any reason but "no CUDA device" fails the
# run), and without arguments the fuzz targets (scripts/fuzz.sh test: a clang build in
# build-fuzz/, 10 s per target). Extra arguments go to the main ctest instead, e.g.
#   scripts/test.sh -L unit        only the unit tests
# Tests that read shared/datasets/bccd look in $DETFORGE_SHARED, else in the repository's
# shared/, else in the nearest shared/ in a folder above the repository.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/setup.sh"
cd "$root/build"
junit="$root/build/ctest-junit.xml"
rm -f "$junit"
status=0
ctest --output-on-failure -j "${DETFORGE_JOBS:-2}" --output-junit "$junit" "$@" || status=$?
python3 "$root/scripts/skip_report.py" "$junit" || { [ "$status" -ne 0 ] || status=1; }
# The whole suite also runs every fuzz target for 10 s from its seeds (build-fuzz/, label fuzz).
if [ $# -eq 0 ]; then
  bash "$root/scripts/fuzz.sh" test || { [ "$status" -ne 0 ] || status=1; }
fi
exit "$status"
