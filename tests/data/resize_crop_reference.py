"""rfdetr's own training augmentation of RF-DETR-N, sampled, for tests/data/resize_crop_test.cpp.
Usage: resize_crop_reference.py OUT.json

Builds the train transforms rfdetr 1.11's trainer gives RFDETRNano by default
(make_coco_transforms_square_div_64 at resolution 384 with the TrainConfig defaults: multi-scale
per batch over the expanded scales, so each sample is made at the largest; the torchvision
backend) and runs them on a 640x480 image whose pixels encode their own coordinates (red
255 x / 639, green 255 y / 479). For each of N runs it records the output's size and, from its
first and last pixels of the top row and left column (after undoing the normalisation), where
the output's edges came from in the input. Writes {"scales": the per-batch sizes, "runs": [[h, w,
x_first, x_last, y_first, y_last], ...]} (x, y in 0..255).
"""
import json
import os
import sys
import tempfile

os.environ.setdefault("YOLO_CONFIG_DIR", tempfile.mkdtemp())
import numpy as np
import torch
from PIL import Image
from rfdetr import RFDETRNano
from rfdetr.config import MultiScale, TrainConfig
from rfdetr.datasets.coco import compute_multi_scale_scales, make_coco_transforms_square_div_64

RUNS = 1000


def main(out):
    model = RFDETRNano(pretrain_weights=None, device="cpu", num_classes=3).model_config
    train = TrainConfig(dataset_dir=tempfile.mkdtemp())
    scales = compute_multi_scale_scales(model.resolution, train.expanded_scales, model.patch_size,
                                        model.num_windows)
    transforms = make_coco_transforms_square_div_64(
        "train", model.resolution, multi_scale=train.multi_scale is not MultiScale.OFF,
        expanded_scales=train.expanded_scales,
        skip_random_resize=train.multi_scale is not MultiScale.PER_SAMPLE,
        patch_size=model.patch_size, num_windows=model.num_windows, aug_config=train.aug_config,
        scale_jitter=train.scale_jitter)
    xs = np.round(np.arange(640) * 255 / 639)
    ys = np.round(np.arange(480) * 255 / 479)
    pixels = np.zeros((480, 640, 3), np.uint8)
    pixels[..., 0] = xs[None, :]
    pixels[..., 1] = ys[:, None]
    pixels[..., 2] = 128
    image = Image.fromarray(pixels)
    mean = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)
    torch.manual_seed(0)
    runs = []
    for _ in range(RUNS):
        target = {"image_id": torch.tensor(1), "boxes": torch.tensor([[100.0, 100.0, 300.0, 200.0]]),
                  "labels": torch.tensor([0]), "area": torch.tensor([20000.0]),
                  "iscrowd": torch.tensor([0]), "orig_size": torch.tensor([480, 640]),
                  "size": torch.tensor([480, 640])}
        result, _ = transforms(image, target)
        v = (result * std + mean) * 255
        h, w = v.shape[1:]
        runs.append([h, w, float(v[0, 0, 0]), float(v[0, 0, -1]), float(v[1, 0, 0]),
                     float(v[1, -1, 0])])
    with open(out, "w") as f:
        json.dump({"scales": scales, "runs": runs}, f)


if __name__ == "__main__":
    main(sys.argv[1])
