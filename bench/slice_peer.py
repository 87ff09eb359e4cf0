"""The peer of `detforge bench slice`: SAHI's get_sliced_prediction with its Ultralytics model.

argv: WEIGHTS IMAGES TILE OVERLAP CONF THREADS OUT. WEIGHTS is an Ultralytics .pt; IMAGES a file
listing one photo path per line. Each photo is predicted in TILE x TILE tiles overlapping by
OVERLAP (SAHI's defaults otherwise: greedy NMM, IOS, 0.5; no whole-image pass) at image size
TILE on the CPU, the first once untimed. OUT gets {"seconds" (all photos), "detections"}.
"""
import json, os, sys, tempfile, time
os.environ.setdefault("YOLO_CONFIG_DIR", tempfile.mkdtemp())
os.environ.setdefault("YOLO_OFFLINE", "1")
import torch
from sahi import AutoDetectionModel
from sahi.predict import get_sliced_prediction

weights, images, tile, overlap, conf, threads, out = sys.argv[1:]
tile, overlap, conf, threads = int(tile), float(overlap), float(conf), int(threads)
torch.set_num_threads(threads)
photos = [line.strip() for line in open(images) if line.strip()]
model = AutoDetectionModel.from_pretrained(model_type="ultralytics", model_path=weights,
                                           confidence_threshold=conf, image_size=tile,
                                           device="cpu")


def predict(photo):
    return get_sliced_prediction(photo, model, slice_height=tile, slice_width=tile,
                                 overlap_height_ratio=overlap, overlap_width_ratio=overlap,
                                 perform_standard_pred=False, verbose=0).object_prediction_list


predict(photos[0])
detections = 0
start = time.perf_counter()
for photo in photos:
    detections += len(predict(photo))
seconds = time.perf_counter() - start
with open(out, "w") as f:
    json.dump({"seconds": seconds, "detections": detections}, f)
