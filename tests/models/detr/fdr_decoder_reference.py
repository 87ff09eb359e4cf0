"""transformers' DFineDecoder reference values for detforge's FDR decoder test.

Usage: fdr_decoder_reference.py OUT_DIR. Builds DFineForObjectDetection with D-FINE-N's decoder
(D-FINE's configs/dfine/dfine_hgnetv2_n_coco.yml values carried into DFineConfig: d_model 128,
feed-forward 512, 2 levels of 6 points, 3 layers) and 3 classes, takes its decoder (which holds
the class and box heads), sets every trained parameter to random values in float64, and writes
OUT_DIR/decoder.safetensors:
  state.<name>     the decoder's state dict (transformers' names);
  target, reference, memory   its inputs: [2, 20, 128] queries, [2, 20, 4] box logits and the
                   [2, 60, 128] memory of levels 8 x 6 and 4 x 3;
  train.logits, train.boxes, train.corners, train.initial   the train-mode outputs
                   (intermediate_logits, _reference_points, _predicted_corners,
                   initial_reference_points), layer first;
  eval.logits, eval.boxes     the eval-mode outputs (the last layer);
  weight.<output>  random weights of the loss sum (output * weight).sum() over the train-mode
                   outputs but the initial boxes;
  grad.<name>      that loss's gradient of every trained parameter; grad_target, grad_memory.
"""
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import DFineConfig, DFineForObjectDetection

SHAPES = [(8, 6), (4, 3)]


def main():
    os.makedirs(sys.argv[1], exist_ok=True)
    torch.manual_seed(0)
    config = DFineConfig(d_model=128, decoder_ffn_dim=512, num_feature_levels=2,
                         decoder_n_points=[6, 6], decoder_layers=3, num_labels=3,
                         encoder_hidden_dim=128, decoder_in_channels=[128, 128])
    decoder = DFineForObjectDetection(config).model.decoder.double()
    with torch.no_grad():
        for key, p in decoder.named_parameters():
            if not p.requires_grad:
                continue
            norm = key.endswith("norm.weight")
            p.copy_(torch.randn_like(p) * 0.15 + (1.0 if norm else 0.0))
        # Query position embeddings beyond +-10 somewhere, which the decoder clamps.
        decoder.query_pos_head.layers[1].weight.mul_(40)
    out = {f"state.{k}": v.clone() for k, v in decoder.state_dict().items()}
    s = sum(h * w for h, w in SHAPES)
    inputs = {"target": torch.randn(2, 20, 128, dtype=torch.float64),
              "reference": torch.randn(2, 20, 4, dtype=torch.float64),
              "memory": torch.randn(2, s, 128, dtype=torch.float64)}
    out.update(inputs)
    shapes = torch.tensor(SHAPES)
    starts = torch.tensor([0, SHAPES[0][0] * SHAPES[0][1]])

    def run(target, memory):
        return decoder(inputs_embeds=target, encoder_hidden_states=memory,
                       reference_points=inputs["reference"], spatial_shapes=shapes,
                       spatial_shapes_list=SHAPES, level_start_index=starts)

    decoder.eval()
    with torch.no_grad():
        o = run(inputs["target"], inputs["memory"])
        out["eval.logits"] = o.intermediate_logits.transpose(0, 1).contiguous()
        out["eval.boxes"] = o.intermediate_reference_points.transpose(0, 1).contiguous()
    decoder.train()
    target = inputs["target"].clone().requires_grad_(True)
    memory = inputs["memory"].clone().requires_grad_(True)
    o = run(target, memory)
    named = {"logits": o.intermediate_logits, "boxes": o.intermediate_reference_points,
             "corners": o.intermediate_predicted_corners, "initial": o.initial_reference_points}
    loss = 0
    for name, t in named.items():
        out[f"train.{name}"] = t.detach().transpose(0, 1).contiguous()
        if name == "initial":
            continue
        w = torch.randn_like(t)
        out[f"weight.{name}"] = w.transpose(0, 1).contiguous()
        loss = loss + (t * w).sum()
    loss.backward()
    for k, p in decoder.named_parameters():
        if p.requires_grad:
            out[f"grad.{k}"] = p.grad
    out["grad_target"] = target.grad
    out["grad_memory"] = memory.grad
    save_file({k: v.contiguous() for k, v in out.items()}, os.path.join(sys.argv[1], "decoder.safetensors"))


if __name__ == "__main__":
    main()
