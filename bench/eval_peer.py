"""The peer of `detforge bench eval`: COCO bbox evaluation (pycocotools, faster-coco-eval, hotcoco).

Runs one peer in its own Python process; load = COCO(gt) + loadRes, evaluate = evaluate +
accumulate + summarize (imports excluded, the peer's printing discarded).

argv: PEER GT RESULTS OUT. PEER is pycocotools, faster-coco-eval or hotcoco; GT and RESULTS are
COCO json files; OUT gets {"load_s", "eval_s", "stats": the 12 summarize() numbers}.
"""
import contextlib, io, json, sys, time
peer, gt_path, dt_path, out_path = sys.argv[1:5]
with contextlib.redirect_stdout(io.StringIO()):
    if peer == "pycocotools":
        from pycocotools.coco import COCO
        from pycocotools.cocoeval import COCOeval as Eval
        load_res = lambda gt, p: gt.loadRes(p)
    elif peer == "faster-coco-eval":
        from faster_coco_eval import COCO
        from faster_coco_eval import COCOeval_faster as Eval
        load_res = lambda gt, p: gt.loadRes(p)
    elif peer == "hotcoco":
        from hotcoco import COCO
        from hotcoco import COCOeval as Eval
        load_res = lambda gt, p: gt.load_res(p)
    else:
        raise SystemExit("unknown peer " + peer)
    t0 = time.perf_counter()
    gt = COCO(gt_path)
    dt = load_res(gt, dt_path)
    t1 = time.perf_counter()
    ev = Eval(gt, dt, "bbox")
    ev.evaluate()
    ev.accumulate()
    ev.summarize()
    t2 = time.perf_counter()
with open(out_path, "w") as f:
    json.dump({"load_s": t1 - t0, "eval_s": t2 - t1, "stats": [float(s) for s in ev.stats]}, f)
