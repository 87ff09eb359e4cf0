"""The peer of `detforge bench model` (--model retinanet_r50_fpn, on the CPU): torchvision.

Times torchvision's RetinaNet train step (backbone, head, anchors, compute_loss, backward; no input
transform) with a FrozenBatchNorm2d ResNet-50, 3 trainable stages, P6/P7 and 91 classes, then
class-aware batched_nms (IoU 0.5) on 1000 and 5000 boxes, on the tensors detforge saved.

argv: INPUTS OUT THREADS ITERS WARMUP NMS_REPEAT. INPUTS is a state dict (images, boxes_i,
labels_i, nms{1000,5000}_{boxes,scores,classes}); OUT gets {"step_s", "images_per_s",
"nms1000_ms", "nms1000_kept", "nms5000_ms", "nms5000_kept"}.
"""
import json, sys, time
import torch, torchvision
from torchvision.models.detection.backbone_utils import _resnet_fpn_extractor
from torchvision.models.detection.image_list import ImageList
from torchvision.models.detection.retinanet import RetinaNet
from torchvision.ops import misc, batched_nms
from torchvision.ops.feature_pyramid_network import LastLevelP6P7

inputs, out, threads, iters, warmup, nms_repeat = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:7])
torch.set_num_threads(threads)
data = torch.load(inputs, weights_only=True)
images = data["images"]
b = images.size(0)
targets = [{"boxes": data[f"boxes_{i}"], "labels": data[f"labels_{i}"]} for i in range(b)]
body = torchvision.models.resnet50(weights=None, norm_layer=misc.FrozenBatchNorm2d)
backbone = _resnet_fpn_extractor(body, 3, returned_layers=[2, 3, 4], extra_blocks=LastLevelP6P7(256, 256))
model = RetinaNet(backbone, 91)
model.train()
sizes = [tuple(images.shape[-2:])] * b

def step():
    model.zero_grad(set_to_none=True)
    feats = list(model.backbone(images).values())
    head = model.head(feats)
    anchors = model.anchor_generator(ImageList(images, sizes), feats)
    losses = model.compute_loss(targets, head, anchors)
    sum(losses.values()).backward()

for _ in range(warmup):
    step()
t0 = time.perf_counter()
for _ in range(iters):
    step()
step_s = (time.perf_counter() - t0) / iters
res = {"step_s": step_s, "images_per_s": b / step_s}
for n in (1000, 5000):
    bx, sc, cl = data[f"nms{n}_boxes"], data[f"nms{n}_scores"], data[f"nms{n}_classes"]
    batched_nms(bx, sc, cl, 0.5)
    t0 = time.perf_counter()
    for _ in range(nms_repeat):
        keep = batched_nms(bx, sc, cl, 0.5)
    res[f"nms{n}_ms"] = (time.perf_counter() - t0) / nms_repeat * 1e3
    res[f"nms{n}_kept"] = int(keep.numel())
json.dump(res, open(out, "w"))
