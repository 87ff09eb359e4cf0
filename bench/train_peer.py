"""The peer of `detforge bench train`: the reference's own training loop on the same files.

argv: CONFIG STEPS WARMUP DEVICE OUT. CONFIG is the resolved detforge config the loop ran (written
by `bench train`); its model.type picks the reference, and its data, batch, workers, image size,
precision, optimizer and gradient clipping are the reference's too:
- retinanet: torchvision's RetinaNet (model.backbone.type, frozen BN, 3 trainable stages, P6/P7)
  in the loop of torchvision's detection reference: the COCO images decoded by PIL, with
  horizontal flips in DataLoader workers, the model's own resize and normalisation, autocast
  with a GradScaler for fp16, the loss read on the host every step;
- yolo: Ultralytics' own trainer (DetectionTrainer through YOLO.train) on the set converted to
  YOLO labels, with its defaults (mosaic, accumulation to a nominal batch of 64, EMA), its AMP
  check skipped (it downloads a model);
- rtdetr: transformers' RTDetrV2ForObjectDetection (r18vd as bench/rtdetr_peer.py) with its own
  loss, RTDetrImageProcessor in DataLoader workers, autocast, AdamW.
Each reference builds its family's standard model only; a config that changes it (synth_r18's
GroupNorm and 64-channel FPN, synth_r18vd's 128-wide transformer) is refused, naming the key.
Timed as detforge times itself: WARMUP steps (batches), then STEPS, synchronised at both ends.
OUT gets {"peer", "images_per_s", "images", "seconds", "peak_mib"}.
"""
import json
import math
import os
import sys
import tempfile
import time

import torch
import yaml


def get(config, path, default=None):
    node = config
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            return default
        node = node[key]
    return default if node is None else node


# The keys a reference's model cannot follow, with the only value it builds (None: left out).
STANDARD = {
    "retinanet": {"model.backbone.norm": (None, "frozen_bn"), "model.fpn.channels": (None, 256),
                  "model.head.norm_groups": (None, 0), "model.fpn.p6_from": (None, "p5")},
    "rtdetr": {"model.backbone.type": ("r18vd",), "model.encoder.hidden_dim": (None, 256),
               "model.encoder.expansion": (0.5,), "model.decoder.d_model": (None, 256),
               "model.decoder.layers": (3,), "model.decoder.num_queries": (None, 300),
               "model.denoising.num_queries": (None, 100)},
}


def check_standard(config, kind):
    for key, allowed in STANDARD.get(kind, {}).items():
        value = get(config, key)
        if value not in allowed:
            raise SystemExit(f"{key}: {value} has no equal in the reference, which builds "
                             f"{' or '.join(str(a) for a in allowed if a is not None)} only")


