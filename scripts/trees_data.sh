#!/usr/bin/env bash
# The small-object recipe's data (docs/recipes.md, "Small objects"): the two annotated airborne
# photos of tree crowns (NEON, Yellowstone, about 10 cm per pixel) that DeepForest's wheel ships,
# fetched from PyPI and laid out as a VOC tree that data.format: voc reads:
#   data/trees/Annotations/*.xml, JPEGImages/*.png, ImageSets/Main/{train,val}.txt
#   2019_YELL_2_528000_4978000_image_crop2 (2299x2472, 574 trees) is cut into 2x2 parts of about
#   1150x1236 by `detforge convert --tile`: three parts train (412 trees), the bottom right one
#   (161 trees) is validated on with the other photo, 2019_YELL_2_541000_4977000_image_crop
#   (1249x1035, 279 trees, 13 km away).
# Usage: scripts/trees_data.sh [OUT (default data/trees)]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=versions.env
source "$root/scripts/versions.env"
out="${1:-data/trees}"
detforge="${DETFORGE:-$root/build/detforge}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
wheel="deepforest-$DEEPFOREST_VERSION-py3-none-any.whl"
"$root/.venv/bin/python" -m pip download --quiet --no-deps -d "$work" "deepforest==$DEEPFOREST_VERSION"
echo "$DEEPFOREST_WHEEL_SHA256  $work/$wheel" | sha256sum -c --quiet
train=2019_YELL_2_528000_4978000_image_crop2
val=2019_YELL_2_541000_4977000_image_crop
(cd "$work" && unzip -q "$wheel" "deepforest/data/$train.*" "deepforest/data/$val.*" \
  'deepforest-*.dist-info/licenses/LICENSE')
src="$work/whole"
mkdir -p "$src/Annotations" "$src/JPEGImages" "$src/ImageSets/Main"
for name in "$train" "$val"; do
  cp "$work/deepforest/data/$name.png" "$src/JPEGImages/"
  cp "$work/deepforest/data/$name.xml" "$src/Annotations/"
done
echo "$train" >"$src/ImageSets/Main/train.txt"
echo "$val" >"$src/ImageSets/Main/val.txt"
rm -rf "$out"
# The training photo in four parts (no overlap: each tree in one part, or cut in two and kept
# where half of it is), the validation photo whole.
"$detforge" convert --from voc --to voc --ann "$src/ImageSets/Main/train.txt" --split train \
  --out "$out" --image-files copy --tile 1236,1150 --overlap 0 --min-visible 0.5
"$detforge" convert --from voc --to voc --ann "$src/ImageSets/Main/val.txt" --split val \
  --out "$out" --image-files copy
# The bottom right part moves from the training list to the validation list.
held="${train}_1149_1236_2299_2472"
grep -v "^$held\$" "$out/ImageSets/Main/train.txt" >"$work/train.txt"
mv "$work/train.txt" "$out/ImageSets/Main/train.txt"
echo "$held" >>"$out/ImageSets/Main/val.txt"
cp "$work"/deepforest-*.dist-info/licenses/LICENSE "$out/LICENSE.deepforest"
echo "trees: $out (train: 3 parts of one photo, val: its fourth part and another photo; MIT, DeepForest $DEEPFOREST_VERSION)"
