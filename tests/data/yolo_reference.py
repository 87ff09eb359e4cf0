"""Ultralytics' own reading of a YOLO dataset split: its YOLODataset's labels as JSON.

usage: yolo_reference.py DATA_YAML SPLIT OUT_JSON
The split's folder is resolved as detforge resolves it (data.yaml `path` against the yaml's
folder); Ultralytics then finds the images, their label files and sizes itself.
"""
import json
import pathlib
import sys

import yaml
from ultralytics.data.dataset import YOLODataset

data_yaml, split, out = sys.argv[1:4]
d = yaml.safe_load(pathlib.Path(data_yaml).read_text())
root = pathlib.Path(data_yaml).resolve().parent / d.get("path", ".")
names = d["names"] if isinstance(d["names"], dict) else dict(enumerate(d["names"]))
ds = YOLODataset(img_path=str((root / d[split]).resolve()), imgsz=640, augment=False,
                 data={"names": names, "nc": len(names), "channels": 3}, task="detect")
labels = [{"im_file": lb["im_file"], "shape": list(lb["shape"]), "cls": lb["cls"].ravel().tolist(),
           "bboxes": lb["bboxes"].tolist()} for lb in ds.labels]
pathlib.Path(out).write_text(json.dumps(labels))
