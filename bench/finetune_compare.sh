#!/usr/bin/env bash
# Fine-tuning one Ultralytics-trained checkpoint in Ultralytics (its defaults) and in detforge
# (configs/yolo/finetune_<model>_bccd.yaml), two seeds each, measured by one evaluator (detforge
# predict + eval, which equal Ultralytics' predict and pycocotools: tests/tools/
# predict_parity_test.cpp, tests/eval). docs/models.md, "Fine-tuning as Ultralytics does", has the
# results.
#
#   bash bench/finetune_compare.sh [OUT_DIR] [PRETRAIN_EPOCHS] [FINETUNE_EPOCHS] [VERSION] [DATA]
#
# VERSION: 8 (default), 11 or 26, the YOLO generation (configs/yolo/finetune_yolo<v>n_bccd.yaml).
# DATA: bccd (default); bccd16x9, BCCD cut into 640x360 tiles (`detforge convert --tile 360,640`:
# two per photo, 582 training and 146 validation photos, each of which the 512 px letterbox pads
# to 512x320); or a COCO folder with annotations/instances_{train,val}.json and images/.
# BCCD (shared/datasets/bccd): Ultralytics trains the n model from scratch on the 291 training photos
# for PRETRAIN_EPOCHS (default 12) at 512 px: the checkpoint. Both frameworks then fine-tune it
# for FINETUNE_EPOCHS (default 6) with seeds 0 and 1, and the final EMA weights of each run are
# evaluated on the 73 validation photos (COCO AP, AP50). 38 min on the 2-core development VM
# (the pretraining 15 min). Run from the repository root after scripts/setup.sh.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$(realpath -m "${1:-runs/finetune_compare}")"
pre_epochs="${2:-12}"
ft_epochs="${3:-6}"
version="${4:-8}"
name="yolo${version}n"
[[ "$version" == 8 ]] && name=yolov8n
config="$root/configs/yolo/finetune_${name}_bccd.yaml"
df="$root/build/detforge"
py="$root/.venv/bin/python"
bccd="$root/../shared/datasets/bccd"
mkdir -p "$out"
case "${5:-bccd}" in
  bccd) ;;
  bccd16x9)
    tiles="$out/bccd16x9"
    if [[ ! -f "$tiles/annotations/instances_val.json" ]]; then
      for split in train val; do
        "$root/build/detforge" convert --from coco --to coco --split "$split" --out "$tiles" \
          --ann "$bccd/annotations/instances_$split.json" --images "$bccd/images" \
          --tile 360,640 --overlap 0 --min-visible 0.5
        mv "$tiles/images/$split/"* "$tiles/images/" && rmdir "$tiles/images/$split"
      done
    fi
    bccd="$tiles" ;;
  *) bccd="$(realpath "$5")" ;;
esac

if [[ ! -f "$out/yolo/train/data.yaml" ]]; then
  for split in train val; do
    "$df" convert --from coco --to yolo --ann "$bccd/annotations/instances_$split.json" \
      --images "$bccd/images" --split "$split" --out "$out/yolo/$split"
  done
fi
data="$out/bccd.yaml"
printf 'train: %s\nval: %s\nnames: {0: Platelets, 1: RBC, 2: WBC}\n' \
  "$out/yolo/train/images/train" "$out/yolo/val/images/val" > "$data"

[[ -f "$out/pretrain/last.pt" ]] || "$py" "$root/bench/finetune_ultralytics.py" pretrain "$data" \
  "$pre_epochs" "$out/pretrain" "$name.yaml"

evaluate() {  # weights, name: detforge predict + eval on BCCD val -> $out/<name>.metrics.json
  "$df" predict --mode eval --config "$config" "data.root=$bccd" \
    --weights "$1" ${3:+--ema} --images "$bccd/images" \
    --ann "$bccd/annotations/instances_val.json" --out "$out/$2.results.json"
  "$df" eval --gt "$bccd/annotations/instances_val.json" --dt "$out/$2.results.json" \
    --out "$out/$2.metrics.json" | head -2
}

for seed in 0 1; do
  start=$(date +%s)
  "$py" "$root/bench/finetune_ultralytics.py" finetune "$data" "$ft_epochs" "$out/pretrain/last.pt" \
    "$seed" "$out/ultralytics_$seed"
  echo "ultralytics seed $seed: $(( $(date +%s) - start )) s"
  start=$(date +%s)
  "$df" train --config "$config" "data.root=$bccd" \
    "model.weights=$out/pretrain/last.pt" "train.epochs=$ft_epochs" "seed=$seed" \
    "data.seed=$seed" "eval.interval=0" "output_dir=$out/detforge_$seed"
  echo "detforge seed $seed: $(( $(date +%s) - start )) s"
  evaluate "$out/ultralytics_$seed/last.pt" "ultralytics_$seed"
  evaluate "$out/detforge_$seed/last.ckpt" "detforge_$seed" ema
done
evaluate "$out/pretrain/last.pt" pretrain
for run in pretrain ultralytics_0 ultralytics_1 detforge_0 detforge_1; do
  "$py" -c "import json, sys; s = json.load(open(sys.argv[1])); print(sys.argv[2], 'AP %.3f AP50 %.3f' % tuple(s['stats'][:2]))" \
    "$out/$run.metrics.json" "$run"
done
