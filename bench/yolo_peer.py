"""The peer of `detforge bench model --model yolov8n | yolov8s | yolo11n | yolo26n`: Ultralytics'
DetectionModel.

Builds MODEL.yaml (80 classes), loads detforge's exported weights strictly, and times the train
step (its criterion: v8DetectionLoss, or E2ELoss for YOLO26, with box 7.5, cls 0.5, dfl 1.5;
backward) and fused inference (YOLO26: its one-to-many head, predict()'s default;
non_max_suppression: conf 0.001, IoU 0.7, multi-label, max_det 300) on detforge's inputs.

argv: INPUTS WEIGHTS MODEL THREADS ITERS WARMUP DEVICE OUT. INPUTS is a state dict (images,
boxes_i as xyxy pixels, labels_i); WEIGHTS the model's state dict; MODEL yolov8n, yolo11n, ...;
DEVICE cpu or cuda:N (fp32, synchronised around the timed calls); OUT gets {"train_s", "infer_s", "peak_rss_mb",
"train_peak_mib", "infer_peak_mib"} (seconds per batch; this process's peak RSS and each phase's
peak device memory in MiB, 0 on the CPU).
"""
import json, os, resource, sys, tempfile, types
os.environ.setdefault("YOLO_CONFIG_DIR", tempfile.mkdtemp())
os.environ.setdefault("YOLO_OFFLINE", "1")
import torch
from ultralytics.nn.tasks import DetectionModel
from ultralytics.utils.nms import non_max_suppression

from peer_timing import timed

inputs, weights, name = sys.argv[1:4]
threads, iters, warmup = map(int, sys.argv[4:7])
device = torch.device(sys.argv[7])
out = sys.argv[8]
torch.set_num_threads(threads)
data = torch.load(inputs, weights_only=True)
images = data["images"].to(device)
b, size = images.size(0), images.size(-1)
rows = []
for i in range(b):
    for box, label in zip(data[f"boxes_{i}"].tolist(), data[f"labels_{i}"].tolist()):
        x1, y1, x2, y2 = (v / size for v in box)
        rows.append((i, label, (x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1))
batch = {"batch_idx": torch.tensor([r[0] for r in rows], dtype=torch.float32, device=device),
         "cls": torch.tensor([r[1] for r in rows], dtype=torch.float32, device=device).view(-1, 1),
         "bboxes": torch.tensor([r[2:] for r in rows], dtype=torch.float32, device=device)}
model = DetectionModel(f"{name}.yaml", nc=80, verbose=False)
model.args = types.SimpleNamespace(box=7.5, cls=0.5, dfl=1.5, epochs=100)
model.load_state_dict(torch.load(weights, weights_only=True), strict=True)
model.to(device)
criterion = model.init_criterion()

def train_step():
    model.zero_grad(set_to_none=True)
    loss, _ = criterion(model(images), batch)
    loss.sum().backward()

def infer():
    with torch.no_grad():
        y, _ = model(images)
        non_max_suppression(y, conf_thres=0.001, iou_thres=0.7, multi_label=True, max_det=300)

res = {}
model.train()
res["train_s"], res["train_peak_mib"] = timed(train_step, device, iters, warmup)
model.eval()
model.fuse(verbose=False)
res["infer_s"], res["infer_peak_mib"] = timed(infer, device, iters, warmup)
res["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
json.dump(res, open(out, "w"))
