"""Runs the detforge binary as a child process and follows its event stream (docs/events.md).

The binary is the engine; this module starts it with `--events FILE`, reads the file as the child
writes it, and hands each event to the caller in this (the parent) process. The child runs in its
own session, so a Ctrl-C in a terminal or notebook reaches Python only; Python then asks the child
to stop with SIGTERM (training writes a resumable last.ckpt, as on preemption) and waits for it.
The child also receives SIGTERM when this process dies (PR_SET_PDEATHSIG), so a killed parent
leaves no training behind.
"""

import ctypes
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from .errors import error_for

_PACKAGE = Path(__file__).resolve().parent
_REPOSITORY = _PACKAGE.parent.parent
_POLL_S = 0.05


def binary():
    """The detforge executable: $DETFORGE_BINARY, else the one installed with this package, else
    the repository's build/detforge (running from a checkout)."""
    candidates = [os.environ.get("DETFORGE_BINARY"), _PACKAGE / "_bin" / "detforge",
                  _REPOSITORY / "build" / "detforge"]
    for c in candidates:
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return str(c)
    raise FileNotFoundError(
        "no detforge executable: install the package with `pip install .` from the repository, "
        "or set DETFORGE_BINARY")


def configs_dir():
    """The shipped configs: installed with the package, else the repository's configs/."""
    for c in (_PACKAGE / "_configs", _REPOSITORY / "configs"):
        if c.is_dir():
            return c
    raise FileNotFoundError("the shipped configs are missing from this installation")


def _die_with_parent():
    # PR_SET_PDEATHSIG (1): SIGTERM when the parent dies.
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)


