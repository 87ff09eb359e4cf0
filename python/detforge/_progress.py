"""Training progress for a person watching: a tqdm bar where tqdm is installed (terminal or
notebook), otherwise a line every 30 s; evaluations and warnings as lines."""

import logging
import sys
import time

_log = logging.getLogger("detforge")
_LINE_EVERY_S = 30.0


class Progress:
    def __init__(self, verbose=True):
        self.verbose = verbose
        self.bar = None
        self.last_line = 0.0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.close()
        return False

    def __call__(self, event):
        kind = event["event"]
        if kind == "warning":
            _log.warning(event["message"])
        if not self.verbose:
            return
        if kind == "run_start":
            self._start(event)
        elif kind == "progress":
            self._progress(event)
        elif kind == "eval":
            s = event["stats"]
            self._write(f"eval ({event.get('weights', 'weights')}) epoch {event.get('epoch', 0) + 1}:"
                        f" AP {s['AP']:.4f} AP50 {s['AP50']:.4f} AP75 {s['AP75']:.4f}")

    def _start(self, event):
        self._write(f"detforge: training in {event['run_dir']} on {event['device']} "
                    f"({event['world_size']} process(es), {event['total_steps']} steps)")
        try:
            from tqdm.auto import tqdm
        except ImportError:
            return
        self.bar = tqdm(total=event["total_steps"], unit="step", file=sys.stderr)

    def _progress(self, event):
        if self.bar is not None:
            self.bar.n = event["step"]
            loss = event["loss"]
            self.bar.set_postfix_str(f"epoch {event['epoch'] + 1}/{event['epochs']} "
                                     + (f"loss {loss:.4f}" if loss is not None else ""))
            return
        now = time.monotonic()
        if now - self.last_line >= _LINE_EVERY_S or event["step"] >= event["total_steps"]:
            self.last_line = now
            self._write(f"epoch {event['epoch'] + 1}/{event['epochs']} step {event['step']}/"
                        f"{event['total_steps']} loss {event['loss']} "
                        f"{event['images_per_s']:.1f} img/s eta {event['eta_s']:.0f} s")

    def _write(self, text):
        if self.bar is not None:
            self.bar.write(text, file=sys.stderr)
        else:
            print(text, file=sys.stderr, flush=True)
