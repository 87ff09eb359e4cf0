#!/usr/bin/env bash
# Runs the whole test suite: makes sure everything is installed and built (scripts/setup.sh,
# seconds when nothing changed), then every ctest test. Extra arguments go to ctest, e.g.
#   scripts/test.sh -L unit        only the unit tests
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/setup.sh"
cd "$root/build"
ctest --output-on-failure -j "${DETFORGE_JOBS:-2}" "$@"
