"""The timing every bench peer (bench/*_peer.py) shares, as detforge's side times itself."""
import time

import torch


def timed(fn, device, iters, warmup):
    """Seconds per call of `fn` (`warmup` untimed calls, then `iters` timed ones, synchronised on a
    CUDA `device`) and the peak device memory over them in MiB (0 on the CPU)."""
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    for _ in range(warmup):
        fn()
    if cuda:
        torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    if cuda:
        torch.cuda.synchronize(device)
    seconds = (time.perf_counter() - t0) / iters
    return seconds, torch.cuda.max_memory_allocated(device) / 2**20 if cuda else 0.0


def detr_peer_args(label_key):
    """The DETR peers' command line, INPUTS WEIGHTS THREADS ITERS WARMUP DEVICE OUT, read: sets
    torch's thread count and returns (weights, iters, warmup, device, out, images, targets), the
    targets as [{label_key: labels, "boxes": normalised cxcywh}] on the device."""
    import sys

    inputs, weights = sys.argv[1:3]
    threads, iters, warmup = map(int, sys.argv[3:6])
    device = torch.device(sys.argv[6])
    torch.set_num_threads(threads)
    data = torch.load(inputs, weights_only=True)
    images = data["images"].to(device)
    targets = [{label_key: data[f"labels_{i}"].to(device), "boxes": data[f"boxes_{i}"].to(device)}
               for i in range(images.size(0))]
    return weights, iters, warmup, device, sys.argv[7], images, targets


def write_train_infer(out, modules, train_step, infer, device, iters, warmup):
    """Times `train_step` with `modules` in training mode and `infer` in eval mode, and writes
    {"train_s", "infer_s", "train_peak_mib", "infer_peak_mib", "peak_rss_mb"} to `out` as JSON."""
    import json
    import resource

    res = {}
    for name, mode, fn in (("train", True, train_step), ("infer", False, infer)):
        for m in modules:
            m.train(mode)
        res[name + "_s"], res[name + "_peak_mib"] = timed(fn, device, iters, warmup)
    res["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    with open(out, "w") as f:
        json.dump(res, f)
