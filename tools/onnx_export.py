"""Exports a detector, given as its reference framework's weights, to ONNX with raw outputs.

Usage: onnx_export.py --family retinanet|rfdetr|rtdetr|yolo --weights PATH --height H --width W
           [--batch B] [--opset N] --out OUT.onnx
           [--arch A --num-classes C --v2 0|1 [--norm-eps E]]   (retinanet only)
           [--size nano|small --num-classes C]                 (rfdetr only)

WEIGHTS is what `detforge export` writes: --format pth (torchvision RetinaNet or rfdetr state
dict), --format hf (transformers RT-DETRv2 folder), --format ultralytics (YOLOv8 .pt). The
reference model is rebuilt from it, wrapped to return the network's outputs before
post-processing (score thresholds and NMS are left to the runtime) and exported with torch's
TorchScript-based exporter (Ultralytics' and rfdetr's own exporters for yolo and rfdetr, which
use the same one).

Shapes are fixed: no dynamic axes; the model takes exactly B x 3 x H x W. Input `images`,
float32 [B, 3, H, W], is the tensor the network body receives, already resized, padded and
normalised (retinanet: after GeneralizedRCNNTransform's normalisation; rtdetr: pixel_values;
yolo: RGB in 0..1). Outputs:
  retinanet  boxes [B, N, 4] xyxy input pixels (torchvision's anchors for an HxW image decoded by
             BoxCoder(1, 1, 1, 1), clipped to HxW), scores [B, N, C] = sigmoid(cls_logits)
  rtdetr     logits [B, Q, C], pred_boxes [B, Q, 4] cxcywh in 0..1 (as transformers returns them)
  yolo       output0 [B, 4 + C, A]: xywh input pixels and class scores (as Ultralytics exports it)
  rfdetr     input `input` (rfdetr's name; ImageNet-normalised); dets [B, Q, 4] cxcywh in 0..1,
             labels [B, Q, C + 1] class logits (as rfdetr's RFDETR.export writes them)
After exporting, runs onnx.checker and prints one line: family, input and output shapes, opset,
file size. Exit codes: 0 done, 2 bad arguments or a missing Python package, 1 export failure.
"""
import argparse
import importlib
import importlib.util
import os
import shutil
import sys
import tempfile
import warnings

# The versions detforge is tested with, for the install hint: the build fills them in from
# scripts/versions.env when it compiles this file into detforge.
PINS = {"torch": "torch==@TORCH_VERSION@", "onnx": "onnx==@ONNX_VERSION@",
        "onnxruntime": "onnxruntime==@ONNXRUNTIME_VERSION@",
        "torchvision": "torchvision==@TORCHVISION_VERSION@",
        "transformers": "transformers==@TRANSFORMERS_VERSION@",
        "ultralytics": "ultralytics==@ULTRALYTICS_VERSION@", "rfdetr": "rfdetr==@RFDETR_VERSION@"}
FAMILY_PACKAGE = {"retinanet": "torchvision", "rfdetr": "rfdetr", "rtdetr": "transformers",
                  "yolo": "ultralytics"}
# The options only some families take, and which need them.
FAMILY_OPTIONS = {"retinanet": ("arch", "num_classes", "v2"), "rfdetr": ("size", "num_classes")}
RETINANET_ARCHS = ("resnet18", "resnet34", "resnet50", "resnet101", "resnext50_32x4d",
                   "resnext101_32x8d")
# 18 as Ultralytics picks for this torch: onnxruntime's CUDA provider lacks some opset >= 19
# kernels (Resize, ReduceMax). 20 is the newest the TorchScript exporter writes.
DEFAULT_OPSET = 18
MAX_OPSET = 20


class UsageError(Exception):
    """Bad arguments or weights that do not fit the requested model: exit code 2."""


class ExportError(Exception):
    """The written file is not the model asked for: exit code 1."""


class Parser(argparse.ArgumentParser):
    """argparse with its errors on one line (exit code 2, as argparse's)."""

    def error(self, message):
        self.exit(2, f"onnx_export: {message} (see --help)\n")


