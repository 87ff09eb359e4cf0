"""Ultralytics' own optimisation, for detforge's step plan and MuSGD (tests/engine/
ultralytics_optim_test.cpp).

Usage: ultralytics_optim_reference.py OUT_DIR. Writes under OUT_DIR:
  ref.pth      "steps_batch" [S] (int64): the batch index ni after which Ultralytics' trainer
               (BaseTrainer._do_train, run for real: yolov8n at 32 px on 16 images, batch 2, nbs 8,
               3 epochs, warmup_epochs 2, SGD lr0 0.01, lrf 0.01, momentum 0.937, warmup_momentum
               0.8, warmup_bias_lr 0.1) took each of its S optimizer steps; "steps_lr" [S, 3] and
               "steps_momentum" [S, 3]: the rate and momentum of its weight, bn and bias groups
               at that step;
               "musgd_grad<k>_<name>", "musgd_after<k>_<name>" (k = 0, 1, 2): the gradients given
               to Ultralytics' MuSGD (built by its trainer's build_optimizer, optimizer=MuSGD,
               lr 0.01, momentum 0.9, weight decay 5e-4) over yolo26n's trainable parameters at
               each step, and the parameters after it;
  musgd_start.pth  yolo26n's (3 classes) state_dict before the first step (its trainable
               parameters also as "musgd_start_<name>" in ref.pth);
  boosted.txt  the parameters in MuSGD's groups at 3x the rate (the class branches), one a line;
  auto.txt     for each of AUTO_CASES (training images, batch, epochs, classes), what Ultralytics'
               trainer (run for real on yolo26n until its build_optimizer returns, optimizer=auto)
               built: "images batch epochs classes iterations optimizer lr weight_decay
               momentum_or_beta1 beta2 nesterov muon boosted", from its weight group (decay on,
               the lowest rate), with beta2, nesterov and muon (MuSGD's Muon factor) 0 where the
               optimizer has none and boosted the count of parameters at 3x the rate.
"""
import os
import sys
import tempfile
import types