class _EventFile:
    """Reads whole lines appended to a file since the last call."""

    def __init__(self, path):
        self.path = path
        self.offset = 0
        self.partial = b""

    def read(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except FileNotFoundError:
            return []
        self.offset += len(chunk)
        data = self.partial + chunk
        lines = data.split(b"\n")
        self.partial = lines.pop()
        return [json.loads(line) for line in lines if line.strip()]


class Run:
    """One command of the binary, with its events handed to `on_event` as they come."""

    def __init__(self, args, on_event=None, env=None):
        self.args = [str(a) for a in args]
        self.on_event = on_event
        self.env = dict(os.environ if env is None else env)
        # ONNX export runs a Python exporter: this Python, which has torch.
        self.env.setdefault("DETFORGE_PYTHON", sys.executable)
        self.events = []
        #: The command's stdout and stderr, once it ended.
        self.output = ""
        self.process = None
        self._stop_requested = False
        self._lock = threading.Lock()

    def stop(self):
        """Asks the command to stop (SIGTERM: training writes last.ckpt and ends resumable)."""
        with self._lock:
            self._stop_requested = True
            if self.process is not None and self.process.poll() is None:
                self.process.send_signal(signal.SIGTERM)

    @property
    def stop_requested(self):
        return self._stop_requested

    def run(self, check=True):
        """Runs the command to its end; returns its exit code, or raises the error class of its
        exit code (errors.py) with the binary's message when `check`."""
        with tempfile.TemporaryDirectory(prefix="detforge-") as tmp:
            events_path = Path(tmp) / "events.jsonl"
            log_path = Path(tmp) / "output.log"
            reader = _EventFile(events_path)
            with open(log_path, "wb") as log:
                with self._lock:
                    self.process = subprocess.Popen(
                        [binary(), *self.args, "--events", str(events_path)],
                        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                        env=self.env, start_new_session=True, preexec_fn=_die_with_parent)
                    if self._stop_requested:
                        self.process.send_signal(signal.SIGTERM)
                interrupted = False
                while True:
                    try:
                        done = self.process.poll() is not None
                        for event in reader.read():
                            self._dispatch(event)
                        if done:
                            break
                        time.sleep(_POLL_S)
                    except KeyboardInterrupt:
                        # Ctrl-C: the child stops cleanly, then the interrupt goes on.
                        interrupted = True
                        self.stop()
                    except BaseException:
                        self._kill()
                        raise
            self.output = log_path.read_text(errors="replace")
        code = self.process.returncode
        if interrupted:
            raise KeyboardInterrupt
        if check and code != 0:
            raise self.error(code)
        return code

    def error(self, code):
        """The exception of exit code `code`: the error event's message, else the output's last
        line; the command's output goes with it."""
        errors = [e for e in self.events if e["event"] == "error"]
        if errors:
            return error_for(code, errors[-1]["message"], self.output)
        lines = [l for l in self.output.splitlines() if l.strip()]
        message = lines[-1] if lines else "detforge ended without a message"
        return error_for(code, message, self.output)

    def _dispatch(self, event):
        self.events.append(event)
        if self.on_event is not None:
            try:
                self.on_event(event)
            except BaseException:
                self._kill()
                raise

    def _kill(self):
        # A failing callback or the parent's own exception: stop the child, wait for it.
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def run(args, on_event=None, check=True):
    """Runs `detforge args...` to its end (Run.run); returns the Run with its events."""
    r = Run(args, on_event)
    r.run(check=check)
    return r


def output(args):
    """The standard output of `detforge args...` (a command without events, such as config);
    raises the error class of its exit code."""
    completed = subprocess.run([binary(), *map(str, args)], capture_output=True, text=True,
                               stdin=subprocess.DEVNULL)
    if completed.returncode != 0:
        lines = [l for l in completed.stderr.splitlines() if l.strip()]
        message = lines[-1] if lines else "detforge ended without a message"
        raise error_for(completed.returncode, message.split(": ", 1)[-1], completed.stderr)
    return completed.stdout


class Server:
    """`detforge predict --serve`: one loaded detector kept alive between requests (its protocol:
    src/engine/predict_server.h). Started by the first request; `close()` ends it."""

    def __init__(self, args):
        self.args = [str(a) for a in args]
        self.process = None
        self.categories = None
        self._tmp = None
        self._next_id = 0

    def request(self, images):
        """The detections of `images` ([{"path": ...} | {"raw": ..., "width", "height"}]): one
        list of results-file entries per image. Raises the error class of a failed request."""
        if self.process is None or self.process.poll() is not None:
            self._start()
        self._next_id += 1
        try:
            self.process.stdin.write(json.dumps({"id": self._next_id, "images": images}) + "\n")
            self.process.stdin.flush()
            reply = self._read_line()
        except BaseException:
            # An interrupt or a dead server mid-request: the next request starts a new one.
            self.close()
            raise
        if "error" in reply:
            e = reply["error"]
            raise error_for(e["exit_code"], e["message"])
        return reply["results"]

    def raw_file(self, index):
        """A file in this server's temporary folder for a numpy image."""
        return Path(self._tmp.name) / f"image{index}.bgr"

    def close(self):
        if self.process is not None and self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def _start(self):
        self.close()
        self._tmp = tempfile.TemporaryDirectory(prefix="detforge-serve-")
        self._events = Path(self._tmp.name) / "events.jsonl"
        self._log = open(Path(self._tmp.name) / "output.log", "wb")
        self.process = subprocess.Popen(
            [binary(), *self.args, "--serve", "--events", str(self._events)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True,
            start_new_session=True, preexec_fn=_die_with_parent)
        self._log.close()
        try:
            self.categories = self._read_line()["categories"]
        except BaseException:
            self.close()
            raise

    def _read_line(self):
        line = self.process.stdout.readline()
        if line:
            return json.loads(line)
        # The server ended: its error event says why (a bad config, weights that do not load).
        code = self.process.wait()
        events = _EventFile(self._events).read()
        errors = [e for e in events if e["event"] == "error"]
        log = (Path(self._tmp.name) / "output.log").read_text(errors="replace")
        message = errors[-1]["message"] if errors else "the predictor ended without a message"
        raise error_for(code if code else 1, message, log)
