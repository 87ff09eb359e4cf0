"""Writes the fuzz targets' seed corpora (fuzz/corpus/<target>/) with the references themselves:
torch.save, Ultralytics, safetensors, Pillow. scripts/fuzz.sh seeds runs it (and writes the
checkpoint seed with detforge); the outputs are committed, so a fuzz run needs no Python.

Usage: make_seeds.py CORPUS_DIR REPO_ROOT
"""
import collections
import io
import os
import shutil
import sys
import zipfile

import torch
from PIL import Image
from safetensors.torch import save_file

corpus, root = sys.argv[1], sys.argv[2]
torch.manual_seed(0)


def folder(name):
    path = os.path.join(corpus, name)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


# torch_file: a state dict, a training checkpoint holding one, a whole pickled module (as
# Ultralytics saves), half and int storages, an Ultralytics DetectionModel of two layers.
torch_file = folder("torch_file")
conv = torch.nn.Sequential(torch.nn.Conv2d(3, 2, 1), torch.nn.BatchNorm2d(2), torch.nn.SiLU())
torch.save(conv.state_dict(), os.path.join(torch_file, "state_dict.pt"))
torch.save({"ema": {"module": conv.state_dict()}, "epoch": 3, "lr": [0.1, 0.01]},
           os.path.join(torch_file, "nested_checkpoint.pth"))
torch.save({"model": conv.half(), "names": {0: "cell"}}, os.path.join(torch_file, "module.pt"))
torch.save(collections.OrderedDict(a=torch.arange(3), b=torch.ones(2, dtype=torch.bool),
                                   c=torch.zeros(2, 2, dtype=torch.bfloat16)[:, :1]),
           os.path.join(torch_file, "dtypes_and_views.pt"))
from ultralytics.nn.tasks import DetectionModel  # noqa: E402

tiny = {"nc": 1, "backbone": [[-1, 1, "Conv", [4, 3, 2]], [-1, 1, "Conv", [4, 3, 2]]],
        "head": [[[1], 1, "Detect", ["nc"]]]}
model = DetectionModel(tiny, ch=3, nc=1, verbose=False).half()
model.names = {0: "cell"}
torch.save({"model": model, "ema": None, "epoch": -1}, os.path.join(torch_file, "ultralytics.pt"))

# pickle: the data.pkl of each, as pickle_fuzz wraps its input.
pickle = folder("pickle")
for name in sorted(os.listdir(torch_file)):
    with zipfile.ZipFile(os.path.join(torch_file, name)) as z:
        pkl = next(n for n in z.namelist() if n.endswith("/data.pkl"))
        open(os.path.join(pickle, name + ".pkl"), "wb").write(z.read(pkl))

# safetensors: every dtype detforge reads, and a file with metadata.
safetensors = folder("safetensors")
save_file({"w": torch.randn(2, 3), "h": torch.ones(2, dtype=torch.float16),
           "b": torch.ones(1, dtype=torch.bfloat16), "i": torch.arange(3),
           "m": torch.tensor([True, False])}, os.path.join(safetensors, "dtypes.safetensors"))
save_file({"conv.weight": torch.randn(2, 3, 1, 1)}, os.path.join(safetensors, "meta.safetensors"),
          metadata={"format": "pt"})
shutil.copy(os.path.join(safetensors, "meta.safetensors"), os.path.join(torch_file, "meta.safetensors"))

# config: the shipped configs of each family, and one with overrides after a NUL byte.
config = folder("config")
for family in ("retinanet", "rtdetr", "yolo"):
    src = os.path.join(root, "configs", family)
    for name in sorted(os.listdir(src))[:2]:
        shutil.copy(os.path.join(src, name), os.path.join(config, f"{family}_{name}"))
base = os.path.join(root, "configs", "_base_", "runtime.yaml")
open(os.path.join(config, "overrides.yaml"), "w").write(
    open(base).read() + "\0train.epochs=3\nmodel.head.num_classes=[1, 2]\noptimizer.lr=1e-3\n")

# coco: the test fixtures (valid files and the broken ones).
coco = folder("coco")
fixtures = os.path.join(root, "tests", "fixtures", "coco")
for name in sorted(os.listdir(fixtures)):
    if name.endswith(".json"):
        shutil.copy(os.path.join(fixtures, name), coco)

# yolo: names (a list, a map) NUL label lines (boxes, a polygon, bad lines).
yolo = folder("yolo")
samples = {
    "list": "[cell, platelet]\0" "0 0.5 0.5 0.2 0.3\n1 0.1 0.1 0.05 0.05\n",
    "map": "{0: cell, 1: platelet, 2: rbc}\0" "2 0.4 0.4 0.8 0.8\n",
    "polygon": "[a]\0" "0 0.1 0.1 0.9 0.1 0.9 0.9 0.1 0.9\n",
    "bad": "[a]\0" "0 nan 0.5 0.2\n7 0.5 0.5 0.2 0.3\n0 1.5 -0.2 0.3 0.3\n",
}
for name, text in samples.items():
    open(os.path.join(yolo, name), "wb").write(text.encode())

# voc: a CVAT-style annotation, a difficult object, a malformed box.
voc = folder("voc")
obj = ("<object><name>{n}</name><difficult>{d}</difficult><bndbox><xmin>{a}</xmin><ymin>{b}</ymin>"
       "<xmax>{c}</xmax><ymax>{e}</ymax></bndbox></object>")
head = ("<annotation><folder>VOC</folder><filename>a.jpg</filename><size><width>64</width>"
        "<height>48</height><depth>3</depth></size>")
open(os.path.join(voc, "two.xml"), "w").write(
    head + obj.format(n="cell", d=0, a=1, b=2, c=30, e=40) +
    obj.format(n="rbc", d=1, a=10, b=10, c=20, e=20) + "</annotation>")
open(os.path.join(voc, "bad_box.xml"), "w").write(
    head + obj.format(n="cell", d=0, a=30, b=2, c="x", e=1e30) + "</annotation>")

# image_header: what Pillow writes, a JPEG with an EXIF orientation among them.
image_header = folder("image_header")
picture = Image.new("RGB", (5, 3), (200, 10, 10))
picture.save(os.path.join(image_header, "plain.jpg"))
exif = Image.Exif()
exif[0x0112] = 6
picture.save(os.path.join(image_header, "rotated.jpg"), exif=exif)
picture.save(os.path.join(image_header, "image.png"))
picture.save(os.path.join(image_header, "image.bmp"))
picture.save(os.path.join(image_header, "image.webp"))
picture.convert("L").save(os.path.join(image_header, "grey.png"))