os.environ.setdefault("YOLO_CONFIG_DIR", tempfile.mkdtemp())
os.environ.setdefault("YOLO_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from PIL import Image  # noqa: E402
from ultralytics import YOLO  # noqa: E402
from ultralytics.engine.trainer import BaseTrainer  # noqa: E402
from ultralytics.nn.tasks import DetectionModel  # noqa: E402

IMAGES, BATCH, NBS, EPOCHS, WARMUP_EPOCHS = 16, 2, 8, 3, 2
# optimizer=auto: 2 x 5000 = 10,000 iterations (AdamW), 2 x 5001 (MuSGD), AdamW for 2 classes;
# batch 2 against nbs 64 (50 batches an epoch, 2 nominal ones).
AUTO_CASES = [(100, 2, 5000, 3), (100, 2, 5001, 3), (100, 2, 5000, 2)]


def write_dataset(root, images=IMAGES, classes=1):
    rng = np.random.default_rng(0)
    for sub in ("images", "labels"):
        os.makedirs(os.path.join(root, sub, "train"))
    for i in range(images):
        pixels = rng.integers(0, 255, (32, 32, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(os.path.join(root, "images", "train", f"{i}.jpg"))
        with open(os.path.join(root, "labels", "train", f"{i}.txt"), "w") as f:
            f.write(f"{i % classes} 0.5 0.5 0.4 0.3\n")
    names = ", ".join(f"{c}: c{c}" for c in range(classes))
    data = os.path.join(root, "data.yaml")
    with open(data, "w") as f:
        f.write(f"path: {root}\ntrain: images/train\nval: images/train\nnames: {{{names}}}\n")
    return data


class Built(Exception):
    pass


def auto_choices(work, out):
    built = {}
    original = BaseTrainer.build_optimizer

    def recorded(trainer, model, name="auto", lr=0.001, momentum=0.9, decay=1e-5,
                 iterations=1e5):
        built["iterations"] = iterations
        built["optimizer"] = original(trainer, model, name, lr, momentum, decay, iterations)
        raise Built()

    BaseTrainer.build_optimizer = recorded
    lines = []
    try:
        for k, (images, batch, epochs, classes) in enumerate(AUTO_CASES):
            data = write_dataset(os.path.join(work, f"auto{k}"), images, classes)
            try:
                YOLO("yolo26n.yaml").train(
                    data=data, epochs=epochs, imgsz=32, batch=batch, workers=0, device="cpu",
                    seed=0, optimizer="auto", val=False, plots=False, amp=False,
                    project=work, name=f"auto{k}", exist_ok=True, verbose=False)
            except Built:
                pass
            opt = built.pop("optimizer")
            weight = min((g for g in opt.param_groups if g["weight_decay"] > 0 and g["params"]),
                         key=lambda g: g["lr"])
            beta1, beta2 = weight["betas"] if "betas" in weight else (weight["momentum"], 0)
            boosted = sum(len(g["params"]) for g in opt.param_groups
                          if abs(g["lr"] - 3 * weight["lr"]) < 1e-12)
            lines.append(f"{images} {batch} {epochs} {classes} {built.pop('iterations')} "
                         f"{type(opt).__name__} {weight['lr']!r} {weight['weight_decay']!r} "
                         f"{beta1!r} {beta2!r} {int(weight.get('nesterov', False))} "
                         f"{getattr(opt, 'muon', 0)!r} {boosted}\n")
    finally:
        BaseTrainer.build_optimizer = original
    with open(os.path.join(out, "auto.txt"), "w") as f:
        f.writelines(lines)


def trainer_steps(work, ref):
    batches, steps = [0], []

    def count_batch(trainer):
        batches[0] += 1

    def wrap_step(trainer):
        original = trainer.optimizer_step

        def recorded():
            groups = {g["param_group"]: g for g in trainer.optimizer.param_groups}
            order = [groups[name] for name in ("weight", "bn", "bias")]
            steps.append((batches[0] - 1, [g["lr"] for g in order], [g["momentum"] for g in order]))
            original()

        trainer.optimizer_step = recorded

    model = YOLO("yolov8n.yaml")
    model.add_callback("on_train_batch_start", count_batch)
    model.add_callback("on_pretrain_routine_end", wrap_step)
    model.train(data=write_dataset(os.path.join(work, "data")), epochs=EPOCHS, imgsz=32,
                batch=BATCH, nbs=NBS, workers=0, device="cpu", seed=0, optimizer="SGD", lr0=0.01,
                lrf=0.01, momentum=0.937, warmup_momentum=0.8, warmup_bias_lr=0.1,
                warmup_epochs=WARMUP_EPOCHS, val=False, plots=False, amp=False, mosaic=0.0,
                close_mosaic=0, project=work, name="train", exist_ok=True, verbose=False)
    ref["steps_batch"] = torch.tensor([s[0] for s in steps], dtype=torch.int64)
    ref["steps_lr"] = torch.tensor([s[1] for s in steps], dtype=torch.float64)
    ref["steps_momentum"] = torch.tensor([s[2] for s in steps], dtype=torch.float64)


def musgd_steps(out, ref):
    torch.manual_seed(0)
    model = DetectionModel("yolo26n.yaml", nc=3, verbose=False)
    torch.save(model.state_dict(), os.path.join(out, "musgd_start.pth"))
    host = types.SimpleNamespace(args=types.SimpleNamespace(warmup_bias_lr=0.1, lr0=0.01),
                                 data={"nc": 3})
    optimizer = BaseTrainer.build_optimizer(host, model, name="MuSGD", lr=0.01, momentum=0.9,
                                            decay=5e-4)
    names = {id(p): n for n, p in model.named_parameters()}
    with open(os.path.join(out, "boosted.txt"), "w") as f:
        for g in optimizer.param_groups:
            if abs(g["lr"] - 0.03) < 1e-12:
                f.writelines(names[id(p)] + "\n" for p in g["params"])
    trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    for name, p in trainable:
        ref[f"musgd_start_{name}"] = p.detach().clone()
    for k in range(3):
        for name, p in trainable:
            p.grad = torch.randn_like(p) * 0.01
            ref[f"musgd_grad{k}_{name}"] = p.grad.clone()
        optimizer.step()
        for name, p in trainable:
            ref[f"musgd_after{k}_{name}"] = p.detach().clone()


def main():
    out = sys.argv[1]
    torch.set_num_threads(1)
    ref = {}
    with tempfile.TemporaryDirectory() as work:
        trainer_steps(work, ref)
        auto_choices(work, out)
    musgd_steps(out, ref)
    torch.save(ref, os.path.join(out, "ref.pth"))


if __name__ == "__main__":
    main()
