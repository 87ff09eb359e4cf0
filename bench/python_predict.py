"""Per-image latency of predict called in a Python loop, one image per call: detforge's
Model.predict (its predictor process kept loaded) beside Ultralytics' YOLO(file).predict on the
same .pt and the same images, in one run (docs/BENCHMARKS.md).

  .venv/bin/python bench/python_predict.py --weights W.pt --config yolo11n --images DIR [--n 30]

Without --weights it builds an untrained YOLO11n with Ultralytics and saves it. Run from the
repository root after `.venv/bin/pip install .` (or with PYTHONPATH=python)."""

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path


def timed(predict, images):
    first = time.perf_counter()
    predict(images[0])
    first = time.perf_counter() - first
    times = []
    for image in images:
        t = time.perf_counter()
        predict(image)
        times.append(time.perf_counter() - t)
    return first, times


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--weights")
    p.add_argument("--config", default="yolo11n")
    p.add_argument("--images", required=True)
    p.add_argument("--n", type=int, default=30)
    p.add_argument("--imgsz", type=int, default=640)
    p.add_argument("--conf", type=float, default=0.25)
    a = p.parse_args()
    import detforge
    from ultralytics import YOLO
    images = sorted(str(f) for f in Path(a.images).iterdir()
                    if f.suffix.lower() in (".jpg", ".jpeg", ".png"))[:a.n]
    with tempfile.TemporaryDirectory() as tmp:
        weights = a.weights
        if weights is None:
            weights = str(Path(tmp) / f"{a.config}.pt")
            YOLO(f"{a.config}.yaml").save(weights)
        peer = YOLO(weights)
        model = detforge.Model(weights, config=a.config)
        rows = {
            "ultralytics YOLO(file).predict": timed(
                lambda f: peer.predict(f, imgsz=a.imgsz, conf=a.conf, verbose=False), images),
            "detforge Model.predict": timed(
                lambda f: model.predict(f, imgsz=a.imgsz, conf=a.conf), images),
        }
        model.close()
    print(f"{len(images)} images from {a.images}, imgsz {a.imgsz}, conf {a.conf}, {weights}")
    print("| predictor | first call (s) | median per image (ms) | mean (ms) |")
    print("| --- | ---: | ---: | ---: |")
    for name, (first, times) in rows.items():
        print(f"| {name} | {first:.2f} | {1000 * statistics.median(times):.1f} | "
              f"{1000 * statistics.mean(times):.1f} |")


if __name__ == "__main__":
    sys.exit(main())
