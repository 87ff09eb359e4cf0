"""Reference outputs of torchvision's RetinaNet for detforge's parity tests.

Usage: reference.py OUT_DIR
Writes, per case, weights_<case>.pth (the model's state_dict, as torchvision saves it) and
io_<case>.pth (inputs and every intermediate result), plus keys.json (golden key lists).
The transform (resize/normalise) is bypassed: inputs are already normalised and padded, so
both sides see identical tensors.
"""
import json
import sys
from functools import partial

import torch
import torchvision
from torchvision.models.detection.backbone_utils import _resnet_fpn_extractor
from torchvision.models.detection.image_list import ImageList
from torchvision.models.detection.retinanet import RetinaNet, RetinaNetHead
from torchvision.ops import boxes as box_ops
from torchvision.ops import misc
from torchvision.ops.feature_pyramid_network import LastLevelP6P7


def build(arch, num_classes, v2, trainable=3):
    body = torchvision.models.__dict__[arch](weights=None, norm_layer=misc.FrozenBatchNorm2d)
    c5 = 512 if arch in ("resnet18", "resnet34") else 2048
    extra = LastLevelP6P7(c5, 256) if v2 else LastLevelP6P7(256, 256)
    backbone = _resnet_fpn_extractor(body, trainable, returned_layers=[2, 3, 4], extra_blocks=extra)
    head = None
    if v2:
        head = RetinaNetHead(256, 9, num_classes, norm_layer=partial(torch.nn.GroupNorm, 32))
        head.regression_head._loss_type = "giou"
    return RetinaNet(backbone, num_classes, head=head)


def calibrate(model, images):
    """Sets every frozen BN's statistics from the data so activations stay O(1), and gives the
    heads biases that make some scores exceed the 0.05 threshold (random init has 0.01)."""
    hooks = []

    def pre_hook(m, inp):
        x = inp[0]
        m.running_mean.copy_(x.mean((0, 2, 3)))
        m.running_var.copy_(x.var((0, 2, 3)) + 0.1)
        m.weight.uniform_(0.5, 1.5)
        m.bias.uniform_(-0.2, 0.2)

    for m in model.modules():
        if isinstance(m, misc.FrozenBatchNorm2d):
            hooks.append(m.register_forward_pre_hook(pre_hook))
    with torch.no_grad():
        model.backbone.body(images)
    for h in hooks:
        h.remove()
    with torch.no_grad():
        model.head.classification_head.cls_logits.bias.uniform_(-4.0, 0.0)
        model.head.classification_head.cls_logits.weight.normal_(0, 0.02)
        model.head.regression_head.bbox_reg.weight.normal_(0, 0.02)
        for m in model.head.modules():
            if isinstance(m, torch.nn.GroupNorm):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)


def random_boxes(g, n, h, w, min_side=4.0, max_side=None):
    max_side = max_side or min(h, w) * 0.8
    side_w = torch.rand(n, generator=g) * (max_side - min_side) + min_side
    side_h = torch.rand(n, generator=g) * (max_side - min_side) + min_side
    x1 = torch.rand(n, generator=g) * (w - side_w)
    y1 = torch.rand(n, generator=g) * (h - side_h)
    return torch.stack([x1, y1, x1 + side_w, y1 + side_h], 1)


def padded_images(sizes):
    b = len(sizes)
    ph = max(s[0] for s in sizes)
    pw = max(s[1] for s in sizes)
    ph, pw = (ph + 31) // 32 * 32, (pw + 31) // 32 * 32
    images = torch.zeros(b, 3, ph, pw)
    for i, (h, w) in enumerate(sizes):
        images[i, :, :h, :w] = torch.randn(3, h, w)
    return images


def make_model(out, name, arch, num_classes, v2, sizes, seed):
    """A calibrated model saved as weights_<name>.pth."""
    torch.manual_seed(seed)
    model = build(arch, num_classes, v2)
    calibrate(model, padded_images(sizes))
    model.eval()
    torch.save(model.state_dict(), f"{out}/weights_{name}.pth")
    return model


def run_case(out, name, model, sizes, original_sizes, boxes, labels, seed):
    torch.manual_seed(seed)
    b = len(sizes)
    images = padded_images(sizes)

    io = {"images": images, "image_sizes": torch.tensor(sizes), "original_sizes": torch.tensor(original_sizes)}
    targets = []
    for i in range(b):
        io[f"boxes_{i}"] = boxes[i]
        io[f"labels_{i}"] = labels[i]
        targets.append({"boxes": boxes[i], "labels": labels[i]})
    with torch.no_grad():
        feats = list(model.backbone(images).values())
        head = model.head(feats)
        anchors = model.anchor_generator(ImageList(images, sizes), feats)
        for l, f in enumerate(feats):
            io[f"fpn_{l}"] = f
        io["cls_logits"] = head["cls_logits"]
        io["bbox_regression"] = head["bbox_regression"]
        io["anchors"] = anchors[0]
        for i in range(b):
            if boxes[i].numel() == 0:
                m = torch.full((anchors[i].size(0),), -1, dtype=torch.int64)
            else:
                m = model.proposal_matcher(box_ops.box_iou(boxes[i], anchors[i]))
            io[f"matched_{i}"] = m
        losses = model.compute_loss(targets, head, anchors)
        io["loss_classification"] = losses["classification"].reshape(())
        io["loss_bbox_regression"] = losses["bbox_regression"].reshape(())
        per_level = [f.size(2) * f.size(3) * 9 for f in feats]
        split = {k: list(v.split(per_level, dim=1)) for k, v in head.items()}
        split_anchors = [list(a.split(per_level)) for a in anchors]
        dets = model.postprocess_detections(split, split_anchors, sizes)
        dets = model.transform.postprocess(dets, sizes, original_sizes)
        for i, d in enumerate(dets):
            io[f"det_boxes_{i}"] = d["boxes"]
            io[f"det_scores_{i}"] = d["scores"]
            io[f"det_labels_{i}"] = d["labels"]
    torch.save(io, f"{out}/io_{name}.pth")


