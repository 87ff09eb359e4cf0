#!/usr/bin/env bash
# What a dense image costs each family in training: peak memory (max RSS) of a one-epoch run on
# one 640x640 image with 16, 1,000 and 5,000 boxes (bench/dense_data.py), batch 1, each family's
# synthetic-set config at 640 px on the CPU. docs/data.md ("Dense images") has the results.
#
#   bash bench/dense_memory.sh [OUT_DIR]
#
# About 3 minutes on the 2-core development VM; RetinaNet's 5,000-box run needs about 15 GB.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$(realpath -m "${1:-runs/dense_memory}")"
mkdir -p "$out"
"$root/.venv/bin/python" "$root/bench/dense_data.py" "$out"
for cfg in yolo/synth_yolov8n retinanet/synth_r18 rtdetr/synth_r18vd dfine/synth_dfine_n \
  rfdetr/synth_rfdetr_nano; do
  for n in 16 1000 5000; do
    rm -rf "$out/run"
    /usr/bin/time -f "%M" -o "$out/rss" "$root/build/detforge" train \
      --config "$root/configs/$cfg.yaml" data.root="$out" data.train.ann="dense_$n.json" \
      data.train.images=images data.val.ann=dense_16.json data.val.images=images \
      data.batch_size=1 data.workers=0 data.min_size=640 data.max_size=640 data.fixed_size=null \
      data.check_images=none train.epochs=1 eval.interval=0 output_dir="$out/run" \
      > "$out/${cfg//\//_}_$n.log" 2>&1
    echo "$cfg $n boxes: max RSS $(( $(cat "$out/rss") / 1024 )) MB"
  done
done
