"""The peer of `detforge bench index`: loading a COCO instances file (pycocotools, faster-coco-eval,
hotcoco), the json read and the index COCO() builds (imports excluded, the peer's printing
discarded).

argv: PEER ANN OUT [REPEAT]. OUT gets {"load_s": the fastest of REPEAT loads, "memory_mb": resident
memory the loaded object added, "images", "annotations"}.
"""
import contextlib, gc, io, json, sys, time


def rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


peer, ann_path, out_path = sys.argv[1:4]
repeat = int(sys.argv[4]) if len(sys.argv) > 4 else 1
with contextlib.redirect_stdout(io.StringIO()):
    if peer == "pycocotools":
        from pycocotools.coco import COCO
    elif peer == "faster-coco-eval":
        from faster_coco_eval import COCO
    elif peer == "hotcoco":
        from hotcoco import COCO
    else:
        raise SystemExit("unknown peer " + peer)
    best, memory, images, annotations = None, 0.0, 0, 0
    for _ in range(repeat):
        gc.collect()
        before = rss_mb()
        t0 = time.perf_counter()
        coco = COCO(ann_path)
        seconds = time.perf_counter() - t0
        if best is None or seconds < best:
            best, memory = seconds, rss_mb() - before
        images, annotations = len(coco.getImgIds()), len(coco.getAnnIds())
        del coco
with open(out_path, "w") as f:
    json.dump({"load_s": best, "memory_mb": memory, "images": images, "annotations": annotations}, f)
