#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh) and runs the default job: generate the synthetic
# dataset into data/synth, train a YOLOv8n from scratch on it on the CPU
# (configs/yolo/synth_yolov8n.yaml) and evaluate it (COCO mAP); the run draws its curves.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
start=$SECONDS
echo "[quickstart] setup: Debian packages beside the pinned Python wheels, then the detforge build"
echo "[quickstart] (on a 2-vCPU VM from a fresh clone: about 3 min of installs and 6-8 min of build;"
echo "[quickstart] seconds when done before), then a YOLOv8n trained for about 3 min on the CPU."
# Only the binary: the tests are built by scripts/test.sh.
SETUP_TARGET=detforge bash "$root/scripts/setup.sh"
cd "$root"
./build/detforge synth --out data/synth
# --resume auto: a second run (or one after an interruption) continues the first.
./build/detforge train --config configs/yolo/synth_yolov8n.yaml --resume auto
echo "[quickstart] done in $((SECONDS - start)) s"
