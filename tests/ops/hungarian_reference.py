"""scipy reference assignments for detforge's hungarian tests. Usage: hungarian_reference.py OUT_DIR

Writes, for every case NAME:
  NAME.cost.txt    "rows cols" on the first line, then the costs row-major, one row per line
  NAME.result.txt  "pairs exact" on the first line (exact: 1 when the optimum is unique, so the
                   assignment itself must match), then row_ind, col_ind, and the total cost
and cases.txt, one "NAME exact" line per case. Floats are written with %.17g (round trip).
"""
import os
import sys

import numpy as np
from scipy.optimize import linear_sum_assignment


def cases(rng):
    """(name, cost, exact) triples."""
    yield "random_5x5", rng.random((5, 5)), True
    yield "rect_7x3", rng.random((7, 3)), True
    yield "rect_3x7", rng.random((3, 7)), True
    yield "negative_6x9", rng.normal(size=(6, 9)) * 10.0, True
    yield "tied_6x6", rng.integers(0, 3, size=(6, 6)).astype(np.float64), False
    # Few distinct values: many optimal assignments, only the total is fixed.
    yield "tied_30x20", rng.integers(0, 50, size=(30, 20)).astype(np.float64), False
    yield "equal_4x4", np.full((4, 4), 1.25), False
    yield "large_300x100", rng.random((300, 100)), True
    yield "large_500x500", rng.random((500, 500)), True
    # Entries from 1e-6 to 1e6: the optimum must not be lost to rounding of the large ones.
    yield "magnitude_8x8", rng.random((8, 8)) * 10.0 ** rng.integers(-6, 7, size=(8, 8)), True
    yield "single_1x1", rng.random((1, 1)), True
    yield "row_1x9", rng.random((1, 9)), True
    yield "col_9x1", rng.random((9, 1)), True


def write_matrix(path, cost):
    with open(path, "w") as f:
        f.write(f"{cost.shape[0]} {cost.shape[1]}\n")
        for row in cost:
            f.write(" ".join("%.17g" % x for x in row) + "\n")


def write_result(path, cost, exact):
    rows, cols = linear_sum_assignment(cost)
    total = float(cost[rows, cols].sum())
    with open(path, "w") as f:
        f.write(f"{len(rows)} {int(exact)}\n")
        f.write(" ".join(str(int(r)) for r in rows) + "\n")
        f.write(" ".join(str(int(c)) for c in cols) + "\n")
        f.write("%.17g\n" % total)


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(0)
    with open(os.path.join(out_dir, "cases.txt"), "w") as index:
        for name, cost, exact in cases(rng):
            write_matrix(os.path.join(out_dir, name + ".cost.txt"), cost)
            write_result(os.path.join(out_dir, name + ".result.txt"), cost, exact)
            index.write(f"{name} {int(exact)}\n")


if __name__ == "__main__":
    main()
