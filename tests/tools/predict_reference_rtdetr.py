"""transformers' whole RT-DETR inference path (image processor, model, post-processing) on
weights transformers trained and saved, for detforge predict's end-to-end parity
(tests/tools/predict_parity_test.cpp).

Usage: predict_reference_rtdetr.py OUT_DIR. Builds tests/models/rtdetr/reference.py's small
RTDetrV2ForObjectDetection (3 classes); its batch-norm statistics become those of 4 BCCD training
photos as RTDetrImageProcessor feeds them (640x640, RGB / 255, no mean or std), and its class
heads are spread so that scores differ from query to query. Then two AdamW
steps of its own training forward (its loss, denoising included) on BCCD training photos and
their boxes, and under OUT_DIR:
  hf/             model.save_pretrained() and the image processor's save_pretrained()
                  (model.safetensors, config.json, preprocessor_config.json);
  reference.json  processor + model + post_process_object_detection(threshold 0) on
                  predict_reference_common.TEST_IMAGES: {"images": [file, ...], "detections":
                  {file: [[x1, y1, x2, y2, score, label], ...]}} in original-image pixels, best
                  first.
"""
import os
import sys

import torch
from PIL import Image
from predict_reference_common import (TEST_IMAGES, bccd, calibrate_norms, detection_rows,
                                      training_boxes, training_photos, write_reference)
from transformers import RTDetrV2ForObjectDetection
from transformers.models.rt_detr.image_processing_rt_detr import RTDetrImageProcessor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models",
                                "rtdetr"))
from reference import config  # noqa: E402  (tests/models/rtdetr/reference.py)

SIZE = {"height": 640, "width": 640}


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


def main():
    out = sys.argv[1]
    torch.manual_seed(0)
    processor = RTDetrImageProcessor(size=SIZE)
    model = RTDetrV2ForObjectDetection(config())
    with torch.no_grad():  # class logits that differ from query to query
        for name, p in model.named_parameters():
            if "class_embed" in name or "enc_score_head" in name:
                p.normal_(-1.0 if name.endswith("bias") else 0.0, 0.1)
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


if __name__ == "__main__":
    main()