def main():
    out = sys.argv[1]
    g = torch.Generator().manual_seed(0)
    keys = {}
    # Batch of two sizes: image 0 has ordinary, tiny (2 px) and edge boxes, image 1 none.
    b0 = torch.cat([random_boxes(g, 5, 160, 192), torch.tensor([[50.0, 60.0, 52.0, 62.0], [0.0, 0.0, 30.0, 190.0 - 60.0]])])
    l0 = torch.tensor([0, 1, 2, 3, 4, 2, 0])
    sizes, orig = [(160, 192), (128, 224)], [(320, 384), (200, 350)]
    model = make_model(out, "r18", "resnet18", 5, False, sizes, 1)
    run_case(out, "r18_mixed", model, sizes, orig, [b0, torch.zeros(0, 4)],
             [l0, torch.zeros(0, dtype=torch.int64)], 1)
    keys["r18_state_dict"] = list(model.state_dict().keys())
    keys["r18_parameters"] = [n for n, _ in model.named_parameters()]
    keys["r18_trainable"] = [n for n, p in model.named_parameters() if p.requires_grad]
    # Many boxes (80) in one image, small ones included.
    bm = torch.cat([random_boxes(g, 60, 192, 192), random_boxes(g, 20, 192, 192, 2.0, 8.0)])
    lm = torch.randint(0, 5, (80,), generator=g)
    run_case(out, "r18_many", model, [(192, 192)], [(192, 192)], [bm], [lm], 2)
    # Every image empty.
    e = [torch.zeros(0, 4), torch.zeros(0, 4)]
    el = [torch.zeros(0, dtype=torch.int64)] * 2
    run_case(out, "r18_empty", model, [(128, 128), (96, 128)], [(128, 128), (96, 128)], e, el, 3)
    # v2: GroupNorm head, P6 from C5, GIoU loss; C = 1.
    b1 = random_boxes(g, 4, 128, 160)
    model = make_model(out, "r18_v2", "resnet18", 1, True, [(128, 160)], 4)
    run_case(out, "r18_v2", model, [(128, 160)], [(256, 320)], [b1], [torch.zeros(4, dtype=torch.int64)], 4)
    keys["r18_v2_state_dict"] = list(model.state_dict().keys())
    # ResNet-50 (the default model).
    b2 = random_boxes(g, 6, 128, 160)
    model = make_model(out, "r50", "resnet50", 91, False, [(128, 160)], 5)
    run_case(out, "r50", model, [(128, 160)], [(480, 600)], [b2], [torch.randint(0, 91, (6,), generator=g)], 5)
    keys["r50_state_dict"] = list(model.state_dict().keys())
    keys["r50_parameters"] = [n for n, _ in model.named_parameters()]
    # MLPerf variant: ResNeXt-50 32x4d, 264 classes (forward at 128 px instead of 800 px).
    b3 = random_boxes(g, 5, 128, 128)
    model = make_model(out, "mlperf", "resnext50_32x4d", 264, False, [(128, 128)], 6)
    run_case(out, "mlperf", model, [(128, 128)], [(800, 800)], [b3], [torch.tensor([0, 263, 100, 5, 262])], 6)
    keys["mlperf_state_dict"] = list(model.state_dict().keys())
    # ResNet-18 body with GroupNorm(16) after every conv (backbone.norm: gn), random affine.
    torch.manual_seed(8)
    body = torchvision.models.resnet18(weights=None, norm_layer=partial(torch.nn.GroupNorm, 16))
    with torch.no_grad():
        for m in body.modules():
            if isinstance(m, torch.nn.GroupNorm):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    torch.save({k: v for k, v in body.state_dict().items() if not k.startswith("fc.")}, f"{out}/weights_gn_r18_body.pth")
    images = padded_images([(96, 128), (128, 96)])
    with torch.no_grad():
        h = body.maxpool(body.relu(body.bn1(body.conv1(images))))
        c3 = body.layer2(body.layer1(h))
        c4 = body.layer3(c3)
        c5 = body.layer4(c4)
    torch.save({"images": images, "c3": c3, "c4": c4, "c5": c5}, f"{out}/io_gn_r18_body.pth")
    keys["gn_r18_body_parameters"] = [n for n, _ in body.named_parameters() if not n.startswith("fc.")]
    # ImageNet classification checkpoint (BatchNorm with num_batches_tracked, fc) for import.
    torch.manual_seed(7)
    torch.save(torchvision.models.resnet18(weights=None).state_dict(), f"{out}/imagenet_resnet18.pth")
    with open(f"{out}/keys.json", "w") as f:
        json.dump(keys, f)


if __name__ == "__main__":
    main()
