#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh) and runs the default job: generate the synthetic
# dataset into data/synth and print its summary.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/setup.sh"
cd "$root"
./build/detforge synth --out data/synth
