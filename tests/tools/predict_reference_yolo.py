"""Ultralytics' whole inference path on weights Ultralytics trained and saved, for detforge
predict's end-to-end parity (tests/tools/predict_parity_test.cpp).

Usage: predict_reference_yolo.py OUT_DIR. Under OUT_DIR:
  start.pt        yolov8n (3 classes) whose batch-norm statistics are those of 8 BCCD training
                  photos fed as Ultralytics feeds them (RGB / 255, letterboxed): real statistics,
                  so that other pixels give other results, and class biases spread so that scores
                  are not all alike; saved with Ultralytics' Model.save();
  last.pt         Ultralytics' own trainer on 16 BCCD training photos (YOLO labels written under
                  data/) from start.pt, two epochs, as the trainer saves it (EMA in float16);
  reference.json  `YOLO(last.pt).predict(imgsz=512)` on predict_reference_common.TEST_IMAGES
                  (640x480, letterboxed to 512x384 without padding): {"images": [file, ...],
                  "detections": {file: [[x1, y1, x2, y2, score, label], ...]}} in original-image
                  pixels, best first;
  sahi.json       the same photos through SAHI's get_sliced_prediction with last.pt: 320x320
                  tiles overlapping by 0.2 (Ultralytics at imgsz 320, conf 0.25), merged by
                  SAHI's defaults (greedy NMM, IoS 0.5, per class), no whole-image pass; as
                  reference.json;
  sahi_gt.json    COCO ground truth for those photos (BCCD's image ids, sizes and categories):
                  the boxes of reference.json scoring 0.3 or more, not BCCD's, on which a model
                  trained two epochs scores an AP of about 0, too near 0 to tell a wrong number;
  sahi_stats.json pycocotools' COCOeval (bbox) of SAHI's merged detections against sahi_gt.json:
                  {"stats": its 12 numbers, "results": the COCO results it evaluated}.
"""
import json
import os
import shutil
import sys
import tempfile

os.environ.setdefault("YOLO_CONFIG_DIR", tempfile.mkdtemp())
os.environ.setdefault("YOLO_OFFLINE", "1")

import cv2  # noqa: E402
import torch  # noqa: E402
from predict_reference_common import (TEST_IMAGES, bccd, coco_split,  # noqa: E402
                                      detection_rows, training_photos, write_reference,
                                      write_yolo_copy)
from ultralytics import YOLO  # noqa: E402
from ultralytics.data.augment import LetterBox  # noqa: E402
from ultralytics.nn.tasks import DetectionModel  # noqa: E402

IMGSZ = 512
CONF, IOU, MAX_DET = 0.05, 0.7, 300
TILE, OVERLAP, TILE_CONF = 320, 0.2, 0.25


def calibrated_model(yaml="yolov8n.yaml", seed=0):
    """`yaml` (3 classes) with batch-norm statistics from 8 training photos and spread class
    biases (in both heads of an end-to-end model)."""
    torch.manual_seed(seed)
    model = DetectionModel(yaml, nc=3, verbose=False)
    head = model.model[-1]
    with torch.no_grad():
        for branch in (head.cv3, getattr(head, "one2one_cv3", None)):
            for level in branch or []:
                level[2].bias.normal_(-3.0, 1.0)
    letterbox = LetterBox((320, 320), auto=False)
    images = []
    for path in training_photos(8):
        rgb = letterbox(image=cv2.imread(path))[..., ::-1].copy()
        images.append(torch.from_numpy(rgb).permute(2, 0, 1).float() / 255)
    norms = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    for m in norms:
        m.momentum = 1.0  # the running statistics become this batch's
    model.train()
    with torch.no_grad():
        model(torch.stack(images))
    for m in norms:
        m.momentum = 0.03
    return model.eval()


