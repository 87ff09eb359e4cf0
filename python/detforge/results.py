"""What Model.train and Model.predict return."""

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


@dataclass
class TrainResult:
    """A finished (or stopped) training run."""

    #: The run directory (config.yaml, metrics.jsonl, checkpoints, plots).
    run_dir: Path
    #: Every `train`, `eval` and `data` event of the run, in order (metrics.jsonl's records).
    history: list = field(default_factory=list)
    #: The last evaluation of each set of weights: {"live": {"stats": ..., "per_class": ...},
    #: "ema": ... or None}.
    final: dict = field(default_factory=dict)
    #: best.ckpt and last.ckpt (None when the run wrote none).
    best: Path = None
    last: Path = None
    best_metric: float = None
    best_weights: str = None
    epochs_done: int = 0
    steps_done: int = 0
    #: True when a callback, model.stop() or a signal stopped the run; resume=True continues it.
    stopped: bool = False
    #: Every event of the run, as the binary wrote them.
    events: list = field(default_factory=list)

    @property
    def metrics(self):
        """The last evaluation's 12 COCO stats of the live weights (AP, AP50, ..., ARl)."""
        live = self.final.get("live") or {}
        return dict(live.get("stats") or {})

    def to_df(self):
        """`history` as a pandas DataFrame, one row per record with its `event` (train, eval,
        data) and an evaluation's 12 stats as columns (pandas must be installed)."""
        import pandas as pd
        rows = []
        for e in self.history:
            row = {k: v for k, v in e.items() if k not in ("v", "time", "stats", "per_class")}
            row.update(e.get("stats", {}))
            rows.append(row)
        return pd.DataFrame(rows)


class Boxes:
    """One image's detections as numpy arrays, in the original image's pixels."""

    def __init__(self, xyxy, conf, cls):
        self.xyxy = np.asarray(xyxy, dtype=np.float32).reshape(-1, 4)
        self.conf = np.asarray(conf, dtype=np.float32).reshape(-1)
        self.cls = np.asarray(cls, dtype=np.int64).reshape(-1)

    @property
    def xywh(self):
        """Centre x, centre y, width, height (Ultralytics' xywh)."""
        x1, y1, x2, y2 = self.xyxy.T
        return np.stack([(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1], axis=1)

    def __len__(self):
        return len(self.conf)


class Results:
    """One image's result: its boxes, the class names, the original shape (h, w)."""

    def __init__(self, path, orig_shape, boxes, names, image=None):
        self.path = path
        self.orig_shape = orig_shape
        self.boxes = boxes
        #: Class index -> name.
        self.names = names
        self._image = image

    def plot(self, line_width=2):
        """The image with its boxes drawn (HWC uint8, BGR as the input), a new array."""
        image = self._load().copy()
        h, w = image.shape[:2]
        for (x1, y1, x2, y2), c in zip(self.boxes.xyxy, self.boxes.cls):
            colour = _palette(int(c))
            x1, y1 = max(int(x1), 0), max(int(y1), 0)
            x2, y2 = min(int(round(x2)), w - 1), min(int(round(y2)), h - 1)
            if x2 < x1 or y2 < y1:
                continue
            t = line_width
            image[y1:y1 + t, x1:x2 + 1] = colour
            image[max(y2 - t + 1, 0):y2 + 1, x1:x2 + 1] = colour
            image[y1:y2 + 1, x1:x1 + t] = colour
            image[y1:y2 + 1, max(x2 - t + 1, 0):x2 + 1] = colour
        return image

    def _load(self):
        if self._image is not None:
            return self._image
        from PIL import Image
        rgb = np.asarray(Image.open(self.path).convert("RGB"))
        return np.ascontiguousarray(rgb[:, :, ::-1])

    def __repr__(self):
        return f"Results({self.path!s}, {len(self.boxes)} boxes, shape {self.orig_shape})"


def _palette(index):
    colours = [(56, 56, 255), (151, 157, 255), (31, 112, 255), (29, 178, 255), (49, 210, 207),
               (10, 249, 72), (23, 204, 146), (134, 219, 61), (52, 147, 26), (187, 212, 0)]
    return colours[index % len(colours)]
