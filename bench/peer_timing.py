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
