"""transformers' RTDetrHungarianMatcher on several output sets of one batch, the reference for
detforge's ops::match_sets. Usage: set_matcher_reference.py OUT_DIR (writes OUT_DIR/ref.pth)

Sets of 10, 10, 6 and 3 queries (the last fewer than an image's targets), 5 classes, a batch of
three images with 4, 0 and 7 boxes; each set is matched on its own by the reference.
"""
import os
import sys
from types import SimpleNamespace

import torch
from transformers.loss.loss_rt_detr import RTDetrHungarianMatcher


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    g = torch.Generator().manual_seed(0)
    config = SimpleNamespace(matcher_class_cost=2.0, matcher_bbox_cost=5.0, matcher_giou_cost=2.0,
                             use_focal_loss=True, matcher_alpha=0.25, matcher_gamma=2.0)
    matcher = RTDetrHungarianMatcher(config)

    def boxes(*shape):
        centre = torch.rand(*shape, 2, generator=g) * 0.6 + 0.2
        size = torch.rand(*shape, 2, generator=g) * 0.45 + 0.05
        return torch.cat([centre, size], -1)

    out = {}
    targets = []
    for i, n in enumerate([4, 0, 7]):
        t = {"class_labels": torch.randint(0, 5, (n,), generator=g), "boxes": boxes(n)}
        out[f"labels_{i}"], out[f"boxes_{i}"] = t["class_labels"], t["boxes"]
        targets.append(t)
    for s, q in enumerate([10, 10, 6, 3]):
        logits = torch.randn(3, q, 5, generator=g) * 2
        pred = boxes(3, q)
        out[f"set_{s}_logits"], out[f"set_{s}_boxes"] = logits, pred
        for i, (rows, cols) in enumerate(matcher({"logits": logits, "pred_boxes": pred}, targets)):
            out[f"set_{s}_queries_{i}"], out[f"set_{s}_targets_{i}"] = rows, cols
    torch.save(out, os.path.join(out_dir, "ref.pth"))


if __name__ == "__main__":
    main()
