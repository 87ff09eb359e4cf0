"""The peer of `detforge bench model --model rtdetr_r18vd`: transformers' RT-DETRv2 detector.

Builds RT-DETRv2 r18vd (hidden_expansion 0.5, 3 decoder layers, 80 classes), loads detforge's
exported weights strictly, and times the train step (forward with labels, loss, backward) and
inference (forward + RTDetrImageProcessor.post_process_object_detection) on detforge's inputs.

argv: INPUTS WEIGHTS THREADS ITERS WARMUP DEVICE OUT. INPUTS is a state dict (images, boxes_i as
normalised cxcywh, labels_i); WEIGHTS the model's state dict; DEVICE cpu or cuda:N (fp32,
synchronised around the timed calls); OUT gets {"train_s", "infer_s", "peak_rss_mb",
"train_peak_mib", "infer_peak_mib"} (seconds per batch; this process's peak RSS and each phase's
peak device memory in MiB, 0 on the CPU).
"""
import json, resource, sys
import torch
from transformers import RTDetrResNetConfig, RTDetrV2Config, RTDetrV2ForObjectDetection
from transformers.models.rt_detr.image_processing_rt_detr import RTDetrImageProcessor

from peer_timing import timed

inputs, weights = sys.argv[1:3]
threads, iters, warmup = map(int, sys.argv[3:6])
device = torch.device(sys.argv[6])
out = sys.argv[7]
torch.set_num_threads(threads)
data = torch.load(inputs, weights_only=True)
images = data["images"].to(device)
b, size = images.size(0), images.size(-1)
labels = [{"class_labels": data[f"labels_{i}"].to(device), "boxes": data[f"boxes_{i}"].to(device)}
          for i in range(b)]
backbone = RTDetrResNetConfig(layer_type="basic", depths=[2, 2, 2, 2], hidden_sizes=[64, 128, 256, 512],
                              out_features=["stage2", "stage3", "stage4"])
config = RTDetrV2Config(backbone_config=backbone, encoder_in_channels=[128, 256, 512],
                        hidden_expansion=0.5, decoder_layers=3, num_labels=80)
model = RTDetrV2ForObjectDetection(config)
model.load_state_dict(torch.load(weights, weights_only=True), strict=True)
model.to(device)
processor = RTDetrImageProcessor()

def train_step():
    model.zero_grad(set_to_none=True)
    model(pixel_values=images, labels=labels).loss.backward()

def infer():
    with torch.no_grad():
        o = model(pixel_values=images)
        processor.post_process_object_detection(o, threshold=0.0, target_sizes=[(size, size)] * b)

res = {}
for name, mode, fn in (("train", True, train_step), ("infer", False, infer)):
    model.train(mode)
    res[name + "_s"], res[name + "_peak_mib"] = timed(fn, device, iters, warmup)
res["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
json.dump(res, open(out, "w"))
