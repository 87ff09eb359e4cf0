"""ImageNet-style ResNet-vd backbone files for detforge's `model.backbone.weights` test.

Usage: backbone_reference.py OUT_DIR. For r18vd (basic blocks) and r50vd (bottlenecks), builds
transformers' RTDetrResNetBackbone with random weights and batch-norm statistics and writes,
under OUT_DIR/<arch>/:
  model.safetensors  as save_pretrained() writes it (transformers' names);
  presnet.pth        the same tensors in PResNet's names (rtdetrv2_pytorch's backbone, the
                     layout of the Paddle ImageNet files RT-DETR trains from), a plain state
                     dict as torch.save writes it. The names come from walking the modules:
                     the stem's conv layers are conv1.conv1_<k>, block b of stage s is
                     res_layers.s.blocks.b with branch2a/b/c, a projection shortcut is short
                     (short.conv after the average pool of a downsampling block), and each
                     conv layer holds conv and norm.
"""
import os
import sys

import torch
from transformers import RTDetrResNetConfig
from reference import randomise_norms  # tests/models/rtdetr/reference.py
from transformers.models.rt_detr.modeling_rt_detr_resnet import (
    RTDetrResNetBackbone,
    RTDetrResNetConvLayer,
    RTDetrResNetShortCut,
)

CONFIGS = {
    "r18vd": dict(layer_type="basic", depths=[2, 2, 2, 2], hidden_sizes=[64, 128, 256, 512]),
    "r50vd": dict(layer_type="bottleneck", depths=[3, 4, 6, 3], hidden_sizes=[256, 512, 1024, 2048]),
}


def presnet_prefix(module_name, module):
    """The PResNet module name of one of transformers' conv layers or shortcuts."""
    parts = module_name.split(".")
    if parts[0] == "embedder":  # embedder.embedder.<i>
        return f"conv1.conv1_{int(parts[2]) + 1}"
    stage, block = parts[2], parts[4]  # encoder.stages.<s>.layers.<b>....
    base = f"res_layers.{stage}.blocks.{block}"
    if isinstance(module, RTDetrResNetShortCut):
        # shortcut (a projection alone) or shortcut.1 (after the average pool)
        return base + (".short.conv" if len(parts) == 7 else ".short")
    return base + ".branch2" + "abc"[int(parts[6])]  # layer.<j>


def presnet_state(model):
    state = {}
    for name, module in model.named_modules():
        if not isinstance(module, (RTDetrResNetConvLayer, RTDetrResNetShortCut)):
            continue
        prefix = presnet_prefix(name, module)
        state[f"{prefix}.conv.weight"] = module.convolution.weight.detach().clone()
        for key, value in module.normalization.state_dict().items():
            state[f"{prefix}.norm.{key}"] = value.clone()
    return state


def main():
    out_dir = sys.argv[1]
    for seed, (arch, kwargs) in enumerate(CONFIGS.items()):
        torch.manual_seed(seed)
        model = RTDetrResNetBackbone(RTDetrResNetConfig(
            out_features=["stage2", "stage3", "stage4"], **kwargs))
        randomise_norms(model)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "normalization" in name:
                    p.normal_(1.0 if name.endswith("weight") else 0.0, 0.1)
        folder = os.path.join(out_dir, arch)
        model.save_pretrained(folder)
        state = presnet_state(model)
        expected = {k for k in model.state_dict() if not k.endswith("num_batches_tracked")}
        assert len([k for k in state if not k.endswith("num_batches_tracked")]) == len(expected)
        torch.save(state, os.path.join(folder, "presnet.pth"))


if __name__ == "__main__":
    main()