def require(family):
    """Imports what the family needs, or exits 2 naming the missing packages and a pip line."""
    missing = []
    for name in ("torch", "onnx", FAMILY_PACKAGE[family]):
        try:
            importlib.import_module(name)
        except ImportError as e:
            missing.append((name, e))
    if not missing:
        return
    names = [n for n, _ in missing]
    # onnxruntime runs the exported file; suggest it with onnx when it is absent too.
    if "onnx" in names and importlib.util.find_spec("onnxruntime") is None:
        names.append("onnxruntime")
    errors = "; ".join(f"{n}: {e}" for n, e in missing)
    print(f"onnx_export: --family {family} needs Python packages that {sys.executable} cannot "
          f"import ({errors}); install: pip install {' '.join(PINS[n] for n in names)}",
          file=sys.stderr)
    sys.exit(2)


def check_state_dict(model, state, what):
    """Raises UsageError naming the first missing, unexpected and mis-shaped keys, if any."""
    want = model.state_dict()
    missing = [k for k in want if k not in state]
    unexpected = [k for k in state if k not in want]
    shapes = [f"{k} {list(state[k].shape)} (model: {list(want[k].shape)})"
              for k in want if k in state and state[k].shape != want[k].shape]
    problems = [f"{len(v)} {label} (first: {', '.join(v[:3])})"
                for label, v in (("missing", missing), ("unexpected", unexpected),
                                 ("of another shape", shapes)) if v]
    if problems:
        raise UsageError(f"{what}: {'; '.join(problems)}")


def parse_args(argv):
    p = Parser(description=__doc__.split("\n")[0])
    p.add_argument("--family", required=True, choices=sorted(FAMILY_PACKAGE))
    p.add_argument("--weights", required=True)
    p.add_argument("--height", type=int, required=True)
    p.add_argument("--width", type=int, required=True)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--opset", type=int, default=DEFAULT_OPSET)
    p.add_argument("--out", required=True)
    p.add_argument("--arch", choices=RETINANET_ARCHS)
    p.add_argument("--num-classes", type=int)
    p.add_argument("--v2", type=int, choices=(0, 1))
    p.add_argument("--size", choices=("nano", "small"))
    p.add_argument("--norm-eps", type=float, default=1e-5,
                   help="retinanet: FrozenBatchNorm2d eps (detforge model.backbone.norm_eps)")
    a = p.parse_args(argv)
    for name in ("height", "width", "batch"):
        if getattr(a, name) < 1:
            p.error(f"--{name} must be >= 1, got {getattr(a, name)}")
    if not 17 <= a.opset <= MAX_OPSET:
        p.error(f"--opset must be in [17, {MAX_OPSET}] (the TorchScript exporter's newest), "
                f"got {a.opset}")
    needed = FAMILY_OPTIONS.get(a.family, ())
    flag = {"arch": "--arch", "num_classes": "--num-classes", "v2": "--v2", "size": "--size"}
    missing = [flag[k] for k in needed if getattr(a, k) is None]
    if missing:
        p.error(f"--family {a.family} needs {', '.join(missing)}")
    given = [flag[k] for k in flag if k not in needed and getattr(a, k) is not None]
    if given:
        owners = {f: "/".join(fam for fam, keys in FAMILY_OPTIONS.items() if k in keys)
                  for k, f in flag.items()}
        p.error(f"{', '.join(given)}: for --family {owners[given[0]]} only, not {a.family}")
    if a.num_classes is not None and a.num_classes < 1:
        p.error(f"--num-classes must be >= 1, got {a.num_classes}")
    if a.family == "yolo" and (a.height % 32 or a.width % 32):
        p.error(f"--family yolo needs --height and --width divisible by 32 (the largest stride), "
                f"got {a.height}x{a.width}")
    if not os.path.exists(a.weights):
        p.error(f"--weights {a.weights}: no such file or folder")
    if not os.path.isdir(os.path.dirname(os.path.abspath(a.out))):
        p.error(f"--out {a.out}: its folder does not exist")
    return a


def torch_export(module, images, out, opset, output_names):
    """torch.onnx.export's TorchScript exporter: one self-contained file, no onnxscript needed."""
    import torch

    with warnings.catch_warnings():
        # Chosen deliberately (see the module docstring); fixed shapes make the tracer's
        # constants exact.
        warnings.filterwarnings("ignore", message="You are using the legacy TorchScript")
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        torch.onnx.export(module, (images,), out, dynamo=False, opset_version=opset,
                          input_names=["images"], output_names=output_names)


