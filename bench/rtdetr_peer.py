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
import torch
from transformers import RTDetrResNetConfig, RTDetrV2Config, RTDetrV2ForObjectDetection
from transformers.models.rt_detr.image_processing_rt_detr import RTDetrImageProcessor

from peer_timing import detr_peer_args, write_train_infer

weights, iters, warmup, device, out, images, labels = detr_peer_args("class_labels")
b, size = images.size(0), images.size(-1)
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

write_train_infer(out, [model], train_step, infer, device, iters, warmup)
