"""torchvision's whole inference path on RetinaNet weights torchvision trained, for detforge
predict's end-to-end parity (tests/tools/predict_parity_test.cpp).

Usage: predict_reference_retinanet.py OUT_DIR. Builds torchvision's RetinaNet (ResNet-18 FPN, v1
layout, 3 classes, GeneralizedRCNNTransform with min_size 384, max_size 512); its frozen
batch-norm statistics become those of 4 BCCD training photos as its own transform feeds them
(ImageNet mean and std on RGB / 255), and its class biases are spread so that scores are not all
alike. Then two SGD steps of torchvision's own training forward (its losses) on BCCD training
photos and their boxes, and under OUT_DIR:
  weights.pth     the state_dict(), as torchvision's reference scripts save it;
  reference.json  model([to_tensor(PIL image)]) in eval mode on
                  predict_reference_common.TEST_IMAGES: {"images": [file, ...], "detections":
                  {file: [[x1, y1, x2, y2, score, label], ...]}} in original-image pixels, best
                  first.
"""
import os
import sys

import torch
import torchvision
from PIL import Image
from predict_reference_common import (TEST_IMAGES, bccd, calibrate_norms, detection_rows,
                                      training_boxes, training_photos, write_reference)
from torchvision.models.detection.backbone_utils import _resnet_fpn_extractor
from torchvision.models.detection.retinanet import RetinaNet
from torchvision.ops import misc
from torchvision.ops.feature_pyramid_network import LastLevelP6P7
from torchvision.transforms.functional import to_tensor


def build():
    body = torchvision.models.resnet18(weights=None, norm_layer=misc.FrozenBatchNorm2d)
    backbone = _resnet_fpn_extractor(body, 3, returned_layers=[2, 3, 4],
                                     extra_blocks=LastLevelP6P7(256, 256))
    return RetinaNet(backbone, 3, min_size=384, max_size=512)


def calibrate(model, images):
    """Each frozen batch norm's statistics from the real photos as the transform makes them."""
    model.eval()
    batch, _ = model.transform(images)
    calibrate_norms([m for m in model.modules() if isinstance(m, misc.FrozenBatchNorm2d)],
                    lambda: model.backbone.body(batch.tensors))
    with torch.no_grad():
        model.head.classification_head.cls_logits.bias.uniform_(-4.0, 0.0)
        model.head.classification_head.cls_logits.weight.normal_(0, 0.5)
        model.head.regression_head.bbox_reg.weight.normal_(0, 0.02)


def training_batches(count, batch):
    paths = training_photos(count)
    for start in range(0, count, batch):
        chunk = paths[start:start + batch]
        images = [to_tensor(Image.open(p).convert("RGB")) for p in chunk]
        targets = [{"boxes": torch.tensor([[x, y, x + w, y + h] for (x, y, w, h), _ in boxes]
                                          ).view(-1, 4),
                    "labels": torch.tensor([label for _, label in boxes], dtype=torch.int64)}
                   for boxes, _, _ in training_boxes(chunk)]
        yield images, targets


def main():
    out = sys.argv[1]
    torch.manual_seed(0)
    model = build()
    calibrate(model, [to_tensor(Image.open(p).convert("RGB")) for p in training_photos(4)])
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=1e-3,
                                momentum=0.9)
    model.train()
    for images, targets in training_batches(4, 2):
        losses = model(images, targets)
        optimizer.zero_grad()
        sum(losses.values()).backward()
        optimizer.step()
    torch.save(model.state_dict(), os.path.join(out, "weights.pth"))
    model.eval()
    detections = {}
    with torch.no_grad():
        for name in TEST_IMAGES:
            image = to_tensor(Image.open(os.path.join(bccd(), "images", name)).convert("RGB"))
            det = model([image])[0]
            detections[name] = detection_rows(det["boxes"].tolist(), det["scores"].tolist(),
                                              det["labels"].tolist())
    write_reference(os.path.join(out, "reference.json"), detections)


if __name__ == "__main__":
    main()