def build_retinanet(arch, num_classes, v2, norm_eps):
    """torchvision's RetinaNet as detforge builds it: frozen-BN ResNet, FPN on C3-C5, P6/P7
    from P5 (v1) or C5 (v2, which also has the GroupNorm head)."""
    from functools import partial

    import torch
    import torchvision
    from torchvision.models.detection.backbone_utils import _resnet_fpn_extractor
    from torchvision.models.detection.retinanet import RetinaNet, RetinaNetHead
    from torchvision.ops import misc
    from torchvision.ops.feature_pyramid_network import LastLevelP6P7

    body = torchvision.models.__dict__[arch](
        weights=None, norm_layer=partial(misc.FrozenBatchNorm2d, eps=norm_eps))
    c5 = 512 if arch in ("resnet18", "resnet34") else 2048
    extra = LastLevelP6P7(c5, 256) if v2 else LastLevelP6P7(256, 256)
    backbone = _resnet_fpn_extractor(body, 3, returned_layers=[2, 3, 4], extra_blocks=extra)
    head = None
    if v2:
        head = RetinaNetHead(256, 9, num_classes, norm_layer=partial(torch.nn.GroupNorm, 32))
    return RetinaNet(backbone, num_classes, head=head)


def export_retinanet(a):
    import torch
    from torchvision.models.detection.image_list import ImageList
    from torchvision.ops import boxes as box_ops

    model = build_retinanet(a.arch, a.num_classes, a.v2 == 1, a.norm_eps).eval()
    state = torch.load(a.weights, map_location="cpu", weights_only=True)
    check_state_dict(model, state, f"--weights {a.weights} does not fit torchvision's RetinaNet "
                     f"(arch={a.arch}, num_classes={a.num_classes}, v2={a.v2})")
    model.load_state_dict(state)
    size = (a.height, a.width)

    class RetinaNetRaw(torch.nn.Module):
        """Backbone + head, anchors decoded and clipped; no score threshold, top-k or NMS."""

        def __init__(self):
            super().__init__()
            self.backbone, self.head, self.box_coder = model.backbone, model.head, model.box_coder
            # The anchors of one HxW image, computed once as torchvision computes them; they
            # become a constant of the graph.
            with torch.no_grad():
                probe = torch.zeros(1, 3, *size)
                features = list(model.backbone(probe).values())
                anchors = model.anchor_generator(ImageList(probe, [size]), features)[0]
            self.register_buffer("anchors", anchors)

        def forward(self, images):
            out = self.head(list(self.backbone(images).values()))
            codes = out["bbox_regression"].reshape(-1, 4)
            boxes = self.box_coder.decode_single(codes, self.anchors.repeat(a.batch, 1))
            boxes = box_ops.clip_boxes_to_image(boxes, size)
            return boxes.reshape(a.batch, -1, 4), out["cls_logits"].sigmoid()

    images = torch.zeros(a.batch, 3, a.height, a.width)
    torch_export(RetinaNetRaw().eval(), images, a.out, a.opset, ["boxes", "scores"])


def export_rtdetr(a):
    import torch
    from transformers import RTDetrV2ForObjectDetection

    if not os.path.isdir(a.weights):
        raise UsageError(f"--family rtdetr: --weights {a.weights} must be the folder "
                         "`detforge export --format hf` writes (config.json, model.safetensors)")
    model, info = RTDetrV2ForObjectDetection.from_pretrained(a.weights, output_loading_info=True)
    problems = {k: sorted(map(str, v))[:3] for k, v in info.items() if v}
    if problems:
        raise UsageError(f"--weights {a.weights}: from_pretrained did not load every weight "
                         f"(first of each: {problems})")
    model = model.float().eval()

    class RTDetrRaw(torch.nn.Module):
        """The decoder's last-layer class logits and boxes; no top-k or thresholding."""

        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, images):
            out = self.model(pixel_values=images)
            return out.logits, out.pred_boxes

    images = torch.zeros(a.batch, 3, a.height, a.width)
    with torch.no_grad():
        torch_export(RTDetrRaw().eval(), images, a.out, a.opset, ["logits", "pred_boxes"])


