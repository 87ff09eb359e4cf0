#!/usr/bin/env bash
# The GPU visit in one command (issue 31; docs/bundle.md). On the offline GPU host, from an
# unpacked bundle (scripts/bundle.sh puts this script in its bin/):
#   bin/gpu_check.sh OUT_DIR
# or from a source tree after scripts/setup.sh (build/detforge, build/tests/gpu_test, .venv):
#   scripts/gpu_check.sh OUT_DIR
# It runs, in this order, each part under its own time limit (GPU_CHECK_PART_S seconds, default
# 480) so that a part that hangs cannot eat the visit, and writes everything under OUT_DIR:
#   versions.txt          nvidia-smi, detforge, and the Python's torch, CUDA and device
#   gpu_test.log          the gpu tests (gtest), full log
#   bench_r50.txt         bench model: RetinaNet R50-FPN train step in fp32 / bf16 /
#                         channels_last with peak memory, beside torchvision on the same GPU
#   bench_mlperf.txt      the same for the MLPerf ResNeXt-50 model (264 classes, batch 32, 800 px)
#   bench_yolov8n.txt,    YOLOv8n / YOLOv8s train step and inference (fp32, batch 16 at 640 px)
#   bench_yolov8s.txt     beside Ultralytics on the same GPU, with peak device memory
#   bench_rtdetr.txt      RT-DETRv2 r18vd the same way beside transformers
#   bench_rfdetr.txt      RF-DETR-N (batch 16 at 384 px) beside rfdetr where the host has it
#   train_mlperf.txt,     bench train: the whole training loop (loader, copies, step, optimizer,
#   train_yolov8n.txt,    EMA; no evaluation) of the MLPerf recipe (batch 32 at 800 px), YOLOv8n and
#   train_rtdetr.txt      RT-DETRv2 r18vd (batch 16 at 640 px) on synthetic images (every batch
#                         of the timing in one epoch: no loader restart inside it), the loader
#                         alone and the reference's own loop (torchvision, Ultralytics' trainer,
#                         transformers); each followed by a short run with --sync-report (the host
#                         synchronisations per step, by operator and detforge range)
#   mlperf/               the MLPerf recipe (configs/retinanet/mlperf_x50.yaml) for
#                         GPU_CHECK_MLPERF_STEPS steps (default 300) on synthetic 800x800 images
#                         whose file lists 264 categories: train.log, the run directory with
#                         mlperf.log, and checker.txt, the MLCommons checker's verdict on it
#   profile/              one bf16 train step of the MLPerf model under LibTorch's profiler:
#                         trace.json and summary.txt (top kernels, device idle share)
#   summary.txt           one line per part: ok, failed (exit code), timed out, or skipped (why)
# Without CUDA (as here on the CPU, where this script is tested end to end) the GPU parts are
# skipped, and the MLPerf recipe and the profile run a few steps at 128 px on the CPU instead, so
# that every command line is checked before the visit. The host has no network: the MLCommons
# checker (mlperf-logging) and Ultralytics (the YOLO peer) come as wheels in the bundle's wheels/,
# installed with pip --no-index --target into OUT_DIR/site, on PYTHONPATH over the host's torch.
# Environment: DETFORGE_PYTHON (the Python with torch; default: the source tree's .venv, else
# python3), GPU_CHECK_PART_S, GPU_CHECK_TOTAL_S (a deadline for the whole visit: a part gets at
# most the time left, and a part that would get under 10 s is skipped as out of time; default none),
# GPU_CHECK_MLPERF_STEPS, GPU_CHECK_ONLY (the parts to run, by name, space-separated, for a second
# short visit; versions always runs; default: all), GPU_CHECK_GPU_TEST (the gtest binary the
# gpu_test part runs, for the script's own tests). Exit status: 0 when no part failed.
set -uo pipefail
[ $# -eq 1 ] || { echo "usage: $0 OUT_DIR" >&2; exit 2; }
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
top="$(dirname "$here")"
mkdir -p "$1" || exit 6
out="$(cd "$1" && pwd)"
limit="${GPU_CHECK_PART_S:-480}"
steps="${GPU_CHECK_MLPERF_STEPS:-300}"
total="${GPU_CHECK_TOTAL_S:-0}"
only="${GPU_CHECK_ONLY:-}"

if [ -x "$here/detforge" ]; then  # a bundle: bin/detforge(-run), configs/, bench/, wheels/
  df="$here/detforge-run"
  gpu_test=("$here/detforge-run" gpu_test)
  py="${DETFORGE_PYTHON:-python3}"
else  # a source tree
  df="$top/build/detforge"
  gpu_test=("$top/build/tests/gpu_test")
  py="${DETFORGE_PYTHON:-$top/.venv/bin/python}"
  [ -x "$py" ] || py=python3
fi
# An absolute path: `bench --python` and the launcher take a file, not a name on the PATH.
py="$(command -v "$py" || echo "$py")"
export DETFORGE_PYTHON="$py"
summary="$out/summary.txt"
: > "$summary"
failed=0

# run_part NAME LOG CMD...: CMD (a command, or a function of this script) under the time limit,
# stdout and stderr into LOG, and its outcome as one line of the summary. Functions run in a
# child bash, which timeout can stop: they and the variables they read are exported.
run_part() {
  local name="$1" log="$2" rc part_limit="$limit"
  shift 2
  if [ -n "$only" ] && [ "$name" != versions ] && [[ " $only " != *" $name "* ]]; then
    skip "$name" "not in GPU_CHECK_ONLY"
    return 0
  fi
  if [ "$total" -gt 0 ]; then
    local left=$((total - SECONDS))
    [ "$left" -ge 10 ] || { skip "$name" "out of time: GPU_CHECK_TOTAL_S=$total"; return 0; }
    [ "$left" -lt "$part_limit" ] && part_limit="$left"
  fi
  printf '[gpu_check] %s (at %d s) ...\n' "$name" "$SECONDS"
  if [ "$(type -t "$1")" = function ]; then
    timeout --kill-after=5 "$part_limit" bash -c "$*" > "$log" 2>&1
  else
    timeout --kill-after=5 "$part_limit" "$@" > "$log" 2>&1
  fi
  rc=$?
  if [ "$rc" -eq 0 ]; then
    echo "$name: ok, done at $SECONDS s ($log)" >> "$summary"
  elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "$name: timed out after ${part_limit} s ($log)" >> "$summary"
    failed=1
  else
    echo "$name: failed, exit $rc ($log)" >> "$summary"
    failed=1
  fi
  return 0
}

skip() { echo "$1: skipped ($2)" >> "$summary"; }

versions() {
  if command -v nvidia-smi > /dev/null; then nvidia-smi; else echo "no nvidia-smi on the PATH"; fi
  "$df" --version
  "$py" -c 'import torch
print("torch", torch.__version__, "CUDA", torch.version.cuda, "cuDNN", torch.backends.cudnn.version())
print("device", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none (no CUDA)")'
}
export -f versions
export df py out top
run_part versions "$out/versions.txt" versions

cuda=0
"$py" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2> /dev/null && cuda=1

# The packages the Python lacks (the checker, Ultralytics): the bundle's wheels into OUT_DIR/site,
# put on PYTHONPATH. Not a venv: the host's torch often lives in a venv itself, and a venv made
# from it with --system-site-packages sees the base interpreter's packages, not that venv's torch.
if ! "$py" -c 'import mlperf_logging, ultralytics' 2> /dev/null; then
  if ls "$top"/wheels/*.whl > /dev/null 2>&1; then
    "$py" -m pip install -q --no-index --no-deps --no-compile --target "$out/site" \
      "$top"/wheels/*.whl && export PYTHONPATH="$out/site${PYTHONPATH:+:$PYTHONPATH}"
  fi
fi

# The parts in the order of what a short visit must bring back first: the tests, the MLPerf
# model's benchmark and profile, one model of each other family, the other two models, then the
# recipe (the first visit ran it; its checker passed all but the accuracy rule).
# Each test in its own process, so that one that crashes (a segfault loses what gtest had not
# flushed yet) cannot hide the others. A skipped test is not a pass on a visit: it fails the
# part, with its reason, unless there is no CUDA at all and that is the reason it gives.
gpu_tests() {
  local t rc=0 log reason
  log="$(mktemp)"
  # shellcheck disable=SC2086 # gpu_test_cmd: the command and its first argument, split on spaces
  for t in $($gpu_test_cmd --gtest_list_tests | awk '/^[^ ]/ {s=$1} /^  / {print s $1}'); do
    $gpu_test_cmd --gtest_filter="$t" > "$log" 2>&1 || { echo "[gpu_check] $t: exit $?"; rc=1; }
    cat "$log"
    grep -q '^\[  SKIPPED \]' "$log" || continue
    reason="$(awk 'f {print; exit} / Skipped$/ {f=1}' "$log")"
    [ "$cuda" = 0 ] && [ "$reason" = "no CUDA device" ] && continue
    echo "[gpu_check] $t: skipped (${reason:-no reason given}), which counts as a failure here"
    rc=1
  done
  rm -f "$log"
  return "$rc"
}
export -f gpu_tests
export cuda gpu_test_cmd="${GPU_CHECK_GPU_TEST:-${gpu_test[*]}}"
run_part gpu_test "$out/gpu_test.log" gpu_tests

# bench NAME MODEL BATCH SIZE PEER_SCRIPT: one `bench model` part on cuda:0 (skipped without CUDA).
bench() {
  if [ "$cuda" -eq 0 ]; then
    skip "$1" "no CUDA device"
    return
  fi
  run_part "$1" "$out/$1.txt" "$df" bench model --model "$2" --device cuda:0 --batch "$3" \
    --size "$4" --iters 10 --python "$py" --peer-script "$top/bench/$5"
}

profile() {
  if [ "$cuda" -eq 1 ]; then
    run_part profile "$out/profile.log" "$df" bench model --model retinanet_x50_mlperf \
      --device cuda:0 --batch 32 --size 800 --iters 3 --no-peer --profile "$out/profile"
  else
    run_part profile "$out/profile.log" "$df" bench model --model retinanet_x50_mlperf \
      --batch 1 --size 128 --iters 1 --warmup 0 --no-peer --profile "$out/profile"
  fi
}

# synth_data DIR SIZE COUNT: the synthetic shapes (COUNT training images of SIZE px) under DIR,
# their file's category list widened to OpenImages-MLPerf's 264 classes (the three shapes keep
# their category ids 1, 3, 7).
synth_data() {
  rm -rf "$1"
  "$df" synth --out "$1" --train "$3" --val 1 --size "$2" > /dev/null || return
  "$py" - "$1/annotations" << 'EOF'
import json, pathlib, sys
for f in pathlib.Path(sys.argv[1]).glob("instances_*.json"):
    d = json.loads(f.read_text())
    d["categories"] = [{"id": i, "name": f"class{i}", "supercategory": "none"} for i in range(1, 265)]
    f.write_text(json.dumps(d))
EOF
}
export -f synth_data

# bench_train NAME CONFIG DATA [OVERRIDES...]: `bench train` of CONFIG on the synthetic set DATA
# (40 timed steps after 10) beside the reference's own loop (bench/train_peer.py), then 2 steps
# after 2 with --sync-report. Skipped without CUDA.
bench_train() {
  local name="$1" config="$2" data="$3"
  shift 3
  if [ "$cuda" -eq 0 ]; then
    skip "$name" "no CUDA device"
    return
  fi
  local common=(data.root="$data" data.train.ann=annotations/instances_train.json
    data.train.images=train data.val.ann=annotations/instances_train.json data.val.images=train
    device=cuda:0 "$@")
  run_part "$name" "$out/$name.txt" bash -c '"$0" bench train -c "$1" --steps 40 --warmup 10 \
    --python "$py" --peer-script "$top/bench/train_peer.py" "${@:2}" &&
    "$0" bench train -c "$1" --steps 2 --warmup 2 --sync-report --no-peer "${@:2}"' \
    "$df" "$config" "${common[@]}"
}

# The MLPerf recipe on synthetic images. It evaluates on its own training images (as
# TrainerTest.MlperfLogPassesTheComplianceChecker does), so that the checker's accuracy rule
# (eval_accuracy >= 0.34) is within reach of a short run.
mlperf() {
  local data="$out/mlperf/data" size=800 train=256 args=(train.log_interval=20)
  if [ "$cuda" -eq 0 ]; then
    size=128 train=8 steps=8
    args=(device=cpu train.precision=fp32 data.batch_size=2 data.workers=1 train.log_interval=1
      "data.fixed_size=[128, 128]")
  fi
  # A fresh run: the MLPerf log of a run directory appends (a resumed run continues it).
  rm -rf "$out/mlperf/run"
  [ -f "$data/annotations/instances_train.json" ] || synth_data "$data" "$size" "$train" || return
  "$df" train --config "$top/configs/retinanet/mlperf_x50.yaml" "data.root=$data" \
    data.train.ann=annotations/instances_train.json data.train.images=train \
    data.val.ann=annotations/instances_train.json data.val.images=train \
    model.backbone.weights=null "output_dir=$out/mlperf/run" "train.stop_at_step=$steps" \
    "${args[@]}" || return
  (cd "$out/mlperf/run" &&
    "$py" -m mlperf_logging.compliance_checker --usage training --ruleset 5.1.0 mlperf.log) \
    > "$out/mlperf/checker.txt" 2>&1
  echo "MLCommons checker: exit $? ($out/mlperf/checker.txt)"
}
mkdir -p "$out/mlperf"
export -f mlperf
export py cuda steps

bench bench_mlperf retinanet_x50_mlperf 32 800 device_peer.py
profile
if [ "$cuda" -eq 1 ]; then
  # bench train's sets hold every batch of its 50 steps (and the sync report's 4), so that no
  # epoch restarts inside the timing: 52 batches of 32 at 800 px, of 16 at 640 px.
  synth_data "$out/mlperf/data" 800 256 &
  synth_data "$out/synth800" 800 1664 &
  synth_data "$out/synth640" 640 832 &
  wait
  cat > "$out/rtdetr_r18vd_synth.yaml" << EOF
_base_: [$top/configs/rtdetr/rtdetr_r18vd.yaml, $top/configs/_base_/datasets/synth.yaml]
model: {num_classes: 264}
EOF
fi
bench_train train_mlperf "$top/configs/retinanet/mlperf_x50.yaml" "$out/synth800" \
  model.backbone.weights=null
bench bench_yolov8n yolov8n 16 640 yolo_peer.py
bench_train train_yolov8n "$top/configs/yolo/synth_yolov8n.yaml" "$out/synth640" \
  model.num_classes=264 data.num_classes=264 data.min_size=640 data.max_size=640 \
  data.batch_size=16 data.workers=8
bench bench_rtdetr rtdetr_r18vd 16 640 rtdetr_peer.py
bench_train train_rtdetr "$out/rtdetr_r18vd_synth.yaml" "$out/synth640" data.num_classes=264 \
  data.min_size=640 data.max_size=640 data.batch_size=16 data.workers=8
bench bench_r50 retinanet_r50_fpn 16 800 device_peer.py
bench bench_yolov8s yolov8s 16 640 yolo_peer.py
bench bench_yolo11n yolo11n 16 640 yolo_peer.py
bench bench_yolo26n yolo26n 16 640 yolo_peer.py
bench bench_rfdetr rfdetr_nano 16 384 rfdetr_peer.py
run_part mlperf "$out/mlperf/train.log" mlperf
if [ -f "$out/mlperf/checker.txt" ]; then
  verdict="$(grep -E "SUCCESS|FAILED" "$out/mlperf/checker.txt" | tail -n 1)"
  echo "mlperf checker: ${verdict:-no verdict} ($out/mlperf/checker.txt)" >> "$summary"
fi

printf '[gpu_check] done: %s\n' "$summary"
cat "$summary"
exit "$failed"
