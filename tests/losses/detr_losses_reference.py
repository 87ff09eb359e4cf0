"""Reference values for detforge's DETR loss tests: transformers' RTDetrLoss.loss_labels_vfl,
an Ultralytics-style varifocal formula in plain torch, and torch's weighted cross-entropy.
Usage: detr_losses_reference.py OUT.pth"""
import sys

import torch
import torch.nn.functional as F
from transformers import RTDetrV2Config
from transformers.loss.loss_rt_detr import RTDetrLoss

NUM_CLASSES = 5


def vfl_case(out, name, criterion, logits, pred_boxes, targets, indices):
    """Runs loss_labels_vfl with its gradient; saves the inputs in matched order for the C++ side."""
    x = logits.clone().requires_grad_(True)
    num_boxes = max(sum(len(t["class_labels"]) for t in targets), 1)  # RTDetrLoss.forward clamps to 1
    outputs = {"logits": x, "pred_boxes": pred_boxes}
    loss = criterion.loss_labels_vfl(outputs, targets, indices, num_boxes)["loss_vfl"]
    loss.backward()
    out[name + "_logits"], out[name + "_pred_boxes"] = logits, pred_boxes
    out[name + "_batch"] = torch.cat([torch.full_like(s, i) for i, (s, _) in enumerate(indices)])
    out[name + "_query"] = torch.cat([s for s, _ in indices])
    out[name + "_gt_boxes"] = torch.cat([t["boxes"][j] for t, (_, j) in zip(targets, indices)])
    out[name + "_labels"] = torch.cat([t["class_labels"][j] for t, (_, j) in zip(targets, indices)])
    out[name + "_num_boxes"] = torch.tensor(float(num_boxes))
    out[name + "_loss"], out[name + "_grad"] = loss.detach(), x.grad


def matched_batch(g, batch, queries):
    """cxcywh predictions, per-image targets near their matched prediction, and the matching.
    Image 0's last target is far from its prediction (IoU 0)."""
    pred_boxes = torch.cat([torch.rand(batch, queries, 2, generator=g) * 0.6 + 0.2,
                            torch.rand(batch, queries, 2, generator=g) * 0.35 + 0.05], dim=2)
    targets, indices = [], []
    for b, n in enumerate((3, 2)):
        src = torch.randperm(queries, generator=g)[:n]
        tgt = torch.randperm(n, generator=g)
        boxes = torch.zeros(n, 4)
        boxes[tgt] = pred_boxes[b, src] + torch.randn(n, 4, generator=g) * 0.03
        boxes[:, 2:] = boxes[:, 2:].clamp(min=0.02)
        if b == 0:
            boxes[tgt[-1]] = pred_boxes[b, src[-1]] + torch.tensor([0.5, 0.5, 0.0, 0.0])
            boxes[tgt[-1], :2] -= torch.where(boxes[tgt[-1], :2] > 1.0, 1.0, 0.0)
        labels = torch.randint(0, NUM_CLASSES, (n,), generator=g)
        targets.append({"class_labels": labels, "boxes": boxes})
        indices.append((src, tgt))
    return pred_boxes, targets, indices


def varifocal(out, g):
    criterion = RTDetrLoss(RTDetrV2Config(num_labels=NUM_CLASSES))
    out["vfl_alpha"], out["vfl_gamma"] = torch.tensor(criterion.alpha), torch.tensor(criterion.gamma)
    out["rtdetr_eos_coef"] = torch.tensor(criterion.eos_coef)
    out["rtdetr_empty_weight"] = criterion.empty_weight.clone()  # a plain tensor, not the nn.Buffer
    batch, queries = 2, 12
    pred_boxes, targets, indices = matched_batch(g, batch, queries)
    logits = torch.randn(batch, queries, NUM_CLASSES, generator=g) * 3
    vfl_case(out, "vfl", criterion, logits, pred_boxes, targets, indices)

    # No boxes in any image: no matches, every target score 0, num_boxes clamped to 1.
    empty_targets = [{"class_labels": torch.zeros(0, dtype=torch.int64), "boxes": torch.zeros(0, 4)}] * batch
    no_match = [(torch.zeros(0, dtype=torch.int64), torch.zeros(0, dtype=torch.int64))] * batch
    vfl_case(out, "vfl_empty", criterion, torch.randn(batch, queries, NUM_CLASSES, generator=g) * 3,
             pred_boxes, empty_targets, no_match)

    # Saturated logits of both signs, including at the matched classes.
    signs = torch.randint(0, 2, (batch, queries, NUM_CLASSES), generator=g) * 2 - 1
    vfl_case(out, "vfl_extreme", criterion, signs * 50.0, pred_boxes, targets, indices)

    # Ultralytics' VarifocalLoss.forward, elementwise (before its mean(1).sum()).
    x = torch.randn(200, 7, generator=g) * 3
    label = (torch.rand(200, 7, generator=g) < 0.15).float()
    score = torch.rand(200, 7, generator=g) * label
    score[:5] = 0.0  # positives with IoU 0
    out["uvfl_logits"], out["uvfl_score"], out["uvfl_label"] = x, score, label
    for suffix, alpha, gamma in (("a075_g2", 0.75, 2.0), ("a05_g15", 0.5, 1.5)):
        weight = alpha * x.sigmoid().pow(gamma) * (1 - label) + score * label
        out["uvfl_none_" + suffix] = F.binary_cross_entropy_with_logits(x, score, reduction="none") * weight
    # model.loss.class_weights: the matched elements of class k weigh cw[k].
    cw = torch.tensor([1.0, 2.0, 0.5, 0.0, 4.0, 1.0, 3.0])
    out["uvfl_cw"] = cw
    out["uvfl_none_a075_g2_cw"] = out["uvfl_none_a075_g2"] * (1 + (cw - 1) * label)


def cross_entropy(out, g):
    c = 4
    logits = torch.randn(3, 20, c + 1, generator=g) * 2
    target = torch.where(torch.rand(3, 20, generator=g) < 0.4,
                         torch.randint(0, c, (3, 20), generator=g), torch.full((3, 20), c))
    ignored = torch.rand(3, 20, generator=g) < 0.15
    out["ce_logits"] = logits
    cases = (
        ("default", target.masked_fill(ignored, -100), torch.tensor([1.0] * c + [0.1]), -100),
        ("custom", target.masked_fill(ignored, -1), torch.tensor([0.5, 2.0, 1.0, 3.0, 0.25]), -1),
    )
    for name, t, weight, ignore_index in cases:
        x = logits.clone().requires_grad_(True)
        loss = F.cross_entropy(x.transpose(1, 2), t, weight, ignore_index=ignore_index)
        loss.backward()
        out["ce_target_" + name], out["ce_loss_" + name], out["ce_grad_" + name] = t, loss.detach(), x.grad


def main():
    g = torch.Generator().manual_seed(0)
    out = {}
    varifocal(out, g)
    cross_entropy(out, g)
    torch.save(out, sys.argv[1])


if __name__ == "__main__":
    main()
