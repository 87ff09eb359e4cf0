"""SAHI's own tiles and merges for tests/ops/slicing_test.cpp. Usage: sahi_reference.py OUT.json

Writes {"tiles": [...], "merges": [...]}: get_slice_bboxes for image, tile and overlap sizes, and
NMSPostprocess / NMMPostprocess / GreedyNMMPostprocess (numpy backend, the one SAHI picks on a
CPU without numba) on random and hand-made predictions: ties, zero-area boxes, float32 boundary
cases, thresholds of 0, several categories, and 2,500 boxes (SAHI's sparse path).
"""
import json
import sys

import numpy as np
from sahi.postprocess.backends import set_postprocess_backend
from sahi.postprocess.combine import GreedyNMMPostprocess, NMMPostprocess, NMSPostprocess
from sahi.prediction import ObjectPrediction
from sahi.slicing import get_slice_bboxes

METHODS = {"nms": NMSPostprocess, "nmm": NMMPostprocess, "greedy_nmm": GreedyNMMPostprocess}


def tiles():
    out = []
    for h, w in [(1, 1), (50, 700), (100, 250), (300, 500), (512, 512), (513, 1000), (1080, 1920),
                 (4000, 3000)]:
        for th, tw in [(64, 64), (100, 100), (256, 256), (512, 640), (640, 512)]:
            for oh, ow in [(0.0, 0.0), (0.2, 0.2), (0.25, 0.1), (0.29, 0.29), (0.5, 0.9)]:
                got = get_slice_bboxes(h, w, th, tw, False, oh, ow)
                out.append({"image": [h, w], "tile": [th, tw], "overlap": [oh, ow], "tiles": got})
    return out


def merge(boxes, method, metric, threshold, agnostic):
    predictions = [
        ObjectPrediction(bbox=b[:4], category_id=int(b[5]), category_name=str(int(b[5])),
                         score=b[4], shift_amount=[0, 0], full_shape=None)
        for b in boxes
    ]
    pp = METHODS[method](match_threshold=threshold, match_metric=metric.upper(),
                         class_agnostic=agnostic)
    # SAHI's float64 recheck divides 0 by 0 for empty boxes (NaN: no match), as intended.
    with np.errstate(invalid="ignore", divide="ignore"):
        merged = pp(predictions) if predictions else []
    return [[float(v) for v in p.bbox.to_xyxy()] + [float(p.score.value), int(p.category.id)]
            for p in merged]


def random_boxes(rng, n, grid, categories, scores):
    centres = rng.uniform(20, 400, size=(max(1, n // 6), 2))
    out = []
    for _ in range(n):
        cx, cy = centres[rng.integers(len(centres))] + rng.normal(0, 6, 2)
        w, h = rng.uniform(0, 60, 2) if rng.random() > 0.05 else (0.0, rng.uniform(0, 9))
        box = [max(0.0, cx - w / 2), max(0.0, cy - h / 2), max(0.0, cx - w / 2) + w,
               max(0.0, cy - h / 2) + h]
        if grid:
            box = [round(v * grid) / grid for v in box]
        score = float(rng.choice(scores)) if scores is not None else float(rng.uniform(0.05, 1))
        out.append(box + [score, int(rng.choice(categories))])
    return out


def hand_made():
    """The cases that tell a faithful merge from a naive one."""
    a, b, c = [10, 0, 20, 10], [12, 0, 22, 10], [7, 0, 17, 10]
    return [
        [a + [0.9, 1], b + [0.8, 1], c + [0.7, 1]],            # a member dropped by the recheck
        [a + [0.9, 1], c + [0.7, 1], b + [0.8, 1]],            # nmm: index order matters
        [[0, 0, 10, 10, 0.9, 1], [4, 0, 14, 10, 0.8, 1], [9, 0, 19, 10, 0.7, 1]],  # transitive
        [[5, 5, 10, 10, 0.5, 1], [1, 9, 3, 12, 0.5, 1], [1, 2, 3, 4, 0.5, 1], [1, 2, 3, 3, 0.5, 1]],
        [[0, 0, 10, 10, 0.5, 1], [1, 0, 11, 10, 0.5, 1], [0, 0, 10, 10, 0.5, 1]],  # equal scores
        [[0, 0, 10, 10, 0.3, 5], [50, 50, 60, 60, 0.9, 2], [0, 0, 10, 10, 0.8, 2],
         [100, 0, 110, 10, 0.95, 5]],                                             # categories
        [[2898.19, 100, 3069.05, 200, 0.9, 1],                  # float32 says match, float64 not
         [2928.3417722652434, 100, 3099.2017722652436, 200, 0.8, 1]],
        [[2107.96, 100, 2391.38, 200, 0.9, 1],                  # float64 says match, float32 not
         [2157.975292964341, 100, 2441.395292964341, 200, 0.8, 1]],
        [[0, 0, 10, 10, 0.5, 1], [50, 50, 60, 60, 0.9, 1], [0, 0, 10, 10, 0.9, 1],
         [20, 20, 30, 30, 0.5, 1]],
        [[0, 0, 10, 10, 0.9, 1], [5, 5, 5, 8, 0.8, 1]],          # zero area
        [[0, 0, 10, 10, 0.9, 1], [0, 0, 10, 9, 0.9, 2]],         # category on a score tie
        [[0, 0, 10, 10, 0.90000002, 1], [0, 0, 10, 9, 0.90000001, 2]],  # a float32 score tie
    ]


def main():
    set_postprocess_backend("numpy")
    rng = np.random.default_rng(0)
    inputs = hand_made()
    for n in [0, 1, 2, 5, 30, 200]:
        for grid, scores in [(None, None), (4, [0.3, 0.5, 0.5, 0.9]), (1, [0.5])]:
            inputs.append(random_boxes(rng, n, grid, [0, 1, 2] if n % 2 else [3, 7], scores))
    merges = []
    for boxes in inputs:
        for method in METHODS:
            for metric in ["iou", "ios"]:
                for threshold in [0.0, 0.3, 0.5, 0.7]:
                    for agnostic in [False, True]:
                        merges.append({"boxes": boxes, "method": method, "metric": metric,
                                       "threshold": threshold, "agnostic": agnostic,
                                       "merged": merge(boxes, method, metric, threshold, agnostic)})
    # SAHI's sparse path: 2,000 boxes or more in one category.
    many = random_boxes(rng, 2500, None, [1], None)
    for method in METHODS:
        merges.append({"boxes": many, "method": method, "metric": "iou", "threshold": 0.5,
                       "agnostic": False, "merged": merge(many, method, "iou", 0.5, False)})
    with open(sys.argv[1], "w") as f:
        json.dump({"tiles": tiles(), "merges": merges}, f)


if __name__ == "__main__":
    main()
