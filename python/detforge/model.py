"""detforge.Model: train, val, predict and export as Ultralytics' and RF-DETR's users write them.

Each call runs the detforge binary (the engine) as a child process and reads its event stream;
callbacks run here, in the calling process, once per event, whatever the number of training
processes (docs/python.md)."""

import difflib
import glob as globlib
import json
import os
import socket
import tempfile
from pathlib import Path

import numpy as np

from . import _process
from ._progress import Progress
from .errors import ConfigError
from .results import Boxes, Results, TrainResult

# The events a callback can follow (docs/events.md), and Ultralytics' names for the same moments.
EVENTS = ("run_start", "epoch_start", "progress", "train", "data", "eval", "checkpoint",
          "preemption", "run_end", "predictions", "export", "weights", "warning", "error")
_ULTRALYTICS_EVENTS = {
    "on_train_start": "run_start", "on_train_epoch_start": "epoch_start",
    "on_train_batch_end": "progress", "on_fit_epoch_end": "eval", "on_model_save": "checkpoint",
    "on_train_end": "run_end",
}

# Ultralytics' and RF-DETR's argument names -> detforge config keys.
_TRAIN_KEYS = {
    "data": "data.dataset", "dataset_dir": "data.dataset", "epochs": "train.epochs",
    "imgsz": "data.max_size", "resolution": "data.max_size", "batch": "data.batch_size",
    "batch_size": "data.batch_size", "device": "device", "seed": "seed", "lr0": "optimizer.lr",
    "lr": "optimizer.lr", "workers": "data.workers", "grad_accum_steps": "train.accumulate",
    "output_dir": "output_dir",
}
_PREDICT_KEYS = {"imgsz": "data.max_size", "conf": "model.inference.score_threshold",
                 "iou": "model.inference.nms_threshold", "max_det":
                 "model.inference.detections_per_image", "device": "device"}
_IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp"}


def _overrides(kwargs, table, extra=()):
    """`a.b=value` overrides from keyword arguments: the names of `table`, or any detforge key
    with a dot. Anything else fails at once with the nearest known name."""
    out = []
    known = sorted(set(table) | set(extra))
    for name, value in kwargs.items():
        if value is None:
            continue
        if name in table:
            key = table[name]
        elif "." in name:
            key = name
        else:
            near = difflib.get_close_matches(name, known, n=1)
            hint = f"; did you mean '{near[0]}'?" if near else ""
            raise ConfigError(f"unknown argument '{name}'{hint} (known: {', '.join(known)}; "
                              f"any config key as 'a.b'=value)")
        out.append(f"{key}={_yaml(value)}")
    return out


def _yaml(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value)
    return str(value)


