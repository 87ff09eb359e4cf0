"""YOLOv8, YOLO11 and YOLO26 files as Ultralytics' own trainer writes them, and Ultralytics' whole
inference path on them, for detforge's checkpoint loading (tests/models/yolo/generations_test.cpp)
and predict parity (tests/tools/predict_parity_test.cpp).

Usage: predict_reference_yolo_generations.py OUT_DIR. For V in 8, 11, 26, under OUT_DIR:
  V/last.pt        Ultralytics' trainer on 16 BCCD training photos (YOLO labels under data/),
                   two epochs from its yaml (yolov8n, yolo11n, yolo26n) whose batch-norm
                   statistics are those of 8 training photos fed as Ultralytics feeds them and
                   whose class biases are spread (so scores differ), as the trainer leaves it:
                   the EMA as 'model' in float16, no optimizer (strip_optimizer);
  V/epoch1.pt      the trainer's checkpoint after epoch 1 (save_period=1): 'model' None, the EMA
                   and the optimizer state in float16;
  V/reference.json `YOLO(last.pt).predict(imgsz=512)` on predict_reference_common.TEST_IMAGES,
                   {"images": [...], "detections": {file: [[x1, y1, x2, y2, score, label], ...]}}
                   in original-image pixels, best first; for 26 also
  26/reference_nms_false.json  the same with predict(nms=False): the one-to-one head, no NMS;
  shapes/*.jpg     BCCD test photos cut to the shapes users have: portrait 3:4 (360x480), 16:9
                   (640x360), 9:16 (270x480) and an odd 1000x667, which pad at 416 and 640;
  V/shapes_<S>.json  `YOLO(last.pt).predict(imgsz=S, conf=0.001, max_det=300)` on them for S in
                   416 and 640, and shapes_<S>_conf25.json at conf 0.25 (26: also each with
                   the suffix _nms_false: predict(nms=False));
  V/default.json   `YOLO(last.pt).predict(photo)` with no argument (the file's imgsz, conf 0.25)
                   on each of them;
  names.json       the class names the files store, in label order;
  shapes/wide.avi  a 16:9 video (640x360, Motion-JPEG, 6 frames of the 16:9 photo moving 8 px a
                   frame), and 11/video_640.json `YOLO(last.pt).predict(source=wide.avi,
                   imgsz=640, conf=0.001)` frame by frame, keyed by the frame number;
  ref.pth          "V_<file>_box", "V_<file>_cls" (file last or epoch1): the one-to-many head's
                   eval-mode logits of each file's weights (float16, run in float64) on
                   "images".
"""
import copy
import json
import os
import shutil
import sys
import tempfile

os.environ.setdefault("YOLO_CONFIG_DIR", tempfile.mkdtemp())
os.environ.setdefault("YOLO_OFFLINE", "1")

import torch  # noqa: E402
from predict_reference_common import (TEST_IMAGES, bccd, detection_rows,  # noqa: E402
                                      write_reference, write_yolo_copy)
from predict_reference_yolo import calibrated_model  # noqa: E402
from ultralytics import YOLO  # noqa: E402

IMGSZ = 512
CONF, IOU, MAX_DET = 0.05, 0.7, 300
HEIGHT, WIDTH = 96, 128
SHAPES = {"portrait_360x480.jpg": (360, 480), "wide_640x360.jpg": (640, 360),
          "tall_270x480.jpg": (270, 480), "odd_1000x667.jpg": (1000, 667)}
SHAPE_SIZES = (416, 640)
SHAPE_CONFS = {"": 0.001, "_conf25": 0.25}
VERSIONS = (8, 11, 26)


def yaml_name(version):
    return "yolov8n.yaml" if version == 8 else f"yolo{version}n.yaml"


VIDEO_FRAMES = 6


def write_shapes(folder):
    """The photos of SHAPES: a BCCD test photo's top-left corner, at most its own size, resized to
    the shape (bilinear), as JPEG; and the 16:9 video."""
    import cv2
    os.makedirs(folder, exist_ok=True)
    for k, (name, (w, h)) in enumerate(sorted(SHAPES.items())):
        photo = cv2.imread(os.path.join(bccd(), "images", TEST_IMAGES[k % len(TEST_IMAGES)]))
        crop = photo[:min(h, photo.shape[0]), :min(w, photo.shape[1])]
        cv2.imwrite(os.path.join(folder, name), cv2.resize(crop, (w, h)),
                    [cv2.IMWRITE_JPEG_QUALITY, 95])
    wide = cv2.imread(os.path.join(folder, "wide_640x360.jpg"))
    video = cv2.VideoWriter(os.path.join(folder, "wide.avi"), cv2.VideoWriter_fourcc(*"MJPG"), 10,
                            (640, 360))
    for frame in range(VIDEO_FRAMES):
        video.write(cv2.copyMakeBorder(wide[:, 8 * frame:], 0, 0, 0, 8 * frame,
                                       cv2.BORDER_REFLECT))
    video.release()


