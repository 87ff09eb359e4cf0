"""RF-DETR's whole network and loss (rfdetr's RFDETRNano, 3 classes) on random weights, for
tests/models/rfdetr/rfdetr_test.cpp. Usage: model_reference.py OUT.pth

Builds RFDETRNano without pretrained weights (no network) and perturbs every norm, bias, query,
reference offset and head so that each one matters, then saves {"state.<key>": its state dict,
"x.<case>": inputs, "<case>.<output>": outputs}:
  eval:  one 384x384 image in eval mode: pred_logits, pred_boxes, aux0_logits, aux0_boxes,
         enc_logits, enc_boxes (300 queries);
  train: two 320x448 images in training mode (13 query groups, 3900 queries), in float64 (in
         float32, scores a few ulps apart among a group's 560 proposals trade places in its
         top-300 with the thread count and the order of operations): the same
         outputs, targets <i>.labels / <i>.boxes, the weighted loss terms "loss.<key>" of rfdetr's
         SetCriterion (IoU-aware BCE, L1, GIoU; _0 and _enc), and the gradients "grad.<key>" of
         their sum for parameters of every part (GRADS);
  small: one 224x224 image in training mode (196 locations, fewer than the 300 queries) and no
         boxes, in float64: outputs and loss terms.
"""
import os
import sys
import tempfile

os.environ.setdefault("YOLO_CONFIG_DIR", tempfile.mkdtemp())
import torch
from rfdetr import RFDETRNano
from rfdetr.config import TrainConfig
from rfdetr.models.lwdetr import build_criterion_from_config

# Every part: the ViT's embeddings (the position table is resampled to the 20 x 28 grid), windowed
# blocks 0, 7 and 11 and global block 3, its final norm; the projector; both decoder layers and
# what they share; the queries; the two-stage heads of groups 0, 5 and 12; the shared heads.
VIT = "backbone.0.encoder.encoder."
GRADS = [VIT + "embeddings.position_embeddings", VIT + "embeddings.cls_token",
         VIT + "embeddings.patch_embeddings.projection.weight",
         VIT + "encoder.layer.0.attention.attention.query.weight",
         VIT + "encoder.layer.0.norm1.weight",
         VIT + "encoder.layer.3.attention.attention.key.weight",
         VIT + "encoder.layer.3.mlp.fc1.weight", VIT + "encoder.layer.7.layer_scale1.lambda1",
         VIT + "encoder.layer.7.attention.output.dense.bias",
         VIT + "encoder.layer.11.mlp.fc2.weight", VIT + "layernorm.weight",
         "backbone.0.projector.stages.0.0.cv1.conv.weight",
         "backbone.0.projector.stages.0.0.m.0.cv2.conv.weight",
         "backbone.0.projector.stages.0.0.cv2.conv.weight",
         "backbone.0.projector.stages.0.0.cv2.bn.weight", "backbone.0.projector.stages.0.1.bias",
         "transformer.decoder.layers.0.self_attn.in_proj_weight",
         "transformer.decoder.layers.0.cross_attn.sampling_offsets.weight",
         "transformer.decoder.layers.0.cross_attn.attention_weights.bias",
         "transformer.decoder.layers.0.linear1.weight",
         "transformer.decoder.layers.1.self_attn.out_proj.weight",
         "transformer.decoder.layers.1.cross_attn.sampling_offsets.weight",
         "transformer.decoder.layers.1.cross_attn.value_proj.weight",
         "transformer.decoder.layers.1.norm3.weight", "transformer.decoder.norm.weight",
         "transformer.decoder.ref_point_head.layers.0.weight", "query_feat.weight",
         "refpoint_embed.weight", "transformer.enc_output.0.weight",
         "transformer.enc_output_norm.5.weight", "transformer.enc_out_class_embed.0.weight",
         "transformer.enc_out_class_embed.5.bias", "transformer.enc_out_class_embed.12.weight",
         "transformer.enc_out_bbox_embed.0.layers.0.weight",
         "transformer.enc_out_bbox_embed.12.layers.2.bias", "class_embed.weight",
         "class_embed.bias", "bbox_embed.layers.0.weight", "bbox_embed.layers.2.weight"]


