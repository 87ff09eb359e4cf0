#!/usr/bin/env bash
# Runs the whole test suite: makes sure everything is installed and built (scripts/setup.sh,
# seconds when nothing changed), then every ctest test, then counts the skipped tests by reason
# (scripts/skip_report.py; with CI=true a skip for any reason but "no CUDA device" fails the
# run). Extra arguments go to ctest, e.g.
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
exit "$status"
