"""Counts the tests a ctest run skipped, by reason, from its JUnit file (ctest --output-junit).
With CI=true any skip whose reason is not "no CUDA device" fails: CI has no GPU, so only the
GPU tests may skip there; a missing dataset, namespace permission or tool is lost coverage.
  python3 scripts/skip_report.py build/ctest-junit.xml"""
import collections
import os
import sys
import xml.etree.ElementTree as ET

ALLOWED_IN_CI = "no CUDA device"


def reason(case):
    """GoogleTest prints `file:line: Skipped` and then the GTEST_SKIP() message."""
    out = case.findtext("system-out") or ""
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if line.endswith(": Skipped") and i + 1 < len(lines) and lines[i + 1].strip():
            return lines[i + 1].strip()
    return "no reason given"


def main(path):
    if not os.path.exists(path):
        print(f"skip report: {path} not written (ctest did not run)")
        return 1
    skipped = collections.defaultdict(list)
    total = 0
    for case in ET.parse(path).getroot().iter("testcase"):
        total += 1
        if case.get("status") == "skipped" or case.find("skipped") is not None:
            skipped[reason(case)].append(case.get("name"))
    count = sum(len(v) for v in skipped.values())
    print(f"skip report: {count} of {total} tests skipped")
    for why, names in sorted(skipped.items(), key=lambda kv: -len(kv[1])):
        print(f"  {len(names):3d}  {why}: {', '.join(sorted(names)[:4])}"
              + (f" and {len(names) - 4} more" if len(names) > 4 else ""))
    lost = {why: n for why, n in skipped.items() if ALLOWED_IN_CI not in why}
    if os.environ.get("CI") == "true" and lost:
        print(f"skip report: CI=true and {sum(len(n) for n in lost.values())} test(s) skipped for "
              f"a reason other than '{ALLOWED_IN_CI}': that is lost coverage, fix the machine or "
              "the test")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