def video_predictions(weights, path):
    """YOLO(weights).predict on the video at 640, conf 0.001, per frame number."""
    detections = {}
    results = YOLO(weights).predict(source=path, imgsz=640, conf=0.001, iou=IOU, max_det=MAX_DET,
                                    device="cpu", verbose=False, stream=True)
    for frame, result in enumerate(results):
        b = result.boxes
        detections[str(frame)] = detection_rows(b.xyxy.tolist(), b.conf.tolist(),
                                                b.cls.tolist())
    return detections


def head_logits(model, images):
    """The one-to-many head's eval-mode box and class logits of the float16 weights in float64
    (where the order of operations of two implementations leaves no trace)."""
    run = copy.deepcopy(model).double().eval()
    with torch.no_grad():
        _, preds = run(images.double())
    many = preds["one2many"] if "one2many" in preds else preds
    return many["boxes"], many["scores"]


def predictions(weights, folder=None, names=TEST_IMAGES, default=False, **kwargs):
    """Each photo through YOLO(weights).predict: at IMGSZ, CONF, IOU and MAX_DET unless given
    in `kwargs`; with `default`, with no argument at all (predict()'s own defaults)."""
    trained = YOLO(weights)
    detections = {}
    if not default:
        kwargs = {"imgsz": IMGSZ, "conf": CONF, "iou": IOU, "max_det": MAX_DET, **kwargs}
    for name in names:
        path = os.path.join(folder or os.path.join(bccd(), "images"), name)
        result = trained.predict(path, device="cpu", verbose=False, **kwargs)[0]
        b = result.boxes
        detections[name] = detection_rows(b.xyxy.tolist(), b.conf.tolist(), b.cls.tolist())
    return detections


def main():
    out = sys.argv[1]
    data = write_yolo_copy(os.path.join(out, "data"), count=16)
    shapes = os.path.join(out, "shapes")
    write_shapes(shapes)
    torch.manual_seed(0)
    ref = {"images": torch.rand(2, 3, HEIGHT, WIDTH)}
    for version in VERSIONS:
        folder = os.path.join(out, str(version))
        os.makedirs(folder)
        wrapper = YOLO(yaml_name(version))
        wrapper.model = calibrated_model(yaml_name(version), seed=version)
        start = os.path.join(folder, "start.pt")
        wrapper.save(start)
        YOLO(start).train(data=data, epochs=2, imgsz=320, batch=8, workers=0, device="cpu",
                          seed=0, deterministic=True, val=False, plots=False, amp=False,
                          project=folder, name="train", exist_ok=True, verbose=False,
                          optimizer="SGD", lr0=1e-3, warmup_epochs=0, mosaic=0.0, save_period=1)
        for name in ("last", "epoch1"):
            shutil.copy(os.path.join(folder, "train", "weights", f"{name}.pt"),
                        os.path.join(folder, f"{name}.pt"))
            ckpt = torch.load(os.path.join(folder, f"{name}.pt"), weights_only=False)
            model = ckpt["model"] if ckpt["model"] is not None else ckpt["ema"]
            ref[f"{version}_{name}_box"], ref[f"{version}_{name}_cls"] = head_logits(
                model, ref["images"])
        shutil.rmtree(os.path.join(folder, "train"))
        weights = os.path.join(folder, "last.pt")
        write_reference(os.path.join(folder, "reference.json"), predictions(weights))
        if version == 26:
            write_reference(os.path.join(folder, "reference_nms_false.json"),
                            predictions(weights, nms=False))
        modes = [("", {})] + ([("_nms_false", {"nms": False})] if version == 26 else [])
        for size in SHAPE_SIZES:
            for conf_suffix, conf in SHAPE_CONFS.items():
                for suffix, extra in modes:
                    write_reference(
                        os.path.join(folder, f"shapes_{size}{conf_suffix}{suffix}.json"),
                        predictions(weights, shapes, sorted(SHAPES), imgsz=size, conf=conf,
                                    **extra))
        write_reference(os.path.join(folder, "default.json"),
                        predictions(weights, shapes, sorted(SHAPES), default=True))
        if version == 11:
            write_reference(os.path.join(folder, "video_640.json"),
                            video_predictions(weights, os.path.join(shapes, "wide.avi")))
        names = YOLO(weights).names
        with open(os.path.join(out, "names.json"), "w") as f:
            json.dump([names[k] for k in sorted(names)], f)
    torch.save(ref, os.path.join(out, "ref.pth"))


if __name__ == "__main__":
    main()
