"""transformers' HGNetV2Backbone reference values for detforge's HGNetV2 test.

Usage: hgnetv2_reference.py OUT_DIR. For two layouts, builds HGNetV2Backbone in float64 with
random weights, batch-norm statistics and learnable affine blocks, and writes OUT_DIR/<case>.safetensors:
  state.<name>   the backbone's state dict (transformers' names);
  input          a [2, 3, 66, 50] batch (odd sizes: the stem's padding and ceil-mode pool);
  eval.<i>       the eval-mode outputs of stages 1, 2, 3 (return_idx [1, 2, 3]);
  train.<i>      the train-mode outputs (batch statistics);
  weight.<i>     random weights w_i of the loss sum_i (train.<i> * w_i).sum();
  grad.<name>    that loss's gradient of every parameter;
  after.<name>   the running statistics after the train-mode forward.
Cases: B0 with learnable affine blocks (D-FINE's N and S backbone, D-FINE's stage table carried
into HGNetV2Config, which defaults to B4), and B4 without them (transformers' defaults), whose
file holds only the state, the input and the eval-mode outputs (its 14 M parameters).
"""
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import HGNetV2Config
from transformers.models.hgnet_v2.modeling_hgnet_v2 import HGNetV2Backbone
from float64_parity import randomise_norms, record_train_step  # tests/models/float64_parity.py

# D-FINE's hgnetv2.py arch_configs["B0"]: stem channels, then per stage in, mid, out channels,
# blocks, downsample, light block, kernel size, layers.
B0 = dict(stem_channels=[3, 16, 16], stage_in_channels=[16, 64, 256, 512],
          stage_mid_channels=[16, 32, 64, 128], stage_out_channels=[64, 256, 512, 1024],
          stage_num_blocks=[1, 1, 2, 1], stage_downsample=[False, True, True, True],
          stage_light_block=[False, False, True, True], stage_kernel_size=[3, 3, 5, 5],
          stage_numb_of_layers=[3, 3, 3, 3], hidden_sizes=[64, 256, 512, 1024],
          depths=[1, 1, 2, 1], use_learnable_affine_block=True)
CASES = {"B0": (B0, True), "B4": ({}, False)}


def case(name, kwargs, train, seed):
    torch.manual_seed(seed)
    config = HGNetV2Config(out_features=["stage2", "stage3", "stage4"], **kwargs)
    model = HGNetV2Backbone(config).double()
    randomise_norms(model, lambda key: "normalization" in key)
    with torch.no_grad():
        for key, t in model.named_parameters():
            if key.endswith("lab.scale"):
                t.normal_(1.0, 0.1)
            elif key.endswith("lab.bias"):
                t.normal_(0.0, 0.1)
    out = {f"state.{k}": v.clone() for k, v in model.state_dict().items()}
    x = torch.randn(2, 3, 66, 50, dtype=torch.float64)
    out["input"] = x
    model.eval()
    with torch.no_grad():
        for i, f in enumerate(model(x).feature_maps):
            out[f"eval.{i}"] = f
    if train:
        train_mode(model, x, out)
    save_file({k: v.contiguous() for k, v in out.items()}, os.path.join(sys.argv[1], name + ".safetensors"))


def train_mode(model, x, out):
    model.train()
    record_train_step(model, model(x).feature_maps, out)
    for k, t in model.named_buffers():
        if k.endswith(("running_mean", "running_var")):
            out[f"after.{k}"] = t.clone()


def main():
    os.makedirs(sys.argv[1], exist_ok=True)
    for seed, (name, (kwargs, train)) in enumerate(CASES.items()):
        case(name, kwargs, train, seed)


if __name__ == "__main__":
    main()
