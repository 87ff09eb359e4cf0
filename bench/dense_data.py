"""One 640x640 image (random pixels) with 16, 1,000 and 5,000 boxes on a grid, three classes, as
COCO files dense_<n>.json under OUT_DIR (images in OUT_DIR/images): the dense scenes of
bench/dense_memory.sh.

Usage: dense_data.py OUT_DIR
"""
import json
import os
import sys

import cv2
import numpy as np


def main():
    out = sys.argv[1]
    os.makedirs(os.path.join(out, "images"), exist_ok=True)
    rng = np.random.default_rng(0)
    cv2.imwrite(os.path.join(out, "images", "d.jpg"),
                (rng.random((640, 640, 3)) * 255).astype(np.uint8))
    for n in (16, 1000, 5000):
        side = int(np.ceil(np.sqrt(n)))
        step = 640 / side
        w = max(step * 0.8, 2.0)
        anns = [{"id": k + 1, "image_id": 1, "category_id": 1 + k % 3,
                 "bbox": [(k % side) * step, (k // side) * step, w, w], "area": w * w,
                 "iscrowd": 0} for k in range(n)]
        with open(os.path.join(out, f"dense_{n}.json"), "w") as f:
            json.dump({"images": [{"id": 1, "file_name": "d.jpg", "width": 640, "height": 640}],
                       "annotations": anns,
                       "categories": [{"id": c, "name": f"c{c}"} for c in (1, 2, 3)]}, f)


if __name__ == "__main__":
    main()
