"""Loads each code_*.pt that hostile_files.py wrote with torch.load(weights_only=False), as a
trusting user would, for tests/weights/weights_test.cpp. Usage: load_hostile.py DIR CASE...

Prints one line per case: "CASE: ran" where its payload ran (the Popen child waited for), or
"CASE: did not run (WHY)". A payload runs where its marker DIR/payload_ran.CASE exists; the
torch_load case runs where its state dict's x is inner.pt's tensor.
"""
import os
import sys

import torch

folder = sys.argv[1]
for case in sys.argv[2:]:
    try:
        loaded = torch.load(os.path.join(folder, f"code_{case}.pt"), weights_only=False)
    except Exception as e:  # a payload that fails to run fails here
        print(f"{case}: did not run ({type(e).__name__}: {e})")
        continue
    x = loaded.get("x") if isinstance(loaded, dict) else None
    if hasattr(x, "wait"):
        x.wait()
    if case == "torch_load":
        ran = torch.is_tensor(x) and torch.equal(x, torch.arange(3.0))
    else:
        ran = os.path.exists(os.path.join(folder, f"payload_ran.{case}"))
    print(f"{case}: ran" if ran else f"{case}: did not run (no effect)")
