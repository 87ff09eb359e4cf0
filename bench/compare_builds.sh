#!/usr/bin/env bash
# The benchmark rows that our own compiled code moves (COCO evaluation, the loader's decode and
# augmentations, NMS and the model steps around LibTorch), for two build folders in one run,
# alternating A B A B so that both see the same machine: e.g. a g++ and a clang build.
#   bash bench/compare_builds.sh build-gcc build-clang [rounds]
# Each row's output goes to the terminal under a "== <build> round <n>: <row>" line; compare a
# row's two builds against the spread of its own rounds (docs/BENCHMARKS.md, "Compilers").
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 BUILD_A BUILD_B [ROUNDS]" >&2; exit 2; }
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
rounds="${3:-2}"
rows=(
  "bench eval --peers none --repeat 3"
  "bench loader --no-peer --max-workers 1"
  "bench loader --no-peer --max-workers 1 --pipeline yolo"
  "bench model --model yolov8n --no-peer --threads 2 --size 320 --iters 3 --warmup 1"
  "bench model --model retinanet_r50_fpn --no-peer --threads 2 --iters 2 --warmup 1"
)
for round in $(seq "$rounds"); do
  for row in "${rows[@]}"; do
    for build in "$1" "$2"; do
      echo "== $build round $round: $row"
      # shellcheck disable=SC2086 # a row is its words
      "$build/detforge" --log-level warn $row
    done
  done
done
