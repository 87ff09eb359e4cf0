"""The peer of `detforge bench loader`: torchvision-style loading with torch's DataLoader and PIL.

Per image: PIL decode (RGB), resize with GeneralizedRCNNTransform's keep-ratio rule (or a fixed
size) using PIL bilinear, horizontal flip with probability --flip (boxes flipped too), to a float
tensor, ImageNet normalisation; batches padded to a multiple of 32 as batch_images does. One JSON
line per worker count: {"workers": w, "images": n, "seconds": s, "images_per_s": r}.
"""
import argparse
import json
import math
import os
import random
import time

import torch
import torchvision.transforms.functional as F
from PIL import Image
from torch.utils.data import DataLoader, Dataset

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]


def resized(h, w, min_size, max_size, fixed):
    if fixed:
        return fixed[1], fixed[0]
    scale = min(min_size / min(h, w), max_size / max(h, w))
    return int(h * scale), int(w * scale)


class Coco(Dataset):
    def __init__(self, ann, images, args):
        with open(ann) as f:
            doc = json.load(f)
        self.root = images
        self.images = doc["images"]
        boxes = {}
        for a in doc["annotations"]:
            x, y, w, h = a["bbox"]
            boxes.setdefault(a["image_id"], []).append([x, y, x + w, y + h])
        self.boxes = boxes
        self.args = args

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        rec = self.images[i]
        img = Image.open(os.path.join(self.root, rec["file_name"])).convert("RGB")
        w, h = img.size
        nh, nw = resized(h, w, self.args.min_size, self.args.max_size, self.args.fixed_size)
        img = img.resize((nw, nh), Image.BILINEAR)
        boxes = torch.tensor(self.boxes.get(rec["id"], []), dtype=torch.float32).reshape(-1, 4)
        boxes[:, 0::2] *= nw / w
        boxes[:, 1::2] *= nh / h
        if random.random() < self.args.flip:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
            boxes[:, [0, 2]] = nw - boxes[:, [2, 0]]
        t = F.normalize(F.to_tensor(img), MEAN, STD)
        return t, {"boxes": boxes, "image_id": rec["id"]}


def collate(batch):
    h = int(math.ceil(max(t.shape[1] for t, _ in batch) / 32) * 32)
    w = int(math.ceil(max(t.shape[2] for t, _ in batch) / 32) * 32)
    out = torch.zeros(len(batch), 3, h, w)
    for i, (t, _) in enumerate(batch):
        out[i, :, : t.shape[1], : t.shape[2]].copy_(t)
    return out, [tgt for _, tgt in batch]


def worker_init(_):
    torch.set_num_threads(1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ann", required=True)
    p.add_argument("--images", required=True)
    p.add_argument("--workers", type=int, nargs="+", required=True)
    p.add_argument("--batch-size", type=int, default=2)
    p.add_argument("--min-size", type=int, default=800)
    p.add_argument("--max-size", type=int, default=1333)
    p.add_argument("--fixed-size", type=int, nargs=2, default=None)
    p.add_argument("--flip", type=float, default=0.5)
    p.add_argument("--limit", type=int, default=0, help="images per pass (0 = all)")
    args = p.parse_args()
    torch.set_num_threads(1)
    ds = Coco(args.ann, args.images, args)
    if args.limit:
        ds.images = ds.images[: args.limit]
    for w in args.workers:
        loader = DataLoader(ds, batch_size=args.batch_size, shuffle=False, num_workers=w, collate_fn=collate,
                            worker_init_fn=worker_init, prefetch_factor=2 if w > 0 else None)
        start = time.perf_counter()
        n = 0
        for images, _ in loader:
            n += images.shape[0]
        s = time.perf_counter() - start
        print(json.dumps({"workers": w, "images": n, "seconds": s, "images_per_s": n / s}), flush=True)


if __name__ == "__main__":
    main()
