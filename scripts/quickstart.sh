#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh) and runs the default job: generate the synthetic
# dataset into data/synth, train a small RetinaNet on it on the CPU, evaluate it (COCO mAP) and
# draw its curves.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Only the binary: the tests are built by scripts/test.sh.
SETUP_TARGET=detforge bash "$root/scripts/setup.sh"
cd "$root"
./build/detforge synth --out data/synth
./build/detforge train --config configs/retinanet/synth_r18.yaml
./build/detforge plot runs/synth_r18
