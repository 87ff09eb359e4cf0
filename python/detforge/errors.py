"""The binary's error categories as exceptions (docs/errors.md): one class per exit code."""


class DetforgeError(Exception):
    """A detforge command failed; `message` is the binary's one-line message, verbatim."""

    exit_code = 1
    category = "internal error"

    def __init__(self, message, log=None):
        super().__init__(message)
        self.message = message
        #: The command's own output (its log lines), for a failure the message does not explain.
        self.log = log


def _category(name, exit_code, category, doc):
    return type(name, (DetforgeError,), {"exit_code": exit_code, "category": category,
                                         "__doc__": doc, "__module__": __name__})


InternalError = _category("InternalError", 1, "internal error", "A bug: please report it.")
UsageError = _category("UsageError", 2, "usage error", "An unknown command or option.")
ConfigError = _category("ConfigError", 3, "config error",
                        "A missing file, bad YAML, an unknown key or argument, a wrong value.")
DataError = _category("DataError", 4, "data error",
                      "A bad annotation or image; the message names the file and image id.")
DistError = _category("DistError", 5, "distributed error",
                      "A bad launch environment or a failed collective; names the rank.")
IoError = _category("IoError", 6, "io error", "A file that cannot be read or written.")
TrainingError = _category("TrainingError", 7, "training error",
                          "Non-finite losses in a row, an incompatible checkpoint.")
Preempted = _category("Preempted", 8, "preempted",
                      "A signal stopped training after last.ckpt was written; resume=True "
                      "continues it.")


_BY_CODE = {c.exit_code: c for c in (InternalError, UsageError, ConfigError, DataError, DistError,
                                     IoError, TrainingError, Preempted)}


def error_for(exit_code, message, log=None):
    """The exception for a command that exited with `exit_code` (a signal: InternalError)."""
    cls = _BY_CODE.get(exit_code, InternalError)
    if exit_code not in _BY_CODE:
        message = f"{message} (exit status {exit_code})"
    return cls(message, log)
