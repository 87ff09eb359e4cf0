"""SAHI's slice_coco on a COCO file, for tests/tools/convert_test.cpp.

Usage: slice_coco_reference.py ANN IMAGE_DIR TILE_H TILE_W OVERLAP MIN_AREA_RATIO SKIP_EMPTY OUT

Writes {"<stem> x0 y0 x1 y1": [[category_id, x, y, w, h], ...]} for every tile SAHI keeps, its
boxes in SAHI's order: the tiles of sahi.slicing.slice_coco (slice_image's names, which end in
the tile's corners) with the boxes process_coco_annotations keeps for them.
"""
import json
import sys
from pathlib import Path

from sahi.slicing import slice_coco


def main():
    ann, image_dir, tile_h, tile_w, overlap, ratio, skip_empty, out = sys.argv[1:]
    coco, _ = slice_coco(coco_annotation_file_path=ann, image_dir=image_dir,
                         output_coco_annotation_file_name="", output_dir=None,
                         ignore_negative_samples=skip_empty == "1", slice_height=int(tile_h),
                         slice_width=int(tile_w), overlap_height_ratio=float(overlap),
                         overlap_width_ratio=float(overlap), min_area_ratio=float(ratio))
    boxes = {image["id"]: [] for image in coco["images"]}
    for a in coco["annotations"]:
        boxes[a["image_id"]].append([a["category_id"], *a["bbox"]])
    tiles = {}
    for image in coco["images"]:
        # slice_coco names a tile <stem>_<image index>_<x0>_<y0>_<x1>_<y1><suffix>.
        stem, _, *corners = Path(image["file_name"]).stem.rsplit("_", 5)
        tiles[" ".join([stem, *corners])] = boxes[image["id"]]
    with open(out, "w") as f:
        json.dump(tiles, f)


if __name__ == "__main__":
    main()
