"""The peer of `detforge bench loader --pipeline yolo`: Ultralytics' own training dataloader.

The COCO file is converted to Ultralytics' layout (images linked, one labels/*.txt per image) in a
temporary folder; then `build_yolo_dataset` in train mode with mosaic 1.0, random_perspective
(translate 0.1, scale 0.5, no rotation, shear or perspective), HSV (0.015, 0.7, 0.4) and left-right
flip 0.5 at --size, no mixup, cutmix or copy-paste, and `build_dataloader` with the given worker
processes. Batches are uint8 tensors (Ultralytics scales them to [0, 1] on the device later). One
JSON line per worker count: {"workers": w, "images": n, "seconds": s, "images_per_s": r}.
"""
import argparse
import json
import os
import tempfile
import time

import torch
from ultralytics.cfg import get_cfg
from ultralytics.data.build import build_dataloader, build_yolo_dataset
from ultralytics.utils import DEFAULT_CFG


def to_yolo_layout(ann, images, out):
    with open(ann) as f:
        doc = json.load(f)
    cats = sorted(c["id"] for c in doc["categories"])
    label_of = {cid: i for i, cid in enumerate(cats)}
    names = {label_of[c["id"]]: c["name"] for c in doc["categories"]}
    os.makedirs(os.path.join(out, "images"))
    os.makedirs(os.path.join(out, "labels"))
    by_image = {}
    for a in doc["annotations"]:
        by_image.setdefault(a["image_id"], []).append(a)
    for im in doc["images"]:
        name = os.path.basename(im["file_name"])
        os.symlink(os.path.abspath(os.path.join(images, im["file_name"])), os.path.join(out, "images", name))
        w, h = im["width"], im["height"]
        lines = []
        for a in by_image.get(im["id"], []):
            x, y, bw, bh = a["bbox"]
            lines.append("%d %.6f %.6f %.6f %.6f" % (label_of[a["category_id"]], (x + bw / 2) / w, (y + bh / 2) / h,
                                                      bw / w, bh / h))
        with open(os.path.join(out, "labels", os.path.splitext(name)[0] + ".txt"), "w") as f:
            f.write("\n".join(lines))
    return names


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ann", required=True)
    p.add_argument("--images", required=True)
    p.add_argument("--workers", type=int, nargs="+", required=True)
    p.add_argument("--batch-size", type=int, default=2)
    p.add_argument("--size", type=int, default=640)
    p.add_argument("--limit", type=int, default=0, help="images per pass (0 = all)")
    args = p.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        names = to_yolo_layout(args.ann, args.images, tmp)
        cfg = get_cfg(DEFAULT_CFG, dict(imgsz=args.size, mosaic=1.0, mixup=0.0, cutmix=0.0, copy_paste=0.0,
                                        degrees=0.0, translate=0.1, scale=0.5, shear=0.0, perspective=0.0,
                                        hsv_h=0.015, hsv_s=0.7, hsv_v=0.4, fliplr=0.5, flipud=0.0, cache=False,
                                        rect=False, fraction=1.0, verbose=False))
        data = {"names": names, "nc": len(names), "channels": 3}
        dataset = build_yolo_dataset(cfg, os.path.join(tmp, "images"), args.batch_size, data, mode="train")
        total = len(dataset) if not args.limit else min(args.limit, len(dataset))
        for w in args.workers:
            loader = build_dataloader(dataset, args.batch_size, w, shuffle=True, pin_memory=False, device="cpu")
            start = time.perf_counter()
            n = 0
            for batch in loader:
                n += batch["img"].shape[0]
                if n >= total:
                    break
            s = time.perf_counter() - start
            print(json.dumps({"workers": w, "images": n, "seconds": s, "images_per_s": n / s}), flush=True)
            del loader


if __name__ == "__main__":
    main()
