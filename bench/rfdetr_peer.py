"""The peer of `detforge bench model --model rfdetr_nano`: rfdetr's RF-DETR-N.

Builds rfdetr's RFDETRNano (80 classes), loads detforge's exported weights strictly, and times
the train step (forward in training mode with its 13 query groups, rfdetr's own SetCriterion,
backward) and inference (forward + rfdetr's PostProcess) on detforge's inputs.

argv: INPUTS WEIGHTS THREADS ITERS WARMUP DEVICE OUT. INPUTS is a state dict (images, boxes_i as
normalised cxcywh, labels_i); WEIGHTS the model's state dict; DEVICE cpu or cuda:N (fp32,
synchronised around the timed calls); OUT gets {"train_s", "infer_s", "peak_rss_mb",
"train_peak_mib", "infer_peak_mib"} (seconds per batch; this process's peak RSS and each phase's
peak device memory in MiB, 0 on the CPU).
"""
import json, os, resource, sys, tempfile, warnings
os.environ.setdefault("YOLO_CONFIG_DIR", tempfile.mkdtemp())
warnings.filterwarnings("ignore")
import torch
from rfdetr import RFDETRNano
from rfdetr.config import TrainConfig
from rfdetr.models.lwdetr import build_criterion_from_config

from peer_timing import timed

inputs, weights = sys.argv[1:3]
threads, iters, warmup = map(int, sys.argv[3:6])
device = torch.device(sys.argv[6])
out = sys.argv[7]
torch.set_num_threads(threads)
data = torch.load(inputs, weights_only=True)
images = data["images"].to(device)
b, size = images.size(0), images.size(-1)
targets = [{"labels": data[f"labels_{i}"].to(device), "boxes": data[f"boxes_{i}"].to(device)}
           for i in range(b)]
rf = RFDETRNano(pretrain_weights=None, device="cpu", num_classes=80)
model = rf.model.model
model.load_state_dict(torch.load(weights, weights_only=True), strict=True)
model.to(device)
criterion, postprocess = build_criterion_from_config(rf.model_config,
                                                     TrainConfig(dataset_dir=tempfile.mkdtemp()))
sizes = torch.tensor([[size, size]] * b, device=device)

def train_step():
    model.zero_grad(set_to_none=True)
    terms = criterion(model(images), targets)
    sum(terms[k] * w for k, w in criterion.weight_dict.items() if k in terms).backward()

def infer():
    with torch.no_grad():
        postprocess(model(images), sizes)

res = {}
for name, mode, fn in (("train", True, train_step), ("infer", False, infer)):
    model.train(mode)
    criterion.train(mode)
    res[name + "_s"], res[name + "_peak_mib"] = timed(fn, device, iters, warmup)
res["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
json.dump(res, open(out, "w"))
