"""detforge from Python: Model(...).train / val / predict / export, driving the detforge binary
through its event stream (docs/python.md)."""

from .errors import (ConfigError, DataError, DetforgeError, DistError, InternalError, IoError,
                     Preempted, TrainingError, UsageError)
from .model import EVENTS, Model, evaluate
from .results import Boxes, Results, TrainResult

__version__ = "0.1.0"

__all__ = ["Model", "evaluate", "EVENTS", "Results", "Boxes", "TrainResult", "DetforgeError",
           "ConfigError", "DataError", "DistError", "InternalError", "IoError", "Preempted",
           "TrainingError", "UsageError"]
