// The one list of detforge's commands, in the order `detforge --help` lists them. Each line is
//   DETFORGE_COMMAND(<name>, <executable>, "<one-line help>")
// where <executable> is the one that runs it (tools/cli.h): front (`detforge` itself), data
// (libexec/detforge-data: OpenCV, no LibTorch) or torch (libexec/detforge-torch: LibTorch).
// tools/<name>.cpp defines `void add_<name>_command(CLI::App&)`. From this list come the table
// of commands (cli.cpp), the add_*_command declarations and each executable's registration
// (commands.h), and each executable's sources (tools/CMakeLists.txt reads the name and the
// executable, which must stay on the DETFORGE_COMMAND line; the help may wrap).
//
// An X-macro file: it has no include guard, and its includer defines DETFORGE_COMMAND.
DETFORGE_COMMAND(train, torch, "Train a detector from a YAML config")
DETFORGE_COMMAND(synth, data, "Generate the deterministic synthetic COCO detection dataset")
DETFORGE_COMMAND(config, front, "Print a config with _base_ files and a.b=value overrides resolved")
DETFORGE_COMMAND(lint, data,
                 "Check a COCO, YOLO or VOC dataset: every rule, a summary, a JSON report; exit 4 "
                 "on errors")
DETFORGE_COMMAND(convert, data,
                 "Write one split of a COCO, YOLO or VOC dataset in another of these formats, with "
                 "its images")
DETFORGE_COMMAND(launch, front,
                 "Start N ranks of a command with torchrun's variables: detforge launch "
                 "--nproc-per-node 2 -- CMD ...")
DETFORGE_COMMAND(bench, torch, "Benchmarks against the peer frameworks, measured in the same run")
DETFORGE_COMMAND(eval, front,
                 "COCO bbox evaluation of a results json (numbers identical to pycocotools); "
                 "--plots: confusion matrix, PR curves, label statistics")
DETFORGE_COMMAND(predict, torch, "Run a detector on images; write COCO results json (and drawings)")
DETFORGE_COMMAND(export, torch,
                 "Write a checkpoint's (or any loadable) weights as a torchvision-compatible "
                 "state dict")
DETFORGE_COMMAND(plot, front,
                 "Draw a run's curves (loss terms, lr, mAP live and EMA, images/s) into a PNG, "
                 "SVG or PDF")
DETFORGE_COMMAND(augment, data, "Draw training samples through a config's augmentations into PNGs")
