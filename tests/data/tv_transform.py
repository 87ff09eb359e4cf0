"""Reference numbers from torchvision's GeneralizedRCNNTransform for transforms_test.cpp.

Modes (argv[1]):
  sizes   stdin lines "h w min_size max_size [fixed_w fixed_h]" -> "new_h new_w" per line
  boxes   stdin lines "h w min_size max_size x1 y1 x2 y2" -> resized box "x1 y1 x2 y2" (%.9g)
  image   argv[2] image path, argv[3] min_size, argv[4] max_size, argv[5] output .f32 path:
          decode with PIL (RGB), run the transform in eval mode (normalise, resize, pad to 32)
          and write "C H W" on stdout and the float32 CHW pixels of the unpadded image to argv[5].
  processor  stdin lines "image_path height width out.f32": the pixel_values of transformers'
          RTDetrImageProcessor(size={"height", "width"}) on the photo as PIL opens it, written as
          `image` writes its pixels, and "C H W" on stdout per line.
  letterbox  stdin lines "image_path size out.u8": Ultralytics' LetterBox as its predict() runs
          it (auto=True, stride 32, centred, grey 114) on the photo as cv2.imread reads it; writes
          the BGR uint8 HWC canvas to out.u8 and "H W" on stdout per line.
  scale_boxes  stdin lines "h1 w1 h0 w0 x1 y1 x2 y2": Ultralytics' ops.scale_boxes of the float32
          box from a letterboxed h1 x w1 canvas to an h0 x w0 photo, "x1 y1 x2 y2" (%.9g).
"""
import sys

import numpy as np
import torch
from PIL import Image
from torchvision.models.detection.transform import GeneralizedRCNNTransform

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]


def make(min_size, max_size, fixed=None):
    t = GeneralizedRCNNTransform(min_size, max_size, MEAN, STD, fixed_size=fixed)
    t.eval()
    return t


def main():
    mode = sys.argv[1]
    if mode in ("sizes", "boxes"):
        for line in sys.stdin:
            v = line.split()
            if not v:
                continue
            h, w, mn, mx = (int(x) for x in v[:4])
            fixed = None
            if mode == "sizes" and len(v) == 6:
                fixed = (int(v[4]), int(v[5]))
            t = make(mn, mx, fixed)
            img = torch.zeros(3, h, w)
            target = None
            if mode == "boxes":
                target = {"boxes": torch.tensor([[float(x) for x in v[4:8]]], dtype=torch.float32)}
            out, tgt = t.resize(img, target)
            if mode == "sizes":
                print(out.shape[-2], out.shape[-1])
            else:
                print(" ".join("%.9g" % float(x) for x in tgt["boxes"][0]))
        return
    if mode == "image":
        path, mn, mx, out_path = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
        img = torch.from_numpy(np.asarray(Image.open(path).convert("RGB"), dtype=np.float32) / 255.0).permute(2, 0, 1)
        t = make(mn, mx)
        images, _ = t([img])
        h, w = images.image_sizes[0]
        data = images.tensors[0, :, :h, :w].contiguous().numpy().astype(np.float32)
        data.tofile(out_path)
        print(3, h, w)
        return
    if mode == "processor":
        from transformers import RTDetrImageProcessor
        for line in sys.stdin:
            path, h, w, out_path = line.split()
            processor = RTDetrImageProcessor(size={"height": int(h), "width": int(w)})
            pixels = processor(images=Image.open(path).convert("RGB"), return_tensors="pt")
            data = pixels["pixel_values"][0].contiguous().numpy().astype(np.float32)
            data.tofile(out_path)
            print(*data.shape)
        return
    if mode in ("letterbox", "scale_boxes"):
        import contextlib
        import io
        import os
        import tempfile
        os.environ.setdefault("YOLO_CONFIG_DIR", tempfile.mkdtemp())
        import cv2
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            from ultralytics.data.augment import LetterBox
            from ultralytics.utils import ops
        for line in sys.stdin:
            f = line.split()
            if mode == "letterbox":
                canvas = LetterBox(int(f[1]), auto=True, stride=32)(image=cv2.imread(f[0]))
                np.ascontiguousarray(canvas).tofile(f[2])
                print(*canvas.shape[:2])
            else:
                box = torch.tensor([[float(v) for v in f[4:]]], dtype=torch.float32)
                out = ops.scale_boxes((int(f[0]), int(f[1])), box, (int(f[2]), int(f[3])))
                print(" ".join("%.9g" % float(x) for x in out[0]))
        return
    raise SystemExit("unknown mode " + mode)


if __name__ == "__main__":
    main()
