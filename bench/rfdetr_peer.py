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
import os, tempfile, warnings
os.environ.setdefault("YOLO_CONFIG_DIR", tempfile.mkdtemp())
warnings.filterwarnings("ignore")
import torch
from rfdetr import RFDETRNano
from rfdetr.config import TrainConfig
from rfdetr.models.lwdetr import build_criterion_from_config

from peer_timing import detr_peer_args, write_train_infer

weights, iters, warmup, device, out, images, targets = detr_peer_args("labels")
b, size = images.size(0), images.size(-1)
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

write_train_infer(out, [model, criterion], train_step, infer, device, iters, warmup)
