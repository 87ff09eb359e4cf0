"""What the transformers DETR references of predict's parity tests share
(predict_reference_rtdetr.py, predict_reference_dfine.py): calibrating the batch norms on BCCD
photos, two small AdamW steps of the model's own training forward, then the folder and the
whole inference path (image processor, model, post_process_object_detection)."""
import os

import torch
from PIL import Image
from predict_reference_common import (TEST_IMAGES, bccd, calibrate_norms, detection_rows,
                                      training_boxes, training_photos, write_reference)


def calibrate(model, pixel_values):
    """Every batch norm's running statistics from the real photos (each from its own input)."""
    model.eval()
    calibrate_norms([m for m in model.modules() if hasattr(m, "running_var")],
                    lambda: model(pixel_values=pixel_values))


def labelled(processor, paths):
    """The photos as the processor makes them, with their boxes as transformers' loss takes
    them (class_labels, boxes cxcywh in 0..1)."""
    targets = [{"class_labels": torch.tensor([label for _, label in boxes], dtype=torch.int64),
                "boxes": torch.tensor([[(x + bw / 2) / w, (y + bh / 2) / h, bw / w, bh / h]
                                       for (x, y, bw, bh), _ in boxes]).view(-1, 4)}
               for boxes, w, h in training_boxes(paths)]
    images = [Image.open(p).convert("RGB") for p in paths]
    return processor(images=images, return_tensors="pt")["pixel_values"], targets


def spread_class_heads(model):
    """Class logits that differ from query to query."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "class_embed" in name or "enc_score_head" in name:
                p.normal_(-1.0 if name.endswith("bias") else 0.0, 0.1)


def train_save_and_detect(model, processor, out):
    """Calibrates `model` on 4 BCCD training photos, trains it two AdamW steps (lr 1e-6) on 4 more
    with their boxes, and writes OUT/hf (model and processor save_pretrained) and
    OUT/reference.json (its detections, threshold 0, of TEST_IMAGES)."""
    calibrate(model, labelled(processor, training_photos(4))[0])
    # A small step: with random weights a larger one saturates every query.
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6, weight_decay=1e-4)
    model.train()
    for start in (4, 6):
        pixels, targets = labelled(processor, training_photos(start + 2)[start:])
        loss = model(pixel_values=pixels, labels=targets).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    hub = os.path.join(out, "hf")
    model.save_pretrained(hub)
    processor.save_pretrained(hub)
    detections = {}
    with torch.no_grad():
        for name in TEST_IMAGES:
            image = Image.open(os.path.join(bccd(), "images", name)).convert("RGB")
            outputs = model(**processor(images=image, return_tensors="pt"))
            det = processor.post_process_object_detection(
                outputs, threshold=0.0, target_sizes=[(image.height, image.width)])[0]
            detections[name] = detection_rows(det["boxes"].tolist(), det["scores"].tolist(),
                                              det["labels"].tolist())
    write_reference(os.path.join(out, "reference.json"), detections)

