"""Each parameter's learning rate and weight decay in rfdetr's own optimizer, for
tests/models/rfdetr/rfdetr_test.cpp. Usage: optimizer_reference.py OUT.pth

Builds RFDETRNano (3 classes, no pretrained weights) and the AdamW its trainer builds
(rfdetr.training.module_model's configure_optimizers: get_param_dict on the namespace of the
model's and TrainConfig's defaults: lr 1e-4, lr_encoder 1.5e-4, lr_vit_layer_decay 0.8, lr_component_decay 0.7,
weight_decay 1e-4), and saves {"lr.<name>": lr, "wd.<name>": weight decay} for every trainable
parameter, in float64. rfdetr.training's package imports PyTorch Lightning, which the test
environment does not have: its param_groups module is loaded from its file.
"""
import importlib.util
import os
import sys
import tempfile

os.environ.setdefault("YOLO_CONFIG_DIR", tempfile.mkdtemp())
import torch
import rfdetr
from rfdetr import RFDETRNano
from rfdetr._namespace import _namespace_from_configs
from rfdetr.config import TrainConfig


def get_param_dict(args, net):
    path = os.path.join(os.path.dirname(rfdetr.__file__), "training", "param_groups.py")
    spec = importlib.util.spec_from_file_location("rfdetr_param_groups", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.get_param_dict(args, net)


def main(out):
    model = RFDETRNano(pretrain_weights=None, device="cpu", num_classes=3)
    net = model.model.model
    train = TrainConfig(dataset_dir=tempfile.mkdtemp())
    args = _namespace_from_configs(model.model_config, train)
    optimizer = torch.optim.AdamW(get_param_dict(args, net), lr=train.lr,
                                  weight_decay=train.weight_decay)
    names = {id(p): n for n, p in net.named_parameters()}
    result = {}
    for group in optimizer.param_groups:
        for p in group["params"]:
            result[f"lr.{names[id(p)]}"] = torch.tensor(group["lr"], dtype=torch.float64)
            result[f"wd.{names[id(p)]}"] = torch.tensor(group["weight_decay"], dtype=torch.float64)
    torch.save(result, out)


if __name__ == "__main__":
    main(sys.argv[1])
