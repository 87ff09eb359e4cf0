#!/usr/bin/env bash
# The small-object recipe (docs/recipes.md, "Small objects"): YOLOv8n from scratch on the tree
# crowns of scripts/trees_data.sh, trained on whole photos resized to 640 px
# (configs/yolo/trees_yolov8n.yaml) and on 640 px tiles at full resolution
# (configs/yolo/trees_tiled_yolov8n.yaml), each evaluated whole and sliced (predict --slice 640)
# with its last EMA weights; prints AP, AP50 and AP_small of the four as a markdown table.
# A run already finished (runs/<name>/last.ckpt) is not trained again. Run from the repository
# root after the build. TREES_OVERRIDES adds config overrides to both trainings (a quick check:
# TREES_OVERRIDES="train.epochs=2 eval.interval=1"; the runs land in runs/<name> all the same).
set -euo pipefail
detforge="${DETFORGE:-build/detforge}"
[ -d data/trees ] || bash scripts/trees_data.sh data/trees
[ -f data/trees_coco/annotations/instances_val.json ] ||
  "$detforge" convert --from voc --to coco --ann data/trees/ImageSets/Main/val.txt --split val \
    --out data/trees_coco --image-files copy
gt=data/trees_coco/annotations/instances_val.json
echo "| training | evaluation | AP | AP50 | AP_small | train wall time |"
echo "| --- | --- | ---: | ---: | ---: | ---: |"
for name in trees_yolov8n trees_tiled_yolov8n; do
  run="runs/$name"
  seconds="-"
  if [ ! -f "$run/last.ckpt" ]; then
    start=$(date +%s)
    # shellcheck disable=SC2086
    "$detforge" train -c "configs/yolo/$name.yaml" ${TREES_OVERRIDES:-} output_dir="$run" \
      >"$run.log" 2>&1 || { cat "$run.log"; exit 1; }
    seconds="$(( $(date +%s) - start )) s"
  fi
  for mode in whole sliced; do
    slice=()
    [ "$mode" = sliced ] && slice=(--slice 640 --overlap 0.2 --batch-size 4)
    out="$run/val_$mode.json"
    "$detforge" predict --mode eval --config "configs/yolo/$name.yaml" --weights "$run/last.ckpt" --ema \
      --ann "$gt" --images data/trees_coco/images/val --out "$out" "${slice[@]}" >/dev/null 2>&1
    "$detforge" eval --gt "$gt" --dt "$out" --out "$out.metrics" --no-per-class >/dev/null 2>&1
    read -r ap ap50 aps < <(python3 -c "import json,sys; s=json.load(open(sys.argv[1]))['stats']; \
print(f'{s[0]:.3f} {s[1]:.3f} {s[3]:.3f}')" "$out.metrics")
    echo "| ${name/trees_/} | $mode | $ap | $ap50 | $aps | $seconds |"
  done
done
