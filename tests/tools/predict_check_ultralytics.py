"""Ultralytics' own predict on a model file detforge exported, for the export round trip of
tests/tools/predict_parity_test.cpp.

Usage: predict_check_ultralytics.py MODEL IMGSZ OUT.json IMAGE... MODEL is a `.pt` (`detforge
export --format ultralytics`) or a `.onnx` (`--format onnx`, run by onnxruntime through
Ultralytics' AutoBackend). Writes {"images": [file name, ...], "detections": {file: [[x1, y1, x2,
y2, score, label], ...]}} as predict_reference_yolo.py does (conf 0.05, iou 0.7, 300 per image).
"""
import os
import sys
import tempfile

os.environ.setdefault("YOLO_CONFIG_DIR", tempfile.mkdtemp())
os.environ.setdefault("YOLO_OFFLINE", "1")

from predict_reference_common import detection_rows, write_reference  # noqa: E402
from ultralytics import YOLO  # noqa: E402


def main():
    model_path, imgsz, out, images = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
    model = YOLO(model_path, task="detect")
    detections = {}
    for path in images:
        b = model.predict(path, imgsz=imgsz, conf=0.05, iou=0.7, max_det=300, device="cpu",
                          verbose=False)[0].boxes
        detections[os.path.basename(path)] = detection_rows(b.xyxy.tolist(), b.conf.tolist(),
                                                            b.cls.tolist())
    write_reference(out, detections)


if __name__ == "__main__":
    main()
