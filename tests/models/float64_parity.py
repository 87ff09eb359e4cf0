"""What the parity references share (tests/models/reference_file.h reads the float64 ones' files)."""
import torch


def randomise_norms(model, is_norm):
    """Batch norms with random affine parameters (parameters whose name passes is_norm) and
    running statistics, so that eval mode and the gradients are a real test."""
    with torch.no_grad():
        for key, t in model.named_parameters():
            if is_norm(key):
                t.normal_(1.0 if key.endswith("weight") else 0.0, 0.1)
        for key, t in model.named_buffers():
            if key.endswith("running_mean"):
                t.normal_(0, 0.1)
            elif key.endswith("running_var"):
                t.uniform_(0.5, 1.5)


def record_train_step(model, maps, out):
    """Writes the train-mode outputs `maps` as train.<i>, random weights w_i as weight.<i>, and
    the gradient of sum_i (maps[i] * w_i).sum() for every parameter as grad.<name>."""
    loss = 0
    for i, f in enumerate(maps):
        w = torch.randn_like(f)
        out[f"train.{i}"] = f.detach()
        out[f"weight.{i}"] = w
        loss = loss + (f * w).sum()
    loss.backward()
    for k, p in model.named_parameters():
        out[f"grad.{k}"] = p.grad


def record_noise(calls):
    """Wraps torch.rand_like / randint_like so the denoising draws can be replayed."""
    rand_like, randint_like = torch.rand_like, torch.randint_like

    def rec_rand_like(*a, **k):
        t = rand_like(*a, **k)
        calls.append(t.clone())
        return t

    def rec_randint_like(*a, **k):
        t = randint_like(*a, **k)
        calls.append(t.clone())
        return t

    torch.rand_like, torch.randint_like = rec_rand_like, rec_randint_like
    return lambda: setattr(torch, "rand_like", rand_like) or setattr(torch, "randint_like",
                                                                       randint_like)
