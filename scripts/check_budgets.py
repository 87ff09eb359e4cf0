"""Checks the size budgets of scripts/budgets.txt; prints each measure against its limit and
exits 1 naming every file over budget.
  python3 scripts/check_budgets.py [repository root]"""
import glob
import os
import sys


def read_budgets(path):
    budgets = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            rule, _, why = line.partition("|")
            limit, measure, pattern = rule.split()
            if measure not in ("lines", "total-lines", "chars"):
                raise SystemExit(f"{path}:{number}: unknown measure '{measure}'")
            budgets.append((int(limit), measure, pattern, why.strip()))
    return budgets


def size(path, measure):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return len(text) if measure == "chars" else text.count("\n")


def main(root):
    budgets = read_budgets(os.path.join(root, "scripts", "budgets.txt"))
    files = {b[2]: sorted(glob.glob(os.path.join(root, b[2]), recursive=True)) for b in budgets}
    # A file named by a pattern of one file is held to that line, not to the general one.
    specific = {p for b in budgets for p in files[b[2]] if "*" not in b[2]}
    over = []
    for limit, measure, pattern, why in budgets:
        matched = files[pattern]
        if not matched:
            over.append(f"{pattern}: no file matches (budgets.txt is out of date)")
            continue
        if measure == "total-lines":
            total = sum(size(p, "lines") for p in matched)
            print(f"{pattern}: {total} lines in {len(matched)} files (budget {limit})")
            if total > limit:
                over.append(f"{pattern}: {total} lines in all, budget {limit} ({why})")
            continue
        for p in matched:
            if "*" in pattern and p in specific:
                continue
            n = size(p, measure)
            if "*" not in pattern:
                print(f"{pattern}: {n} {measure} (budget {limit})")
            if n > limit:
                over.append(f"{os.path.relpath(p, root)}: {n} {measure}, budget {limit} ({why})")
        if "*" in pattern:
            largest = max((size(p, measure), p) for p in matched if p not in specific)
            print(f"{pattern}: {len(matched)} files, largest {os.path.relpath(largest[1], root)} "
                  f"{largest[0]} {measure} (budget {limit} each)")
    for line in over:
        print("over budget: " + line)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else
                  os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")))
