"""transformers' DFineHybridEncoder reference values for detforge's hybrid encoder test.

Usage: hybrid_encoder_reference.py OUT_DIR. Builds DFineHybridEncoder in float64 with random
weights and batch-norm statistics for D-FINE's N and S encoders (D-FINE's own
configs/dfine/dfine_hgnetv2_{n,s}_coco.yml values, carried into DFineConfig, whose defaults are
the L size: N has 2 levels, hidden 128, feed-forward 512, expansion 0.34, depth_mult 0.5; S has 3
levels, hidden 256, feed-forward 1024, expansion 0.5, depth_mult 0.34) and writes
OUT_DIR/<size>.safetensors:
  state.<name>   the encoder's state dict (transformers' names);
  input.<l>      projected maps, finest first, [2, hidden, H_l, W_l];
  eval.<l>       eval-mode outputs;
  train.<l>      train-mode outputs (batch statistics);
  weight.<l>     random weights w_l of the loss sum_l (train.<l> * w_l).sum();
  grad.<name>    that loss's gradient of every parameter, grad_input.<l> of every input.
"""
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import DFineConfig
from transformers.models.d_fine.modeling_d_fine import DFineHybridEncoder

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from float64_parity import randomise_norms, record_train_step  # noqa: E402 (tests/models/)

SIZES = {
    "n": dict(encoder_hidden_dim=128, encoder_ffn_dim=512, hidden_expansion=0.34, depth_mult=0.5,
              encoder_in_channels=[512, 1024], feat_strides=[16, 32], encode_proj_layers=[1],
              shapes=[(8, 6), (4, 3)]),
    "s": dict(encoder_hidden_dim=256, encoder_ffn_dim=1024, hidden_expansion=0.5, depth_mult=0.34,
              encoder_in_channels=[256, 512, 1024], feat_strides=[8, 16, 32], encode_proj_layers=[2],
              shapes=[(16, 12), (8, 6), (4, 3)]),
}


def case(name, kwargs, seed):
    torch.manual_seed(seed)
    shapes = kwargs.pop("shapes")
    config = DFineConfig(encoder_attention_heads=8, **kwargs)
    model = DFineHybridEncoder(config).double()
    randomise_norms(model, lambda key: ".norm." in key)
    out = {f"state.{k}": v.clone() for k, v in model.state_dict().items()}
    hidden = config.encoder_hidden_dim
    inputs = [torch.randn(2, hidden, h, w, dtype=torch.float64) for h, w in shapes]
    for i, x in enumerate(inputs):
        out[f"input.{i}"] = x
    model.eval()
    with torch.no_grad():
        for i, f in enumerate(model([x.clone() for x in inputs]).last_hidden_state):
            out[f"eval.{i}"] = f
    model.train()
    leaves = [x.clone().requires_grad_(True) for x in inputs]
    record_train_step(model, model(list(leaves)).last_hidden_state, out)
    for i, x in enumerate(leaves):
        out[f"grad_input.{i}"] = x.grad
    save_file({k: v.contiguous() for k, v in out.items()}, os.path.join(sys.argv[1], name + ".safetensors"))


def main():
    os.makedirs(sys.argv[1], exist_ok=True)
    for seed, (name, kwargs) in enumerate(SIZES.items()):
        case(name, dict(kwargs), seed)


if __name__ == "__main__":
    main()
