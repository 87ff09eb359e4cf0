"""rfdetr's whole inference path (RFDETRNano(pretrain_weights=...).predict: resize to 384x384,
ImageNet statistics, model, PostProcess) on weights rfdetr trained and saved, for detforge
predict's end-to-end parity (tests/tools/predict_parity_test.cpp).

Usage: predict_reference_rfdetr.py OUT_DIR. Builds RFDETRNano with 3 classes and no pretrained
weights (no network), spreads its class heads so that scores differ from query to query, takes two
AdamW steps of its own training forward and SetCriterion on BCCD training photos and their boxes,
and writes under OUT_DIR:
  rfdetr_bccd.pth  the checkpoint as rfdetr's trainer saves it ({"model": state dict, "args":
                   {num_classes, class_names, ...}}), which RFDETRNano(pretrain_weights=) reads;
  rfdetr_5classes.pth  an untrained RFDETRNano of 5 classes (WBC, cat, RBC, dog, Platelets) saved
                   as rfdetr's released checkpoints are, its args an argparse.Namespace, after
                   RFDETRNano(pretrain_weights=) read it back;
  reference.json   RFDETRNano(pretrain_weights=rfdetr_bccd.pth).predict(threshold=0) on
                   predict_reference_common.TEST_IMAGES: {"images": [file, ...], "detections":
                   {file: [[x1, y1, x2, y2, score, label], ...]}} in original-image pixels, best
                   first, without the extra class (label 3) detforge never reports.
"""
import argparse
import os
import sys
import tempfile

os.environ.setdefault("YOLO_CONFIG_DIR", tempfile.mkdtemp())
import torch
import torchvision.transforms.functional as TF
from PIL import Image
from predict_reference_common import (TEST_IMAGES, bccd, detection_rows, training_boxes,
                                      training_photos, write_reference)
from rfdetr import RFDETRNano
from rfdetr.config import TrainConfig
from rfdetr.models.lwdetr import build_criterion_from_config

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
CLASSES = ["Platelets", "RBC", "WBC"]


def labelled(paths):
    """The photos as rfdetr's predict prepares them, with their boxes as its criterion takes
    them (labels, boxes cxcywh in 0..1)."""
    images = [TF.normalize(TF.resize(TF.to_tensor(Image.open(p).convert("RGB")), [384, 384],
                                     antialias=False),
                           MEAN, STD) for p in paths]
    targets = [{"labels": torch.tensor([label for _, label in boxes], dtype=torch.int64),
                "boxes": torch.tensor([[(x + bw / 2) / w, (y + bh / 2) / h, bw / w, bh / h]
                                       for (x, y, bw, bh), _ in boxes]).view(-1, 4)}
               for boxes, w, h in training_boxes(paths)]
    return torch.stack(images), targets


def main():
    out = sys.argv[1]
    torch.manual_seed(0)
    model = RFDETRNano(pretrain_weights=None, device="cpu", num_classes=3)
    net = model.model.model
    with torch.no_grad():  # class logits that differ from query to query
        for name, p in net.named_parameters():
            if "class_embed" in name:
                p.normal_(-1.0 if name.endswith("bias") else 0.0, 0.1)
    criterion, _ = build_criterion_from_config(model.model_config,
                                               TrainConfig(dataset_dir=tempfile.mkdtemp()))
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-5, weight_decay=1e-4)
    net.train()
    criterion.train()
    for start in (0, 2):
        images, targets = labelled(training_photos(start + 2)[start:])
        terms = criterion(net(images), targets)
        loss = sum(terms[k] * w for k, w in criterion.weight_dict.items() if k in terms)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    state = {k: v for k, v in net.state_dict().items()}
    weights = os.path.join(out, "rfdetr_bccd.pth")
    torch.save({"model": state, "args": {"num_classes": 3, "num_queries": 300, "group_detr": 13,
                                         "class_names": CLASSES}}, weights)
    loaded = RFDETRNano(pretrain_weights=weights, device="cpu", num_classes=3)
    detections = {}
    for name in TEST_IMAGES:
        det = loaded.predict(Image.open(os.path.join(bccd(), "images", name)), threshold=0.0)
        keep = det.class_id < 3
        detections[name] = detection_rows(det.xyxy[keep].tolist(), det.confidence[keep].tolist(),
                                          det.class_id[keep].tolist())
    write_reference(os.path.join(out, "reference.json"), detections)

    other = RFDETRNano(pretrain_weights=None, device="cpu", num_classes=5).model.model
    with torch.no_grad():
        for name, p in other.named_parameters():
            if "class_embed" in name:
                p.normal_(0.0, 0.1)
    names = ["WBC", "cat", "RBC", "dog", "Platelets"]
    five = os.path.join(out, "rfdetr_5classes.pth")
    torch.save({"model": other.state_dict(),
                "args": argparse.Namespace(num_classes=5, num_queries=300, group_detr=13,
                                           class_names=names)}, five)
    RFDETRNano(pretrain_weights=five, device="cpu", num_classes=5)


if __name__ == "__main__":
    main()
