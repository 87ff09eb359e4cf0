"""torch / torchvision reference values for detforge's loss tests. Usage: losses_reference.py OUT.pth"""
import sys

import torch
import torch.nn.functional as F
from torchvision.ops import generalized_box_iou_loss, sigmoid_focal_loss


def main():
    g = torch.Generator().manual_seed(0)
    out = {}
    logits = torch.randn(300, 7, generator=g) * 3
    targets = (torch.rand(300, 7, generator=g) < 0.1).float()
    out["focal_logits"], out["focal_targets"] = logits, targets
    out["focal_none"] = sigmoid_focal_loss(logits, targets, reduction="none")
    out["focal_sum"] = sigmoid_focal_loss(logits, targets, reduction="sum")
    out["focal_mean_a05_g1"] = sigmoid_focal_loss(logits, targets, alpha=0.5, gamma=1.0, reduction="mean")
    out["focal_sum_noalpha"] = sigmoid_focal_loss(logits, targets, alpha=-1, reduction="sum")
    # model.loss.class_weights: the positive terms of class k weigh cw[k] (MMDetection's sigmoid
    # class_weight rule), composed here from torchvision's elementwise loss.
    cw = torch.tensor([0.5, 2.0, 1.0, 0.0, 3.0, 1.5, 0.25])
    out["focal_cw"] = cw
    out["focal_none_cw"] = out["focal_none"] * (1 + (cw - 1) * targets)

    # The detection form: [B, A, K] logits, labels (-1 = background), per-anchor weights (0 = ignored).
    x = torch.randn(2, 400, 7, generator=g) * 4
    labels = torch.randint(-1, 7, (2, 400), generator=g)
    weight = torch.rand(2, 400, generator=g) * (torch.rand(2, 400, generator=g) > 0.2)
    onehot = torch.zeros(2, 400, 7)
    fg = labels >= 0
    onehot[fg.nonzero(as_tuple=True) + (labels[fg],)] = 1.0
    out["fused_logits"], out["fused_labels"], out["fused_weight"] = x, labels, weight
    for name, alpha, gamma, cw_scale in (("", 0.25, 2.0, False), ("_noalpha_g15", -1, 1.5, False),
                                         ("_cw", 0.25, 2.0, True)):
        xg = x.clone().requires_grad_(True)
        elementwise = sigmoid_focal_loss(xg, onehot, alpha=alpha, gamma=gamma, reduction="none")
        if cw_scale:
            elementwise = elementwise * (1 + (cw - 1) * onehot)
        loss = (elementwise.sum(2) * weight).sum()
        loss.backward()
        out["fused_loss" + name], out["fused_grad" + name] = loss.detach(), xg.grad

    pred, tgt = torch.randn(50, 4, generator=g), torch.randn(50, 4, generator=g)
    out["reg_pred"], out["reg_target"] = pred, tgt
    out["l1_sum"] = F.l1_loss(pred, tgt, reduction="sum")
    out["smooth_l1_sum"] = F.smooth_l1_loss(pred, tgt, reduction="sum", beta=1.0)
    out["smooth_l1_sum_b011"] = F.smooth_l1_loss(pred, tgt, reduction="sum", beta=0.11)

    xy = torch.rand(40, 2, generator=g) * 100
    b1 = torch.cat([xy, xy + torch.rand(40, 2, generator=g) * 50 + 1], 1)
    b2 = b1 + torch.randn(40, 4, generator=g) * 10
    b2[:, 2:] = torch.maximum(b2[:, 2:], b2[:, :2] + 1)
    b2[0] = torch.tensor([500.0, 500.0, 510.0, 510.0])  # disjoint: GIoU < 0
    out["giou_a"], out["giou_b"] = b1, b2
    out["giou_none"] = generalized_box_iou_loss(b1, b2, reduction="none")
    torch.save(out, sys.argv[1])


if __name__ == "__main__":
    main()
