#!/usr/bin/env python3
"""Where the build's time goes, from ninja's own log (build/.ninja_log).

  python3 scripts/build_profile.py [BUILD_DIR] [--top N] [--includes K] [--torch-free]

Prints the slowest steps of the last build of each output (seconds each), then the sum per
target (count, total and median seconds). --includes K re-runs the preprocessor (-H) on the K
slowest translation units from compile_commands.json and prints, for each, the headers it
includes directly and how many it pulls in altogether: which includes make a file slow.
--torch-free lists instead the sources that load the LibTorch precompiled header but include no
LibTorch header themselves (the preprocessor's dependency list, -M, without the header): they
compile faster without it, named in their CMakeLists.txt with detforge_torch_free(); and the
sources compiled without it that include LibTorch after all (a name to take out again).
docs/development.md ("Build time") has the table this printed before and after the build work.
"""
import argparse
import json
import re
import shlex
import statistics
import subprocess
import sys
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def read_log(build):
    """The last record of each output: output -> seconds (ninja log v5/v6: start end mtime out hash)."""
    log = build / ".ninja_log"
    if not log.is_file():
        sys.exit(f"build_profile: {log} not found: build first (cmake --build {build})")
    steps = {}
    for line in log.read_text().splitlines():
        if line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) < 4:
            continue
        steps[fields[3]] = (int(fields[1]) - int(fields[0])) / 1000.0
    return steps


def target_of(output):
    m = re.search(r"CMakeFiles/([^/]+)\.dir/", output)
    return m.group(1) if m else "(link and other steps)"


def includes(build, outputs):
    """Direct and total header counts of each output's translation unit (g++ -H)."""
    db = json.loads((build / "compile_commands.json").read_text())
    by_output = {}
    for entry in db:
        args = shlex.split(entry["command"])
        if "-o" in args:
            by_output[args[args.index("-o") + 1]] = (entry["directory"], args)
    for out in outputs:
        if out not in by_output:
            continue
        directory, args = by_output[out]
        i = args.index("-o")
        cmd = args[:i] + args[i + 2 :] + ["-H", "-fsyntax-only"]
        err = subprocess.run(cmd, cwd=directory, capture_output=True, text=True).stderr
        headers = [l for l in err.splitlines() if re.match(r"^\.+ ", l) or l.startswith("! ")]
        direct = [l.split(" ", 1)[1] for l in headers if l.startswith(". ") or l.startswith("! ")]
        print(f"\n{out}: {len(headers)} headers, {len(direct)} direct")
        for h in direct:
            print(f"  {h}")


def torch_free(build):
    """Sources compiled with the precompiled header whose own include closure has no LibTorch."""
    db = json.loads((build / "compile_commands.json").read_text())

    def closure(entry):
        """(file, compiled with the header, includes LibTorch without it)."""
        args = shlex.split(entry["command"])
        with_pch = "-include" in args
        if with_pch:
            i = args.index("-include")
            args = args[:i] + args[i + 2 :]
        i = args.index("-o")
        args = [x for x in args[:i] + args[i + 2 :] if x not in ("-c", "-Winvalid-pch")]
        deps = subprocess.run(args + ["-M", "-MG"], cwd=entry["directory"], capture_output=True,
                              text=True).stdout
        return entry["file"], with_pch, "/torch/include/" in deps

    sources = [e for e in db if "cmake_pch" not in e["file"] and not e["file"].endswith("pch.cpp")]
    with ThreadPoolExecutor() as pool:
        scanned = list(pool.map(closure, sources))
    found = sorted({f for f, with_pch, torch in scanned if with_pch and not torch})
    stale = sorted({f for f, with_pch, torch in scanned if not with_pch and torch})
    print(f"{len(found)} sources load the precompiled header and include no LibTorch header:")
    for f in found:
        print(f"  {f}")
    print(f"{len(stale)} sources skip the precompiled header and include LibTorch:")
    for f in stale:
        print(f"  {f}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("build", nargs="?", default="build")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--includes", type=int, default=0, metavar="K")
    p.add_argument("--torch-free", action="store_true")
    a = p.parse_args()
    build = Path(a.build)
    if a.torch_free:
        torch_free(build)
        return
    steps = read_log(build)
    ranked = sorted(steps.items(), key=lambda kv: -kv[1])
    print(f"{len(steps)} steps, {sum(steps.values()):.0f} s of compile and link time in all\n")
    print(f"{'seconds':>8}  step")
    for out, s in ranked[: a.top]:
        print(f"{s:8.1f}  {out}")
    per = defaultdict(list)
    for out, s in steps.items():
        per[target_of(out)].append(s)
    print(f"\n{'steps':>6} {'total s':>8} {'median s':>9}  target")
    for target, times in sorted(per.items(), key=lambda kv: -sum(kv[1])):
        print(f"{len(times):6d} {sum(times):8.0f} {statistics.median(times):9.1f}  {target}")
    if a.includes:
        objects = [out for out, _ in ranked if out.endswith(".o")][: a.includes]
        includes(build, objects)


if __name__ == "__main__":
    main()
