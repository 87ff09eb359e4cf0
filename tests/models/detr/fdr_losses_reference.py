"""transformers' D-FINE localisation losses (DFineLoss.loss_local, loss_d_fine.py) for
detforge's FDR loss test.

Usage: fdr_losses_reference.py OUT_DIR. With DFineConfig's defaults (32 bins, reg_scale 4,
up 0.5) and 3 classes, scores one output set of 2 images x 12 queries against 3 and
2 target boxes with given matches (one target far outside its query's initial box, so that
distances fall past both ends of the weighting function), and writes OUT_DIR/losses.safetensors.
The edge logits are float64; the boxes float32, as translate_gt computes the bin targets in
float32 whatever its input (it fails on float64 boxes).
  corners, initial, boxes, teacher_corners, teacher_logits   the set and the teacher;
  image, query, target_boxes   the matched pairs, flattened in image order (cxcywh targets);
  bins.index, bins.weight_right, bins.weight_left   bbox2distance of the matched pairs;
  fgl, ddf     loss_fgl and loss_ddf (num_boxes 5);
  grad         the gradient of fgl + 0.7 ddf with respect to corners;
  self_ddf     loss_ddf with the set as its own teacher (0).
"""
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import DFineConfig
from transformers.image_transforms import center_to_corners_format
from transformers.loss.loss_d_fine import DFineLoss, bbox2distance


def main():
    os.makedirs(sys.argv[1], exist_ok=True)
    torch.manual_seed(0)
    config = DFineConfig(num_labels=3)
    loss = DFineLoss(config)
    bins = config.max_num_bins + 1
    b, t = 2, 12
    centres = torch.rand(b, t, 2) * 0.6 + 0.2
    sizes = torch.rand(b, t, 2) * 0.35 + 0.05
    initial = torch.cat([centres, sizes], -1)
    initial[0, 7, 2:] = 0.02  # a tiny initial box matched to a large target below
    boxes = (initial + torch.randn_like(initial) * 0.02).clamp(0.01, 0.99)
    corners = (torch.randn(b, t, 4 * bins, dtype=torch.float64) * 2).requires_grad_(True)
    teacher_corners = torch.randn(b, t, 4 * bins, dtype=torch.float64) * 2
    teacher_logits = torch.randn(b, t, 3, dtype=torch.float64)
    targets = [
        {"boxes": torch.tensor([[0.3, 0.4, 0.2, 0.3], [0.6, 0.5, 0.3, 0.2], [0.5, 0.5, 0.8, 0.9]],
                               ), "class_labels": torch.tensor([0, 2, 1])},
        {"boxes": torch.tensor([[0.7, 0.3, 0.1, 0.1], [0.4, 0.6, 0.25, 0.3]]),
         "class_labels": torch.tensor([1, 1])},
    ]
    indices = [(torch.tensor([3, 7, 1]), torch.tensor([0, 2, 1])),
               (torch.tensor([5, 0]), torch.tensor([1, 0]))]
    with torch.no_grad():  # matched predictions near their targets: IoU weights well above 0
        for i, (src, tgt) in enumerate(indices):
            boxes[i, src] = targets[i]["boxes"][tgt] + torch.randn(len(src), 4) * 0.02
    outputs = {"pred_corners": corners, "ref_points": initial, "pred_boxes": boxes,
               "teacher_corners": teacher_corners, "teacher_logits": teacher_logits}
    losses = loss.loss_local(outputs, targets, indices, 5)
    (losses["loss_fgl"] + 0.7 * losses["loss_ddf"]).backward()
    image = torch.cat([torch.full_like(s, i) for i, (s, _) in enumerate(indices)])
    query = torch.cat([s for s, _ in indices])
    target_boxes = torch.cat([tg["boxes"][j] for tg, (_, j) in zip(targets, indices)])
    index, right, left = bbox2distance(initial[image, query], center_to_corners_format(target_boxes),
                                       config.max_num_bins, config.reg_scale, loss.up)
    own = dict(outputs, pred_corners=corners.detach(), teacher_corners=corners.detach())
    out = {"corners": corners.detach(), "initial": initial, "boxes": boxes,
           "teacher_corners": teacher_corners, "teacher_logits": teacher_logits,
           "image": image, "query": query, "target_boxes": target_boxes,
           "bins.index": index, "bins.weight_right": right, "bins.weight_left": left,
           "fgl": losses["loss_fgl"].detach().reshape(1), "ddf": losses["loss_ddf"].detach().reshape(1),
           "grad": corners.grad,
           "self_ddf": loss.loss_local(own, targets, indices, 5)["loss_ddf"].detach().reshape(1)}
    assert (index == 0).any() and (index > config.max_num_bins - 1).any(), "no distance past an end"
    save_file({k: v.contiguous() for k, v in out.items()}, os.path.join(sys.argv[1], "losses.safetensors"))


if __name__ == "__main__":
    main()
