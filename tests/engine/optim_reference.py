"""Parameter groups in torch.optim, for the C++ optimizer test.

Usage: optim_reference.py DIR OPTIMIZER

Reads DIR/init.pth (a state dict of named parameters written by detforge), builds the groups
the way MMDetection / RT-DETR configs describe them (first rule whose regex is found in the
name; no weight decay on 1-D tensors of groups without their own weight_decay), runs five steps
of loss = sum_k (k + 1) * sum((p_k - 0.3)^2) with lr = base * (s + 1) / 5 at step s, and writes
the final parameters to DIR/<OPTIMIZER>.pth.
"""
import re
import sys

import torch

RULES = [(r"^fc1\.", 0.1, None), (r"bn", 1.0, 0.0)]
BASE_LR = 0.05
WEIGHT_DECAY = 0.02


def groups(params):
    out = {}
    for name, p in params.items():
        rule = next((i for i, r in enumerate(RULES) if re.search(r[0], name)), None)
        lr_mult, own_wd = (1.0, None) if rule is None else RULES[rule][1:]
        wd = own_wd if own_wd is not None else (0.0 if p.dim() <= 1 else WEIGHT_DECAY)
        out.setdefault((rule, wd), {"params": [], "lr_mult": lr_mult, "weight_decay": wd})["params"].append(p)
    return list(out.values())


def main(folder, kind):
    state = torch.load(f"{folder}/init.pth", weights_only=True)
    params = {k: v.clone().requires_grad_(True) for k, v in state.items()}
    pgs = groups(params)
    if kind == "sgd":
        opt = torch.optim.SGD(pgs, lr=BASE_LR, momentum=0.9, nesterov=True, weight_decay=WEIGHT_DECAY)
    elif kind == "adam":
        opt = torch.optim.Adam(pgs, lr=BASE_LR, betas=(0.9, 0.99), eps=1e-8, weight_decay=WEIGHT_DECAY)
    else:
        opt = torch.optim.AdamW(pgs, lr=BASE_LR, betas=(0.9, 0.99), eps=1e-8, weight_decay=WEIGHT_DECAY)
    names = list(params)
    for step in range(5):
        for g in opt.param_groups:
            g["lr"] = BASE_LR * (step + 1) / 5 * g["lr_mult"]
        opt.zero_grad()
        loss = sum((k + 1) * ((params[n] - 0.3) ** 2).sum() for k, n in enumerate(names))
        loss.backward()
        opt.step()
    torch.save({k: v.detach() for k, v in params.items()}, f"{folder}/{kind}.pth")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