def _device(device, nproc):
    """(device, nproc, CUDA_VISIBLE_DEVICES or None) of Ultralytics' device forms: 0 -> cuda:0;
    "2,3" or [2, 3] -> cuda on 2 processes, one GPU each, those two visible; detforge's ("cpu",
    "cuda", "cuda:1") as they are."""
    if isinstance(device, str) and "," in device:
        device = [d.strip() for d in device.split(",") if d.strip()]
    if isinstance(device, (list, tuple)):
        if nproc not in (None, len(device)):
            raise ConfigError(f"device={device!r} names {len(device)} GPUs but nproc={nproc}")
        return "cuda", len(device), ",".join(str(d) for d in device)
    if isinstance(device, int) or (isinstance(device, str) and device.isdigit()):
        return f"cuda:{device}", nproc, None
    return device, nproc, None


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Model:
    """A detector: a shipped config's name ("yolo11n", "dfine_n", "rfdetr_nano", ...), a config
    file, a detforge run directory or .ckpt, or a weights file people have (Ultralytics .pt,
    rfdetr .pth, a transformers folder, a torchvision state dict) with `config=` (default: the
    shipped config named as the file, e.g. yolo11n.pt -> yolo11n)."""

    def __init__(self, model, config=None):
        self.config, self.weights = _resolve(model, config)
        self._callbacks = {}
        self._current = None
        self._last_train = None
        self._servers = {}

    # --- callbacks -------------------------------------------------------------------------
    def add_callback(self, event, fn):
        """Calls `fn(event_dict)` for each `event` (docs/events.md; Ultralytics' on_* names
        too). A callback may call `model.stop()`."""
        name = _ULTRALYTICS_EVENTS.get(event, event)
        if name not in EVENTS:
            near = difflib.get_close_matches(event, EVENTS + tuple(_ULTRALYTICS_EVENTS), n=1)
            raise ValueError(f"unknown event '{event}'" + (f"; did you mean '{near[0]}'?" if near
                                                            else f" (known: {', '.join(EVENTS)})"))
        self._callbacks.setdefault(name, []).append(fn)

    def stop(self):
        """Stops the running command: training ends after its step with a resumable last.ckpt."""
        if self._current is not None:
            self._current.stop()

    def _run(self, args, progress=None, env=None):
        def on_event(event):
            if progress is not None:
                progress(event)
            for fn in self._callbacks.get(event["event"], ()):
                fn(event)
        run = _process.Run(args, on_event, env={**os.environ, **(env or {})})
        self._current = run
        try:
            code = run.run(check=False)
        finally:
            self._current = None
        return run, code

    # --- train -----------------------------------------------------------------------------
    def train(self, data=None, epochs=None, imgsz=None, batch=None, device=None, resume=False,
              nproc=None, project=None, name=None, verbose=True, **kwargs):
        """Trains; returns a TrainResult. `nproc` > 1 starts that many processes through
        `detforge launch` (Gloo on CPU, NCCL on GPUs); events and callbacks still come once."""
        config = self.config
        env = {}
        if resume:
            if self._last_train is None:
                raise ConfigError("resume=True: this Model has no run to continue (train it "
                                  "first, then resume the run it stopped)")
            config, overrides, nproc, env = self._last_train
        else:
            device, nproc, visible = _device(device, nproc)
            if visible is not None:
                env["CUDA_VISIBLE_DEVICES"] = visible
            kwargs.update(data=data, epochs=epochs, imgsz=imgsz, batch=batch, device=device)
            if project or name:
                kwargs["output_dir"] = str(Path(project or "runs") / (name or "train"))
            overrides = _overrides(kwargs, _TRAIN_KEYS)
            if self.weights and not any(o.startswith("model.weights=") for o in overrides):
                overrides.append(f"model.weights={self.weights}")
        self._last_train = (config, overrides, nproc, env)
        args = ["train", "-c", config, *overrides]
        if resume:
            args += ["--resume", "auto"]
        if nproc and nproc > 1:
            args = ["launch", "--nproc-per-node", str(nproc), "--master-port", str(_free_port()),
                    "--", _process.binary(), *args]
        with Progress(verbose) as progress:
            run, code = self._run(args, progress, env)
        result = _train_result(run.events)
        if code == 8 or (code != 0 and run.stop_requested and result.last is not None):
            result.stopped = True
        elif code != 0:
            raise run.error(code)
        # As Ultralytics' model after train(): predict, val and export use the trained weights.
        trained = result.best or result.last
        if trained is not None:
            self.config, self.weights = str(result.run_dir / "config.yaml"), str(trained)
        return result

    # --- val -------------------------------------------------------------------------------
    def val(self, data=None, ann=None, images=None, batch=None, split="val", **kwargs):
        """COCO metrics of the weights: {"stats": {AP, ..., ARl}, "per_class": {...}}, equal to
        pycocotools. On `data` (a YOLO data.yaml or a VOC tree, its `split` read through
        `detforge convert`), a COCO instances file `ann` with its `images`, or by default the
        config's validation split."""
        with tempfile.TemporaryDirectory(prefix="detforge-val-") as tmp:
            if data is not None:
                ann, images = _as_coco(Path(data), split, Path(tmp) / "coco")
            elif ann is None:
                ann, images = self._val_split(kwargs)
            dt = str(Path(tmp) / "detections.json")
            self._predict_files(["--ann", str(ann), "--images", str(images)], dt, batch or 1,
                                "eval", kwargs)
            return evaluate(ann, dt)

    def _val_split(self, kwargs):
        """The validation split of the config (with `kwargs`' overrides): its (ann, images)."""
        import yaml
        args = ["config", "-c", self.config, *_overrides(kwargs, _PREDICT_KEYS)]
        completed = _process.output(args)
        data = (yaml.safe_load(completed) or {}).get("data") or {}
        val = data.get("val") or {}
        if "ann" not in val:
            raise ConfigError(f"{self.config}: no data.val.ann to validate on; give ann= and "
                              "images=")
        root = Path(data.get("root") or ".")
        return root / val["ann"], root / val.get("images", "")

    # --- predict ---------------------------------------------------------------------------
    def predict(self, source, conf=None, imgsz=None, batch=1, mode="predict", **kwargs):
        """Detections of `source`: an image path, a list of paths, a folder, a glob, a video, or
        numpy images (HWC uint8, BGR as OpenCV gives them, or a list of them). Returns one Results
        per image (per frame of a video). Images go to a predictor process that stays loaded
        between calls with the same settings; a video runs `detforge predict` once."""
        kwargs.update(conf=conf, imgsz=imgsz)
        if isinstance(source, (str, Path)) and _is_video(source):
            return self._predict_video(source, batch, mode, kwargs)
        items = source if isinstance(source, (list, tuple)) else [source]
        if any(isinstance(s, np.ndarray) for s in items):
            arrays = [_bgr(a, i) for i, a in enumerate(items)]
            files = None
        else:
            arrays = None
            files = [str(f) for s in items for f in
                     ([s] if Path(s).is_file() else _listed(Path(s)))]
            if not files:
                raise FileNotFoundError(f"{source}: no images "
                                        f"({' '.join(sorted(_IMAGE_SUFFIXES))})")
        server = self._server(mode, kwargs)
        results = []
        count = len(arrays) if arrays is not None else len(files)
        for start in range(0, count, batch):
            chunk = range(start, min(start + batch, count))
            if arrays is not None:
                images = []
                for k, i in enumerate(chunk):
                    raw = server.raw_file(k)
                    np.ascontiguousarray(arrays[i]).tofile(raw)
                    h, w = arrays[i].shape[:2]
                    images.append({"raw": str(raw), "width": w, "height": h})
            else:
                images = [{"path": str(Path(files[i]).resolve())} for i in chunk]
            results.extend(server.request(images))
        return _results(results, server.categories, files, arrays)

    def close(self):
        """Ends the predictor process a predict call started (it also ends with this Model)."""
        servers = getattr(self, "_servers", {})
        for server in servers.values():
            server.close()
        servers.clear()

    def __del__(self):
        self.close()

    def _server(self, mode, kwargs):
        if self.weights is None:
            raise ConfigError(f"{self.config}: a config without weights cannot predict; give a "
                              "weights file, a run directory or a .ckpt")
        args = ("predict", "--config", self.config, "--weights", self.weights, "--mode", mode,
                *_overrides(kwargs, _PREDICT_KEYS))
        if args not in self._servers:
            self._servers[args] = _process.Server(args)
        return self._servers[args]

    def _predict_video(self, source, batch, mode, kwargs):
        with tempfile.TemporaryDirectory(prefix="detforge-predict-") as tmp:
            out = str(Path(tmp) / "detections.json")
            run = self._predict_files(["--source", str(source)], out, batch, mode, kwargs)
            detections = json.loads(Path(out).read_text())
            categories = json.loads(Path(out).with_suffix(".categories.json").read_text())
            written = next(e for e in run.events if e["event"] == "predictions")
            frames = [[] for _ in range(written["frames"])]
            for d in detections:
                frames[d["image_id"]].append(d)
            return _results(frames, categories, [str(source)], None, video=True)

    def _predict_files(self, source_args, out, batch, mode, kwargs):
        if self.weights is None:
            raise ConfigError(f"{self.config}: a config without weights cannot predict; give a "
                              "weights file, a run directory or a .ckpt")
        args = ["predict", "--config", self.config, "--weights", self.weights, *source_args,
                "--out", out, "--mode", mode, "--batch-size", str(batch),
                *_overrides(kwargs, _PREDICT_KEYS)]
        run, code = self._run(args)
        if code != 0:
            raise run.error(code)
        return run

    # --- export ----------------------------------------------------------------------------
    def export(self, format="pth", imgsz=None, out=None, **kwargs):
        """Writes the weights as `format` (pth, onnx, hf, ultralytics, ...: docs/deploy.md);
        returns the written path."""
        if self.weights is None:
            raise ConfigError(f"{self.config}: nothing to export without weights")
        if out is None:
            suffix = {"pth": ".pth", "onnx": ".onnx", "ultralytics": ".pt"}.get(format, "")
            out = str(Path(self.weights).with_suffix("")) + f"_{format}{suffix}"
        args = ["export", "--config", self.config, "--weights", self.weights, "--format", format,
                "--out", out]
        if imgsz is not None:
            args += ["--imgsz", str(imgsz)]
        args += _overrides(kwargs, {})
        run, code = self._run(args)
        if code != 0:
            raise run.error(code)
        return Path(next(e["path"] for e in run.events if e["event"] == "export"))