def main():
    out = sys.argv[1]
    wrapper = YOLO("yolov8n.yaml")
    wrapper.model = calibrated_model()
    start = os.path.join(out, "start.pt")
    wrapper.save(start)
    data = write_yolo_copy(os.path.join(out, "data"), count=16)
    YOLO(start).train(data=data, epochs=2, imgsz=320, batch=8, workers=0, device="cpu", seed=0,
                      deterministic=True, val=False, plots=False, amp=False, project=out,
                      name="train", exist_ok=True, verbose=False, optimizer="SGD", lr0=1e-3,
                      warmup_epochs=0, mosaic=0.0)
    weights = os.path.join(out, "last.pt")
    shutil.copy(os.path.join(out, "train", "weights", "last.pt"), weights)
    trained = YOLO(weights)
    detections = {}
    for name in TEST_IMAGES:
        result = trained.predict(os.path.join(bccd(), "images", name), imgsz=IMGSZ, conf=CONF,
                                 iou=IOU, max_det=MAX_DET, device="cpu", verbose=False)[0]
        b = result.boxes
        detections[name] = detection_rows(b.xyxy.tolist(), b.conf.tolist(), b.cls.tolist())
    write_reference(os.path.join(out, "reference.json"), detections)
    sahi = sliced(weights)
    write_reference(os.path.join(out, "sahi.json"), sahi)
    evaluate_sliced(out, sahi, detections)


def evaluate_sliced(out, sahi, whole):
    """sahi_gt.json from the whole-image detections `whole` and pycocotools' evaluation of
    SAHI's detections against it (sahi_stats.json)."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    gt = {"images": [], "annotations": [], "categories": coco_split("train")["categories"]}
    for split in ("train", "val"):
        gt["images"] += [im for im in coco_split(split)["images"] if im["file_name"] in sahi]
    assert len(gt["images"]) == len(sahi), "a test photo is in no BCCD split"
    category = sorted(c["id"] for c in gt["categories"])
    image_id = {im["file_name"]: im["id"] for im in gt["images"]}
    for name, rows in whole.items():
        for x1, y1, x2, y2, score, label in rows:
            if score >= 0.3:
                gt["annotations"].append({
                    "id": len(gt["annotations"]) + 1, "image_id": image_id[name],
                    "category_id": category[int(label)], "bbox": [x1, y1, x2 - x1, y2 - y1],
                    "area": (x2 - x1) * (y2 - y1), "iscrowd": 0})
    with open(os.path.join(out, "sahi_gt.json"), "w") as f:
        json.dump(gt, f)
    results = [{"image_id": image_id[name], "category_id": category[int(label)],
                "bbox": [x1, y1, x2 - x1, y2 - y1], "score": score}
               for name, rows in sahi.items() for x1, y1, x2, y2, score, label in rows]
    coco = COCO(os.path.join(out, "sahi_gt.json"))
    evaluation = COCOeval(coco, coco.loadRes(results), "bbox")
    evaluation.evaluate()
    evaluation.accumulate()
    evaluation.summarize()
    with open(os.path.join(out, "sahi_stats.json"), "w") as f:
        json.dump({"stats": [float(v) for v in evaluation.stats], "results": results}, f)


def sliced(weights):
    """SAHI's sliced prediction of each test photo with the Ultralytics weights."""
    from sahi import AutoDetectionModel
    from sahi.predict import get_sliced_prediction

    model = AutoDetectionModel.from_pretrained(model_type="ultralytics", model_path=weights,
                                               confidence_threshold=TILE_CONF, device="cpu",
                                               image_size=TILE)
    detections = {}
    for name in TEST_IMAGES:
        # Decoded by OpenCV as detforge decodes it (SAHI would use PIL, whose JPEG decoder
        # rounds some pixels otherwise), passed in RGB as SAHI takes arrays.
        rgb = cv2.imread(os.path.join(bccd(), "images", name))[..., ::-1].copy()
        result = get_sliced_prediction(
            rgb, model, slice_height=TILE, slice_width=TILE,
            overlap_height_ratio=OVERLAP, overlap_width_ratio=OVERLAP, perform_standard_pred=False,
            postprocess_type="GREEDYNMM", postprocess_match_metric="IOS",
            postprocess_match_threshold=0.5, postprocess_class_agnostic=False, verbose=0)
        p = result.object_prediction_list
        detections[name] = detection_rows([o.bbox.to_xyxy() for o in p],
                                          [float(o.score.value) for o in p],
                                          [o.category.id for o in p])
    return detections


if __name__ == "__main__":
    main()
