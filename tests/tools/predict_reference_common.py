"""What the end-to-end predict references share (tests/tools/predict_reference_*.py): the BCCD
dataset (shared/datasets/bccd), the photos every family is compared on, and a YOLO-format copy
of BCCD images for Ultralytics' trainer."""
import json
import os

import torch

# Eight BCCD photos (640x480 JPEGs; none of the first training photos the references train on):
# many red cells, a white cell, platelets.
TEST_IMAGES = ["BloodImage_00004.jpg", "BloodImage_00007.jpg", "BloodImage_00041.jpg",
               "BloodImage_00094.jpg", "BloodImage_00113.jpg", "BloodImage_00159.jpg",
               "BloodImage_00203.jpg", "BloodImage_00265.jpg"]


def bccd():
    """$DETFORGE_SHARED/datasets/bccd, else shared/ beside the repository (tests/test_util.cpp's
    shared_dataset rule)."""
    env = os.environ.get("DETFORGE_SHARED")
    if env:
        roots = [env]
    else:
        # The repository's shared/, else the nearest shared/ in a folder above it.
        roots, folder = [], os.path.realpath(os.path.join(os.path.dirname(__file__), "..", ".."))
        while True:
            roots.append(os.path.join(folder, "shared"))
            if os.path.dirname(folder) == folder:
                break
            folder = os.path.dirname(folder)
    for root in roots:
        path = os.path.normpath(os.path.join(root, "datasets", "bccd"))
        if os.path.isdir(path):
            return path
    raise SystemExit(f"datasets/bccd not found in {roots} (set DETFORGE_SHARED)")


def coco_split(split):
    with open(os.path.join(bccd(), "annotations", f"instances_{split}.json")) as f:
        return json.load(f)


def calibrate_norms(norms, forward):
    """Sets the running statistics of each batch norm of `norms` to those of its own input
    during `forward()` (no gradient): real statistics of real photos."""
    def pre_hook(m, inp):
        m.running_mean.copy_(inp[0].mean((0, 2, 3)))
        m.running_var.copy_(inp[0].var((0, 2, 3)))

    hooks = [m.register_forward_pre_hook(pre_hook) for m in norms]
    with torch.no_grad():
        forward()
    for h in hooks:
        h.remove()


def detection_rows(boxes, scores, labels):
    """[[x1, y1, x2, y2, score, label], ...] of one image's detections, best first."""
    rows = [[*box, score, int(label)] for box, score, label in zip(boxes, scores, labels)]
    return sorted(rows, key=lambda r: -r[4])


def write_reference(path, detections):
    """{"images": [file, ...], "detections": {file: rows}} as predict_parity_test.cpp reads it."""
    with open(path, "w") as f:
        json.dump({"images": list(detections), "detections": detections}, f)


def training_boxes(paths):
    """Per BCCD training photo of `paths`: its boxes as (COCO bbox [x, y, w, h], label 0..2),
    and the photo's width and height."""
    coco = coco_split("train")
    by_name = {im["file_name"]: im for im in coco["images"]}
    labels = {c["id"]: k for k, c in enumerate(sorted(coco["categories"], key=lambda c: c["id"]))}
    anns = {}
    for a in coco["annotations"]:
        anns.setdefault(a["image_id"], []).append(a)
    out = []
    for path in paths:
        im = by_name[os.path.basename(path)]
        boxes = [(a["bbox"], labels[a["category_id"]]) for a in anns.get(im["id"], [])]
        out.append((boxes, im["width"], im["height"]))
    return out


def training_photos(count):
    """Paths of the first `count` BCCD training photos (by file name)."""
    images = sorted(coco_split("train")["images"], key=lambda im: im["file_name"])[:count]
    return [os.path.join(bccd(), "images", im["file_name"]) for im in images]


def write_yolo_copy(folder, count):
    """The first `count` BCCD training images (symlinks) with YOLO label files and a data.yaml
    naming the 3 classes; returns the data.yaml path."""
    coco = coco_split("train")
    labels = {c["id"]: k for k, c in enumerate(sorted(coco["categories"], key=lambda c: c["id"]))}
    images = sorted(coco["images"], key=lambda im: im["file_name"])[:count]
    boxes = {}
    for a in coco["annotations"]:
        boxes.setdefault(a["image_id"], []).append(a)
    for sub in ("images", "labels"):
        os.makedirs(os.path.join(folder, sub, "train"), exist_ok=True)
    for im in images:
        src = os.path.join(bccd(), "images", im["file_name"])
        dst = os.path.join(folder, "images", "train", im["file_name"])
        if not os.path.exists(dst):
            os.symlink(src, dst)
        w, h = im["width"], im["height"]
        stem = os.path.splitext(im["file_name"])[0]
        with open(os.path.join(folder, "labels", "train", stem + ".txt"), "w") as f:
            for a in boxes.get(im["id"], []):
                x, y, bw, bh = a["bbox"]
                f.write(f"{labels[a['category_id']]} {(x + bw / 2) / w:.6f} {(y + bh / 2) / h:.6f} "
                        f"{bw / w:.6f} {bh / h:.6f}\n")
    names = [c["name"] for c in sorted(coco["categories"], key=lambda c: c["id"])]
    data = os.path.join(folder, "data.yaml")
    with open(data, "w") as f:
        # No `path`: the folder is moved into place after writing, and both readers take the
        # data.yaml's own folder then.
        f.write("train: images/train\nval: images/train\n"
                f"names: {json.dumps(dict(enumerate(names)))}\n")
    return data