def evaluate(gt, dt):
    """COCO bbox metrics of the results file `dt` against the instances file `gt`, equal to
    pycocotools: {"stats": {AP, AP50, ..., ARl}, "per_class": {name: AP}}."""
    run = _process.run(["eval", "--gt", str(gt), "--dt", str(dt)])
    event = next(e for e in run.events if e["event"] == "eval")
    return {"stats": event["stats"], "per_class": event["per_class"]}


def _resolve(model, config):
    """(config file, weights or None) of Model(model, config)."""
    path = Path(str(model)).expanduser()
    if path.is_dir() and (path / "config.yaml").is_file():
        weights = next((path / f for f in ("best.ckpt", "last.ckpt") if (path / f).is_file()),
                       None)
        return str(config or path / "config.yaml"), str(weights) if weights else None
    if path.suffix in (".yaml", ".yml") and path.is_file():
        return str(path), None
    if path.suffix == ".ckpt" and path.is_file():
        beside = path.parent / "config.yaml"
        if config is None and not beside.is_file():
            raise ConfigError(f"{path}: no config.yaml beside the checkpoint; give config=")
        return str(config or beside), str(path)
    if not path.exists() and ("/" in str(model) or path.suffix):
        raise ConfigError(f"{model}: no such file or folder")
    if path.exists():
        if config is not None:
            return str(config) if Path(str(config)).is_file() else _shipped(config), str(path)
        try:
            return _shipped(path.stem if path.is_file() else path.name), str(path)
        except ConfigError:
            raise ConfigError(f"{path}: no shipped config is named as these weights; give "
                              f"config= (a shipped config's name, e.g. 'rfdetr_nano', "
                              f"'dfine_n', or a config file)") from None
    return _shipped(str(model)), None