class Timer:
    """Wall clock from the end of batch WARMUP to the end of batch WARMUP + STEPS."""

    def __init__(self, device, warmup, steps):
        self.device, self.warmup, self.steps = device, warmup, steps
        self.batches, self.images, self.t0, self.seconds = 0, 0, None, None

    def sync(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def batch_done(self, images):
        """Returns True after the last timed batch."""
        self.batches += 1
        if self.batches == self.warmup:
            self.sync()
            self.t0 = time.perf_counter()
        elif self.batches > self.warmup:
            self.images += images
        if self.batches == self.warmup + self.steps:
            self.sync()
            self.seconds = time.perf_counter() - self.t0
            return True
        return False


class CocoFiles(torch.utils.data.Dataset):
    """The training set's images (decoded by PIL, as torchvision's CocoDetection does) and their
    boxes, labels numbered 0.. by category id; read with json, since the GPU host has no
    pycocotools."""

    def __init__(self, config):
        root = get(config, "data.root", ".")
        self.images_dir = os.path.join(root, get(config, "data.train.images"))
        with open(os.path.join(root, get(config, "data.train.ann"))) as f:
            coco = json.load(f)
        ids = sorted(c["id"] for c in coco["categories"])
        self.num_labels = len(ids)
        label = {c: i for i, c in enumerate(ids)}
        self.images = coco["images"]
        self.anns = {im["id"]: [] for im in self.images}
        for a in coco["annotations"]:
            if not a.get("iscrowd", 0):
                self.anns[a["image_id"]].append(dict(a, category_id=label[a["category_id"]]))

    def __len__(self):
        return len(self.images)

    def path(self, index):
        return os.path.join(self.images_dir, self.images[index]["file_name"])

    def load(self, index):
        from PIL import Image

        info = self.images[index]
        return Image.open(self.path(index)).convert("RGB"), info, self.anns[info["id"]]


def image_size(config):
    fixed = get(config, "data.fixed_size")
    if fixed:
        return int(fixed[1]), int(fixed[0])
    side = int(get(config, "data.max_size", 1333))
    return side, side


def autocast(config, device):
    precision = get(config, "train.precision", "fp32")
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    enabled = dtype is not None and device.type == "cuda"
    return torch.autocast(device.type, dtype=dtype or torch.float32, enabled=enabled), \
        torch.amp.GradScaler(device.type, enabled=enabled and precision == "fp16")


def optimizer(config, params):
    kind, lr = get(config, "optimizer.type", "sgd"), float(get(config, "optimizer.lr", 0.01))
    wd = float(get(config, "optimizer.weight_decay", 0.0))
    if kind == "adam":
        return torch.optim.Adam(params, lr=lr, weight_decay=wd)
    if kind == "adamw":
        return torch.optim.AdamW(params, lr=lr, weight_decay=wd)
    return torch.optim.SGD(params, lr=lr, momentum=float(get(config, "optimizer.momentum", 0.9)),
                           weight_decay=wd)


def plain_loop(config, device, timer, model, loader, forward):
    """The references' loop: forward under autocast, scaled backward, clipping, step; the loss
    read on the host every step, as torchvision's train_one_epoch checks it is finite."""
    cast, scaler = autocast(config, device)
    opt = optimizer(config, [p for p in model.parameters() if p.requires_grad])
    clip = float(get(config, "train.clip_grad_norm", 0.0))
    model.train()
    while True:
        for batch in loader:
            with cast:
                loss, images = forward(batch)
            if not math.isfinite(loss.item()):
                raise SystemExit(f"non-finite loss {loss.item()}")
            opt.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            if clip > 0:
                scaler.unscale_(opt)
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            scaler.step(opt)
            scaler.update()
            if timer.batch_done(images):
                return


def coco_loader(config, dataset, collate):
    workers = int(get(config, "data.workers", 2))
    return torch.utils.data.DataLoader(
        dataset, batch_size=int(get(config, "data.batch_size", 2)), shuffle=True, drop_last=True,
        num_workers=workers, collate_fn=collate, pin_memory=torch.cuda.is_available(),
        persistent_workers=workers > 0)


def retinanet(config, device, timer):
    import torchvision
    from torchvision.models.detection.backbone_utils import _resnet_fpn_extractor
    from torchvision.models.detection.retinanet import RetinaNet
    from torchvision.ops import misc
    from torchvision.ops.feature_pyramid_network import LastLevelP6P7
    from torchvision.transforms.v2 import functional as F

    flip = float(get(config, "data.flip_prob", 0.5))

    class Coco(CocoFiles):
        def __getitem__(self, index):
            img, _, anns = self.load(index)
            img = F.to_dtype(F.pil_to_tensor(img), torch.float32, scale=True)
            boxes = torch.tensor([a["bbox"] for a in anns], dtype=torch.float32).view(-1, 4)
            boxes[:, 2:] += boxes[:, :2]
            labels = torch.tensor([a["category_id"] for a in anns], dtype=torch.int64)
            if torch.rand(()) < flip:
                img = img.flip(-1)
                boxes[:, [0, 2]] = img.shape[-1] - boxes[:, [2, 0]]
            return img, {"boxes": boxes, "labels": labels}

    body = getattr(torchvision.models, get(config, "model.backbone.type", "resnet50"))(
        weights=None, norm_layer=misc.FrozenBatchNorm2d)
    backbone = _resnet_fpn_extractor(body, int(get(config, "model.backbone.trainable_layers", 3)),
                                     returned_layers=[2, 3, 4],
                                     extra_blocks=LastLevelP6P7(256, 256))
    h, w = image_size(config)
    kwargs = {"fixed_size": (h, w)} if get(config, "data.fixed_size") else {}
    model = RetinaNet(backbone, int(get(config, "model.num_classes")), min_size=min(h, w),
                      max_size=max(h, w), **kwargs).to(device)

    def forward(batch):
        imgs = [i.to(device, non_blocking=True) for i in batch[0]]
        targets = [{k: v.to(device, non_blocking=True) for k, v in t.items()} for t in batch[1]]
        return sum(model(imgs, targets).values()), len(imgs)

    loader = coco_loader(config, Coco(config), lambda b: tuple(zip(*b)))
    plain_loop(config, device, timer, model, loader, forward)
    return "torchvision RetinaNet"


def rtdetr(config, device, timer):
    from transformers import RTDetrResNetConfig, RTDetrV2Config, RTDetrV2ForObjectDetection
    from transformers.models.rt_detr.image_processing_rt_detr import RTDetrImageProcessor

    h, w = image_size(config)
    processor = RTDetrImageProcessor(size={"height": h, "width": w})

    class Coco(CocoFiles):
        def __getitem__(self, index):
            img, info, anns = self.load(index)
            out = processor(images=img, annotations={"image_id": info["id"], "annotations": anns},
                            return_tensors="pt")
            return out["pixel_values"][0], out["labels"][0]

    backbone = RTDetrResNetConfig(layer_type="basic", depths=[2, 2, 2, 2],
                                  hidden_sizes=[64, 128, 256, 512],
                                  out_features=["stage2", "stage3", "stage4"])
    model = RTDetrV2ForObjectDetection(RTDetrV2Config(
        backbone_config=backbone, encoder_in_channels=[128, 256, 512], hidden_expansion=0.5,
        decoder_layers=3, num_labels=int(get(config, "model.num_classes")))).to(device)

    def forward(batch):
        pixels = torch.stack(batch[0]).to(device, non_blocking=True)
        labels = [{k: v.to(device, non_blocking=True) for k, v in t.items()} for t in batch[1]]
        return model(pixel_values=pixels, labels=labels).loss, pixels.size(0)

    loader = coco_loader(config, Coco(config), lambda b: tuple(zip(*b)))
    plain_loop(config, device, timer, model, loader, forward)
    return "transformers RT-DETRv2"


class Done(Exception):
    """Raised from Ultralytics' batch callback after the last timed batch."""


def yolo(config, device, timer, work):
    import ultralytics.engine.trainer as trainer_module
    from ultralytics import YOLO

    coco = CocoFiles(config)
    os.makedirs(os.path.join(work, "images"))
    os.makedirs(os.path.join(work, "labels"))
    paths = []
    for index, info in enumerate(coco.images):
        name = os.path.basename(info["file_name"])
        paths.append(os.path.join(work, "images", name))
        os.symlink(os.path.abspath(coco.path(index)), paths[-1])
        with open(os.path.join(work, "labels", os.path.splitext(name)[0] + ".txt"), "w") as f:
            for a in coco.anns[info["id"]]:
                x, y, bw, bh = a["bbox"]
                f.write(f"{a['category_id']} {(x + bw / 2) / info['width']:.6f} "
                        f"{(y + bh / 2) / info['height']:.6f} {bw / info['width']:.6f} "
                        f"{bh / info['height']:.6f}\n")
    with open(os.path.join(work, "train.txt"), "w") as f:
        f.write("\n".join(paths) + "\n")
    with open(os.path.join(work, "data.yaml"), "w") as f:
        yaml.safe_dump({"path": work, "train": "train.txt", "val": "train.txt",
                        "names": {i: f"class{i}" for i in range(coco.num_labels)}}, f)

    trainer_module.check_amp = lambda model: True  # its AMP check downloads a model: offline here
    model = YOLO(f"yolov8{get(config, 'model.scale', 'n')}.yaml")

    def on_batch_end(trainer):
        if timer.batch_done(int(trainer.batch_size)):
            raise Done

    model.add_callback("on_train_batch_end", on_batch_end)
    kind = get(config, "optimizer.type", "sgd")
    try:
        model.train(data=os.path.join(work, "data.yaml"), epochs=1000, imgsz=image_size(config)[1],
                    batch=int(get(config, "data.batch_size", 16)),
                    workers=int(get(config, "data.workers", 8)),
                    device=str(device.index or 0) if device.type == "cuda" else "cpu",
                    amp=get(config, "train.precision", "fp32") != "fp32",
                    optimizer={"adamw": "AdamW", "adam": "Adam"}.get(kind, "SGD"),
                    lr0=float(get(config, "optimizer.lr", 0.01)),
                    weight_decay=float(get(config, "optimizer.weight_decay", 0.0005)), val=False, plots=False,
                    save=False, project=work, name="run", exist_ok=True, verbose=False)
    except Done:
        pass
    return "Ultralytics trainer"


def main():
    config_path, steps, warmup, device, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
        torch.device(sys.argv[4]), sys.argv[5]
    with open(config_path) as f:
        config = yaml.safe_load(f)
    kind = get(config, "model.type")
    check_standard(config, kind)
    timer = Timer(device, warmup, steps)
    if device.type == "cuda":
        torch.cuda.set_device(device)
        torch.cuda.reset_peak_memory_stats(device)
    with tempfile.TemporaryDirectory() as work:
        if kind == "retinanet":
            peer = retinanet(config, device, timer)
        elif kind == "rtdetr":
            peer = rtdetr(config, device, timer)
        elif kind == "yolo":
            os.environ.setdefault("YOLO_CONFIG_DIR", work)
            peer = yolo(config, device, timer, work)
        else:
            raise SystemExit(f"no reference training loop for model.type {kind}")
    if timer.seconds is None:
        raise SystemExit(f"{peer}: stopped after {timer.batches} batches")
    peak = torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else 0.0
    with open(out, "w") as f:
        json.dump({"peer": peer, "images_per_s": timer.images / timer.seconds,
                   "images": timer.images, "seconds": timer.seconds, "peak_mib": peak}, f)


if __name__ == "__main__":
    main()
