"""Reference COCO bbox evaluation with pycocotools, for the parity tests in eval_test.

Usage: coco_reference.py cases.json
cases.json is a list of {"gt": path, "dt": path, "out": path, "params": {...}?, "full": bool?}.
params may set useCats, maxDets, iouThrs, imgIds, catIds. For each case, "out" receives
{"stats": [12], "summary": the printed text, "per_category": {id: {"AP", "AP50", "AP75"}}, and with "full" the flattened
"precision" [T,R,K,A,M] and "recall" [T,K,A,M]}. An empty results list is evaluated as a
results set without annotations (pycocotools' loadRes itself fails on an empty list).
"""
import contextlib
import io
import json
import sys

import numpy as np
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval


def mean_valid(a):
    a = a[a > -1]
    return float(np.mean(a)) if a.size else -1.0


def run_case(case):
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(case["gt"])
        with open(case["dt"]) as f:
            results = json.load(f)
        if results:
            dt = gt.loadRes(results)
        else:
            dt = COCO()
            dt.dataset = {"images": list(gt.dataset["images"]),
                          "categories": list(gt.dataset["categories"]), "annotations": []}
            dt.createIndex()
        ev = COCOeval(gt, dt, "bbox")
        params = case.get("params", {})
        if "useCats" in params:
            ev.params.useCats = int(params["useCats"])
        if "maxDets" in params:
            ev.params.maxDets = list(params["maxDets"])
        if "iouThrs" in params:
            ev.params.iouThrs = np.array(params["iouThrs"], dtype=np.float64)
        if "imgIds" in params:
            ev.params.imgIds = list(params["imgIds"])
        if "catIds" in params:
            ev.params.catIds = list(params["catIds"])
        ev.evaluate()
        ev.accumulate()
    summary = io.StringIO()
    with contextlib.redirect_stdout(summary):
        ev.summarize()
    precision = ev.eval["precision"]
    out = {"stats": [float(s) for s in ev.stats], "summary": summary.getvalue(), "per_category": {}}
    if ev.params.useCats:
        thrs = ev.params.iouThrs
        for k, cat_id in enumerate(ev.params.catIds):
            p = precision[:, :, k, 0, -1]
            out["per_category"][str(cat_id)] = {
                "AP": mean_valid(p),
                "AP50": mean_valid(p[np.where(thrs == 0.5)[0]]),
                "AP75": mean_valid(p[np.where(thrs == 0.75)[0]]),
            }
    if case.get("full"):
        out["precision"] = precision.ravel().tolist()
        out["recall"] = ev.eval["recall"].ravel().tolist()
    with open(case["out"], "w") as f:
        json.dump(out, f)


def main():
    with open(sys.argv[1]) as f:
        cases = json.load(f)
    for case in cases:
        run_case(case)


if __name__ == "__main__":
    main()