def _shipped(name):
    configs = _process.configs_dir()
    found = sorted(p for p in configs.rglob(f"{name}.yaml") if "_base_" not in p.parts)
    if found:
        return str(found[0])
    names = sorted({p.stem for p in configs.rglob("*.yaml") if "_base_" not in p.parts})
    near = difflib.get_close_matches(str(name), names, n=3)
    raise ConfigError(f"'{name}' is neither a file nor a shipped config"
                      + (f"; did you mean {', '.join(near)}?" if near else "")
                      + f" (shipped: {', '.join(names)})")


def _bgr(a, i):
    a = np.asarray(a)
    if a.ndim != 3 or a.shape[2] != 3 or a.dtype != np.uint8:
        raise ValueError(f"image {i}: numpy images must be HWC uint8 with 3 channels (BGR), "
                         f"got shape {a.shape} {a.dtype}")
    return a


def _is_video(source):
    """As detforge predict decides: a file that is not an image."""
    return Path(source).is_file() and Path(source).suffix.lower() not in _IMAGE_SUFFIXES


def _as_coco(data, split, out):
    """(instances file, image folder) of `split` of a YOLO data.yaml or a VOC tree (converted
    into `out` with detforge convert, images hard-linked)."""
    if data.suffix in (".yaml", ".yml"):
        source = ["--from", "yolo", "--ann", data]
    elif (data / "ImageSets" / "Main" / f"{split}.txt").is_file():
        source = ["--from", "voc", "--ann", data / "ImageSets" / "Main" / f"{split}.txt"]
    else:
        raise ConfigError(f"val(data={data}): a YOLO data.yaml or a VOC tree with "
                          f"ImageSets/Main/{split}.txt; for COCO give ann= and images=")
    _process.run(["convert", *source, "--to", "coco", "--split", split, "--out", out])
    return out / "annotations" / f"instances_{split}.json", out / "images" / split


def _listed(inputs):
    """The files detforge predict reads from `inputs` (a folder, a glob or one image), in its
    order: sorted paths."""
    if inputs.is_dir():
        files = (str(p) for p in inputs.iterdir() if p.is_file())
    else:
        files = globlib.glob(str(inputs))
    return sorted(f for f in files if Path(f).suffix.lower() in _IMAGE_SUFFIXES)


def _results(per_image, categories, files, arrays, video=False):
    """One Results per input (per frame of a video) from its results-file entries, in order."""
    index = {c["id"]: i for i, c in enumerate(categories)}
    names = {i: c["name"] for i, c in enumerate(categories)}
    results = []
    for i, dets in enumerate(per_image):
        xywh = np.array([d["bbox"] for d in dets], dtype=np.float32).reshape(-1, 4)
        xyxy = np.concatenate([xywh[:, :2], xywh[:, :2] + xywh[:, 2:]], axis=1)
        boxes = Boxes(xyxy, [d["score"] for d in dets], [index[d["category_id"]] for d in dets])
        if arrays is not None:
            results.append(Results(None, arrays[i].shape[:2], boxes, names, arrays[i]))
        elif video:
            results.append(Results(files[0], None, boxes, names))
        else:
            from PIL import Image
            with Image.open(files[i]) as im:
                shape = (im.height, im.width)
            results.append(Results(files[i], shape, boxes, names))
    return results


def _train_result(events):
    history = [e for e in events if e["event"] in ("train", "eval", "data")]
    end = next((e for e in reversed(events) if e["event"] == "run_end"), None)
    start = next((e for e in events if e["event"] == "run_start"), None)
    result = TrainResult(run_dir=Path(start["run_dir"]) if start else None, history=history,
                         events=list(events))
    if end is not None:
        result.final = end["final"]
        result.best = Path(end["best"]) if end["best"] else None
        result.last = Path(end["last"]) if end["last"] else None
        result.best_metric = end["best_metric"]
        result.best_weights = end["best_weights"]
        result.epochs_done = end["epochs_done"]
        result.steps_done = end["steps_done"]
        result.stopped = end["preempted"]
    return result