def perturb(net):
    with torch.no_grad():
        for name, p in net.named_parameters():
            if "class_embed" in name:
                p.normal_(-2.0 if name.endswith("bias") else 0.0, 0.1)
            elif "bbox_embed" in name or name.startswith("refpoint_embed"):
                p.add_(0.05 * torch.randn_like(p))
            elif p.dim() == 1 or "token" in name or "position" in name:
                p.add_(0.1 * torch.randn_like(p))


def outputs(prefix, out, result):
    result[f"{prefix}.pred_logits"] = out["pred_logits"]
    result[f"{prefix}.pred_boxes"] = out["pred_boxes"]
    result[f"{prefix}.aux0_logits"] = out["aux_outputs"][0]["pred_logits"]
    result[f"{prefix}.aux0_boxes"] = out["aux_outputs"][0]["pred_boxes"]
    result[f"{prefix}.enc_logits"] = out["enc_outputs"]["pred_logits"]
    result[f"{prefix}.enc_boxes"] = out["enc_outputs"]["pred_boxes"]


def losses(prefix, criterion, out, targets, result):
    terms = criterion(out, targets)
    total = 0
    for key, weight in criterion.weight_dict.items():
        if key in terms:
            result[f"{prefix}.loss.{key}"] = (terms[key] * weight).detach()
            total = total + terms[key] * weight
    return total


def main():
    torch.manual_seed(0)
    model = RFDETRNano(pretrain_weights=None, device="cpu", num_classes=3)
    net = model.model.model
    perturb(net)
    criterion, _ = build_criterion_from_config(model.model_config,
                                               TrainConfig(dataset_dir=tempfile.mkdtemp()))
    result = {f"state.{k}": v.clone() for k, v in net.state_dict().items()}
    x = torch.randn(1, 3, 384, 384)
    result["x.eval"] = x
    net.eval()
    with torch.no_grad():
        outputs("eval", net(x), result)

    net.train().double()
    criterion.train()
    x = torch.randn(2, 3, 320, 448, dtype=torch.float64)
    result["x.train"] = x
    targets = [{"labels": torch.tensor([0, 2, 1, 2]),
                "boxes": torch.tensor([[0.3, 0.4, 0.2, 0.3], [0.6, 0.5, 0.1, 0.1],
                                       [0.5, 0.5, 0.8, 0.9], [0.2, 0.8, 0.05, 0.1]],
                                      dtype=torch.float64)},
               {"labels": torch.tensor([1, 1]),
                "boxes": torch.tensor([[0.7, 0.3, 0.3, 0.2], [0.25, 0.6, 0.15, 0.4]],
                                      dtype=torch.float64)}]
    for i, t in enumerate(targets):
        result[f"train.{i}.labels"] = t["labels"]
        result[f"train.{i}.boxes"] = t["boxes"]
    net.zero_grad()
    out = net(x)
    outputs("train", {k: (v.detach() if torch.is_tensor(v) else v) for k, v in out.items()},
            result)
    losses("train", criterion, out, targets, result).backward()
    params = dict(net.named_parameters())
    for name in GRADS:
        result[f"train.grad.{name}"] = params[name].grad.clone()

    x = torch.randn(1, 3, 224, 224, dtype=torch.float64)
    result["x.small"] = x
    empty = [{"labels": torch.zeros(0, dtype=torch.int64),
              "boxes": torch.zeros(0, 4, dtype=torch.float64)}]
    with torch.no_grad():
        out = net(x)
        outputs("small", out, result)
        losses("small", criterion, out, empty, result)
    torch.save({k: (v.detach().contiguous() if torch.is_tensor(v) else v)
                for k, v in result.items()}, sys.argv[1])


if __name__ == "__main__":
    main()
