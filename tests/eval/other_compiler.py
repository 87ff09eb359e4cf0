"""Builds the COCO evaluator with the compiler the main build does not use (g++ beside clang++,
clang++ beside g++), with the flags the main build gives its sources, and links eval_main.

Usage: other_compiler.py BUILD_DIR OUT_BINARY
The flags come from BUILD_DIR/compile_commands.json (the project's own, -ffp-contract=off
included), so a flag that one compiler needs and the build lost shows up as a difference from
pycocotools in the build that lacks it. Prints the compiler used.
"""
import concurrent.futures
import json
import os
import shlex
import shutil
import subprocess
import sys

SOURCES = ["src/eval/coco_eval.cpp", "src/eval/coco_summary.cpp", "src/eval/coco_io.cpp",
           "src/core/errors.cpp", "src/core/atomic_file.cpp"]


def main():
    build, out = sys.argv[1], sys.argv[2]
    with open(os.path.join(build, "compile_commands.json")) as f:
        entries = {os.path.realpath(e["file"]): e for e in json.load(f)}
    root = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", ".."))
    commands = []
    for src in SOURCES:
        entry = entries.get(os.path.join(root, src))
        if entry is None:
            sys.exit(f"{src}: not in {build}/compile_commands.json")
        commands.append(shlex.split(entry["command"]))
    compiler = commands[0][0]
    other = "g++" if "clang" in os.path.basename(compiler) else "clang++"
    if shutil.which(other) is None:
        sys.exit(f"{other} is not installed")
    work = out + ".objs"
    os.makedirs(work, exist_ok=True)

    def compile_one(args, src):
        # The compiler replaced, the object put in `work`.
        args = [other, *args[1:]]
        obj = os.path.join(work, os.path.basename(src) + ".o")
        i = args.index("-o")
        args[i + 1] = obj
        subprocess.run(args, check=True, cwd=build)
        return obj

    flags = [a for a in commands[0][1:]
             if a.startswith(("-I", "-isystem", "-D", "-O", "-std", "-f", "-W"))]
    main_args = [other, *flags, "-c", os.path.join(root, "tests/eval/eval_main.cpp"), "-o", ""]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        jobs = [pool.submit(compile_one, c, s) for c, s in zip(commands, SOURCES)]
        main_obj = os.path.join(work, "eval_main.o")
        main_args[-1] = main_obj
        subprocess.run(main_args, check=True, cwd=build)
        objs = [j.result() for j in jobs] + [main_obj]
    subprocess.run([other, *objs, "-o", out, "-lsimdjson", "-pthread"], check=True)
    print(other)


if __name__ == "__main__":
    main()
