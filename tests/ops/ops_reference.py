"""torchvision reference values for detforge's ops tests. Usage: ops_reference.py OUT.pth"""
import math
import sys

import torch
from torchvision.models.detection import _utils as det_utils
from torchvision.models.detection.anchor_utils import AnchorGenerator
from torchvision.models.detection.image_list import ImageList
from torchvision.ops import box_iou, batched_nms, generalized_box_iou, nms


def boxes(g, n, extent=200.0, max_side=60.0):
    xy = torch.rand(n, 2, generator=g) * extent
    wh = torch.rand(n, 2, generator=g) * max_side + 1.0
    return torch.cat([xy, xy + wh], 1)


def main():
    g = torch.Generator().manual_seed(0)
    out = {}
    a, b = boxes(g, 50), boxes(g, 70)
    b[3] = a[5]  # an exact duplicate: IoU 1
    out["iou_a"], out["iou_b"] = a, b
    out["iou"] = box_iou(a, b)
    out["giou"] = generalized_box_iou(a, b)

    coder = det_utils.BoxCoder((1.0, 1.0, 1.0, 1.0))
    anchors, gt = boxes(g, 40), boxes(g, 40)
    out["coder_anchors"], out["coder_gt"] = anchors, gt
    out["coder_encoded"] = coder.encode_single(gt, anchors)
    deltas = torch.randn(40, 4, generator=g)
    deltas[0, 2] = 20.0  # beyond the clamp log(1000/16)
    out["coder_deltas"] = deltas
    out["coder_decoded"] = coder.decode_single(deltas, anchors)

    for n in (1000, 5000):
        bx = boxes(g, n, extent=300.0, max_side=80.0)
        sc = torch.rand(n, generator=g)
        cl = torch.randint(0, 8, (n,), generator=g)
        out[f"nms{n}_boxes"], out[f"nms{n}_scores"], out[f"nms{n}_classes"] = bx, sc, cl
        out[f"nms{n}_keep"] = batched_nms(bx, sc, cl, 0.5)
        out[f"nms{n}_keep_single"] = nms(bx, sc, 0.5)

    # Matcher on random IoU-like matrices with ties and an empty-ish row.
    q = (torch.rand(6, 300, generator=g) * 8).floor() / 10.0  # values 0.0 .. 0.7, many ties
    q[2] = 0.0
    q[4, 17] = 0.45
    out["match_quality"] = q
    out["matches"] = det_utils.Matcher(0.5, 0.4, allow_low_quality_matches=True)(q)
    out["matches_no_lq"] = det_utils.Matcher(0.5, 0.4, allow_low_quality_matches=False)(q.clone())

    sizes = tuple((x, int(x * 2 ** (1.0 / 3)), int(x * 2 ** (2.0 / 3))) for x in [32, 64, 128, 256, 512])
    gen = AnchorGenerator(sizes, ((0.5, 1.0, 2.0),) * 5)
    image = torch.zeros(1, 3, 160, 224)
    feats = [torch.zeros(1, 1, h, w) for h, w in [(20, 28), (10, 14), (5, 7), (3, 4), (2, 2)]]
    out["anchors_160x224"] = gen(ImageList(image, [(160, 224)]), feats)[0]
    torch.save(out, sys.argv[1])


if __name__ == "__main__":
    main()