def export_yolo(a):
    from ultralytics import YOLO

    # The exporter writes next to its input, so work on a copy.
    pt = os.path.join(a.tmp, "model.pt")
    shutil.copyfile(a.weights, pt)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="You are using the legacy TorchScript")
        f = YOLO(pt, task="detect").export(
            format="onnx", imgsz=(a.height, a.width), batch=a.batch, opset=a.opset,
            simplify=False, dynamic=False, nms=False, half=False, device="cpu")
    shutil.move(f, a.out)


def export_rfdetr(a):
    import torch
    from rfdetr import RFDETRNano, RFDETRSmall

    model = {"nano": RFDETRNano, "small": RFDETRSmall}[a.size](
        pretrain_weights=None, device="cpu", num_classes=a.num_classes)
    net = model.model.model
    state = torch.load(a.weights, map_location="cpu", weights_only=True)
    check_state_dict(net, state, f"--weights {a.weights} does not fit rfdetr's RFDETR"
                     f"{a.size.capitalize()} (num_classes={a.num_classes})")
    net.load_state_dict(state)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="You are using the legacy TorchScript")
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        f = model.export(output_dir=os.path.join(a.tmp, "rfdetr"), shape=(a.height, a.width),
                         batch_size=a.batch, opset_version=a.opset, verbose=False)
    shutil.move(str(f), a.out)


EXPORTERS = {"retinanet": export_retinanet, "rfdetr": export_rfdetr, "rtdetr": export_rtdetr,
             "yolo": export_yolo}
INPUT = {"rfdetr": "input"}
OUTPUTS = {"retinanet": ["boxes", "scores"], "rfdetr": ["dets", "labels"],
           "rtdetr": ["logits", "pred_boxes"], "yolo": ["output0"]}


def summarise(a):
    """Checks the file and its interface; returns the one-line summary."""
    import onnx

    try:
        onnx.checker.check_model(a.out)
    except onnx.checker.ValidationError as e:
        raise ExportError(f"{a.out}: onnx.checker: {e}") from e
    m = onnx.load(a.out, load_external_data=False)

    def shape(v):
        dims = [d.dim_value if d.HasField("dim_value") else d.dim_param
                for d in v.type.tensor_type.shape.dim]
        return "[" + ", ".join(str(d) for d in dims) + "]", dims

    inputs = [(v.name, *shape(v)) for v in m.graph.input]
    outputs = [(v.name, *shape(v)) for v in m.graph.output]
    want = [a.batch, 3, a.height, a.width]
    name = INPUT.get(a.family, "images")
    if [(n, d) for n, _, d in inputs] != [(name, want)]:
        raise ExportError(f"{a.out}: inputs {[(n, s) for n, s, _ in inputs]}, expected "
                          f"{name} {want}")
    if [n for n, _, _ in outputs] != OUTPUTS[a.family]:
        raise ExportError(f"{a.out}: outputs {[n for n, _, _ in outputs]}, expected "
                          f"{OUTPUTS[a.family]}")
    opset = next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))
    mb = os.path.getsize(a.out) / 1e6
    outs = ", ".join(f"{n} {s}" for n, s, _ in outputs)
    return (f"onnx_export: {a.family} images {inputs[0][1]} -> {outs}; opset {opset}; "
            f"{mb:.1f} MB -> {a.out}")


def quiet_and_offline(family, tmp):
    """Set before the libraries are imported: no network, no files outside TMP, no progress
    bars or banners (errors still raise)."""
    if family == "yolo":
        # Online, Ultralytics checks for updates and may pip-install missing requirements.
        os.environ["YOLO_OFFLINE"] = "1"
        os.environ.setdefault("YOLO_CONFIG_DIR", tmp)
        os.environ.setdefault("YOLO_VERBOSE", "false")
    elif family == "rfdetr":
        os.environ.setdefault("YOLO_CONFIG_DIR", tmp)
        os.environ["HF_HUB_OFFLINE"] = "1"
    elif family == "rtdetr":
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def main(argv):
    a = parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        a.tmp = tmp
        quiet_and_offline(a.family, tmp)
        require(a.family)
        try:
            EXPORTERS[a.family](a)
            print(summarise(a))
        except UsageError as e:
            print(f"onnx_export: {e}", file=sys.stderr)
            return 2
        except ExportError as e:
            print(f"onnx_export: {e}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
