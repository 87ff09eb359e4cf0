"""Reads the preprocessor_config.json in FOLDER with transformers' AutoImageProcessor, as a hub
user's from_pretrained does, and saves what it makes of JPEG: size ([h, w] int64), rescale_factor,
image_mean and image_std (float64) and pixels (pixel_values[0], float32 CHW) to OUT.
Usage: hub_processor.py FOLDER JPEG OUT"""
import sys

import torch
from PIL import Image
from transformers import AutoImageProcessor


def main():
    folder, jpeg, out = sys.argv[1:4]
    processor = AutoImageProcessor.from_pretrained(folder)
    pixels = processor(images=Image.open(jpeg).convert("RGB"), return_tensors="pt")["pixel_values"]
    torch.save({
        "size": torch.tensor([processor.size["height"], processor.size["width"]]),
        "rescale_factor": torch.tensor([processor.rescale_factor], dtype=torch.float64),
        "image_mean": torch.tensor(processor.image_mean, dtype=torch.float64),
        "image_std": torch.tensor(processor.image_std, dtype=torch.float64),
        "pixels": pixels[0].float().contiguous(),
    }, out)


if __name__ == "__main__":
    main()
