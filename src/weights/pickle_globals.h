// Which Python globals a weight file may name. detforge's unpickler calls nothing a file names
// (weights/state_dict.h), but Python's pickle would: a file that names `os.system`,
// `builtins.eval` or `subprocess.Popen` was made to run code on whoever loads it in Python, so
// detforge refuses it outright rather than read its tensors. No LibTorch here.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace detforge::weights {

/// The module Python 3's pickle imports for `module`: Python 2's names (`__builtin__`,
/// `copy_reg`, `commands`), as protocol-2 files such as torch.save's write them, become
/// `builtins`, `copyreg`, `subprocess`; any other name is itself.
std::string python3_module(const std::string& module);

/// Why the global `module`.`name` is refused in a weight file, or nullopt when it may appear
/// (`module` as Python 3 names it: python3_module()):
/// - Python's own modules (every name in `sys.stdlib_module_names`, and Python 2's module
///   names) are refused except the data
///   types checkpoints hold: `collections.OrderedDict`/`defaultdict`/`Counter`, `builtins.set`,
///   `frozenset`, `slice`, `complex`, `bytearray`, `range` and the other plain types,
///   `copyreg._reconstructor`/`__newobj__`, `_codecs.encode`, `types.SimpleNamespace`,
///   `argparse.Namespace`, `pathlib` paths, `datetime` values;
/// - `torch` names only storages, dtypes, `Size`, `device`, the `torch._utils` /
///   `torch._tensor` rebuild functions, `torch.nn.*` and `torch.optim.*`
///   (`torch.load`, `torch.hub.*`, `torch.jit.load` ... are refused);
/// - `numpy` names only its array and scalar reconstructors and dtypes;
/// - any other package (ultralytics, mmdet, a training script's `__main__`) may name its
///   classes and functions, but not an attribute path (`YOLO.__init__`, `Path.write_text`) or a
///   dunder name.
std::optional<std::string> refused_global(const std::string& module, const std::string& name);

/// The module roots treated as Python's own (sorted), for the test that compares them with the
/// Python of the test environment.
const std::vector<std::string>& python_stdlib_roots();

}  // namespace detforge::weights
