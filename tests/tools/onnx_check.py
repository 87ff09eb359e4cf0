"""Runs an exported ONNX model with onnxruntime (CPU) and compares its outputs with expected ones.

Usage: onnx_check.py MODEL.onnx IO.safetensors TOL [--unordered NAME,NAME...]
IO.safetensors holds `images` (the model's input) and one tensor per model output, under the
output's name. TOL bounds |got - want| / max(1, |want|): an absolute difference for values
within [-1, 1] (scores, logits near 0, normalised boxes), a relative one beyond (pixel boxes,
where float32 carries about 7 digits of an 800-pixel coordinate). One number for every output,
or comma-separated NAME=NUMBER items with an optional bare NUMBER as the default. --unordered names outputs [B, Q, ...] whose Q rows form a set (RT-DETR's
queries: two scores within float noise of each other may swap places in the top-k); their rows
are matched jointly, one permutation per image, before comparing. --xyxy names outputs of
pixel boxes [..., 4], whose differences are measured in units of each expected box's size
(RetinaNet: a delta's float32 rounding times an anchor of up to 812 pixels reaches 1e-3 pixels
on boxes of any position). --plain runs onnxruntime with its graph optimisations off.
Prints one line per output (shapes, max diff, tolerance); exit 0 when all pass, 1 otherwise.
"""
import argparse
import sys

import numpy as np


def parse_tolerances(text):
    """'1e-4,boxes=1e-2' -> (1e-4, {'boxes': 1e-2}); the default is None when not given."""
    default, named = None, {}
    for item in text.split(","):
        name, _, value = item.rpartition("=")
        try:
            tol = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"TOL item '{item}' is not NUMBER or NAME=NUMBER")
        if name:
            named[name] = tol
        else:
            default = tol
    return default, named


def max_diff(got, want, xyxy=False):
    """Largest |got - want| / max(1, |want|), or with `xyxy` (boxes [..., 4]) divided by the
    larger of 1 and the expected box's width, height and |coordinate|: a box's error in units of
    its size, what IoU sees. A NaN on one side only counts as inf, on both sides as 0."""
    w = want.astype(np.float64)
    scale = np.maximum(1.0, np.abs(w))
    if xyxy:
        size = np.maximum(np.abs(w[..., 2:3] - w[..., 0:1]), np.abs(w[..., 3:4] - w[..., 1:2]))
        scale = np.maximum(scale, size)
    d = np.abs(got.astype(np.float64) - w) / scale
    both_nan = np.isnan(got) & np.isnan(want)
    d = np.where(both_nan, 0.0, np.where(np.isnan(d), np.inf, d))
    return float(d.max()) if d.size else 0.0


def match_rows(got, want):
    """One permutation per image that pairs rows of `got` with rows of `want`: greedily, the
    closest pairs (max abs diff over every named output's row) first. Returns perm [B, Q] with
    got[b, perm[b, j]] paired with want[b, j], and the number of rows not in place."""
    g = np.concatenate([t.reshape(t.shape[0], t.shape[1], -1) for t in got], axis=2)
    w = np.concatenate([t.reshape(t.shape[0], t.shape[1], -1) for t in want], axis=2)
    perm = np.zeros(g.shape[:2], dtype=np.int64)
    moved = 0
    for b in range(g.shape[0]):
        cost = np.abs(g[b][:, None, :] - w[b][None, :, :]).max(axis=2)  # [Q got, Q want]
        used_g, used_w = set(), set()
        for flat in np.argsort(cost, axis=None, kind="stable"):
            i, j = divmod(int(flat), cost.shape[1])
            if i not in used_g and j not in used_w:
                perm[b, j] = i
                used_g.add(i)
                used_w.add(j)
                if len(used_w) == cost.shape[1]:
                    break
        moved += int((perm[b] != np.arange(g.shape[1])).sum())
    return perm, moved


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model")
    p.add_argument("io")
    p.add_argument("tol", type=parse_tolerances)
    p.add_argument("--unordered", default="", help="comma-separated output names")
    p.add_argument("--xyxy", default="", help="comma-separated outputs of boxes [..., 4]")
    p.add_argument("--plain", action="store_true",
                   help="run with onnxruntime's graph optimisations off (ORT_DISABLE_ALL)")
    a = p.parse_args()
    try:
        import onnxruntime as ort
        from safetensors.numpy import load_file
    except ImportError as e:
        print(f"onnx_check: Python package '{e.name}' not found ({e}); install: "
              "bash scripts/setup.sh installs the pinned onnxruntime", file=sys.stderr)
        return 1

    # onnxruntime and safetensors raise their own exception types; any of them ends the check.
    try:
        io = load_file(a.io)
    except Exception as e:
        print(f"onnx_check: cannot read {a.io}: {e}", file=sys.stderr)
        return 1
    if "images" not in io:
        print(f"onnx_check: {a.io} has no 'images' tensor (has {sorted(io)})", file=sys.stderr)
        return 1
    try:
        options = ort.SessionOptions()
        if a.plain:
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        session = ort.InferenceSession(a.model, sess_options=options,
                                       providers=["CPUExecutionProvider"])
        names = [o.name for o in session.get_outputs()]
        outputs = session.run(None, {session.get_inputs()[0].name: io["images"]})
    except Exception as e:
        print(f"onnx_check: onnxruntime could not run {a.model} on images "
              f"{list(io['images'].shape)} {io['images'].dtype}: {e}", file=sys.stderr)
        return 1
    results = dict(zip(names, outputs))

    failures = []
    unordered = [n for n in a.unordered.split(",") if n]
    for n in unordered:
        if n not in results or n not in io or results[n].shape != io[n].shape:
            failures.append(f"--unordered {n}: needs an output and an expected tensor of that "
                            "name, of the same shape")
    note = {}
    if unordered and not failures:
        perm, moved = match_rows([results[n] for n in unordered], [io[n] for n in unordered])
        for n in unordered:
            results[n] = np.take_along_axis(
                results[n], perm.reshape(perm.shape + (1,) * (results[n].ndim - 2)), axis=1)
            note[n] = f" ({moved} rows matched out of order)"

    default, named = a.tol
    for n in names:
        tol = named.get(n, default)
        got = results[n]
        if tol is None:
            failures.append(f"{n}: no tolerance given for it in TOL")
            continue
        if n not in io:
            failures.append(f"{n}: not in {a.io} (has {sorted(io)})")
            continue
        want = io[n]
        if got.shape != want.shape:
            failures.append(f"{n}: shape {list(got.shape)} from onnxruntime, expected "
                            f"{list(want.shape)}")
            continue
        diff = max_diff(got, want, xyxy=n in a.xyxy.split(","))
        ok = diff <= tol
        print(f"onnx_check: {n} {list(got.shape)} max diff {diff:.3g} "
              f"{'<=' if ok else '>'} {tol:g}{note.get(n, '')}: {'ok' if ok else 'FAIL'}")
        if not ok:
            failures.append(f"{n}: max diff {diff:.3g} > {tol:g}")
    for n in sorted(set(named) - set(names)):
        failures.append(f"TOL names '{n}', which is not an output (outputs: {names})")
    if failures:
        print(f"onnx_check: {a.model}: FAILED: " + "; ".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
