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
from predict_reference_transformers import spread_class_heads, train_save_and_detect
from transformers import RTDetrV2ForObjectDetection
from transformers.models.rt_detr.image_processing_rt_detr import RTDetrImageProcessor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models",
                                "rtdetr"))
from reference import config  # noqa: E402  (tests/models/rtdetr/reference.py)


def main():
    torch.manual_seed(0)
    processor = RTDetrImageProcessor(size={"height": 640, "width": 640})
    model = RTDetrV2ForObjectDetection(config())
    spread_class_heads(model)
    train_save_and_detect(model, processor, sys.argv[1])


if __name__ == "__main__":
    main()
