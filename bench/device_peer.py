"""The peer of `detforge bench model --device D` (or --model retinanet_x50_mlperf): torchvision.

Times torchvision's RetinaNet train step (forward + losses under autocast + backward, device
synchronised around the timed steps) with a FrozenBatchNorm2d ARCH backbone, 3 trainable stages
and P6/P7, in fp32, bf16 autocast and channels_last, with peak device memory per row.

argv: INPUTS DEVICE ARCH CLASSES ITERS WARMUP OUT. INPUTS is a state dict (images, boxes_i,
labels_i); ARCH a torchvision.models name (resnet50, resnext50_32x4d); OUT gets
{"fp32" | "bf16" | "fp32_cl" | "bf16_cl": {"step_s", "peak_mib"}}.
"""
import json, sys
import torch, torchvision
from torchvision.models.detection.backbone_utils import _resnet_fpn_extractor
from torchvision.models.detection.image_list import ImageList
from torchvision.models.detection.retinanet import RetinaNet
from torchvision.ops import misc
from torchvision.ops.feature_pyramid_network import LastLevelP6P7

from peer_timing import timed

inputs, device, arch, classes, iters, warmup, out = sys.argv[1:8]
classes, iters, warmup = int(classes), int(iters), int(warmup)
dev = torch.device(device)
data = torch.load(inputs, weights_only=True)
images = data["images"].to(dev)
b = images.size(0)
targets = [{"boxes": data[f"boxes_{i}"].to(dev), "labels": data[f"labels_{i}"].to(dev)} for i in range(b)]
body = getattr(torchvision.models, arch)(weights=None, norm_layer=misc.FrozenBatchNorm2d)
backbone = _resnet_fpn_extractor(body, 3, returned_layers=[2, 3, 4], extra_blocks=LastLevelP6P7(256, 256))
model = RetinaNet(backbone, classes).to(dev).train()
sizes = [tuple(images.shape[-2:])] * b

res = {}
for name, bf16, channels_last in [("fp32", False, False), ("bf16", True, False),
                                  ("fp32_cl", False, True), ("bf16_cl", True, True)]:
    x = images.contiguous(memory_format=torch.channels_last) if channels_last else images

    def step():
        model.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16):
            feats = list(model.backbone(x).values())
            head = model.head(feats)
            anchors = model.anchor_generator(ImageList(x, sizes), feats)
            losses = model.compute_loss(targets, head, anchors)
        sum(losses.values()).backward()

    s, peak = timed(step, dev, iters, warmup)
    res[name] = {"step_s": s, "peak_mib": peak}
json.dump(res, open(out, "w"))
