"""Every event real commands write matches docs/events.schema.json (jsonschema), and every event
type the schema names is written by one of them."""

import json
from pathlib import Path

import jsonschema
import pytest

from conftest import QUICK, REPOSITORY, binary, detforge

SCHEMA = json.loads((REPOSITORY / "docs" / "events.schema.json").read_text())


def read_events(path):
    lines = Path(path).read_text().splitlines()
    events = [json.loads(line) for line in lines]
    for e in events:
        jsonschema.validate(e, SCHEMA)
    return events


@pytest.fixture(scope="module")
def streams(synth, tmp_path_factory):
    """The event streams of a training run, predict, eval, export and failing commands."""
    tmp = tmp_path_factory.mktemp("events")
    run = tmp / "run"
    streams = {}

    def stream(name, *args, code=0):
        path = tmp / f"{name}.jsonl"
        completed = detforge(*args, "--events", path, check=False)
        assert completed.returncode == code, completed.stderr
        streams[name] = read_events(path)
        return completed

    stream("train", "train", "-c", REPOSITORY / "configs/yolo/synth_yolov8n.yaml",
           f"data.root={synth}", f"output_dir={run}", "train.epochs=2", "data.max_size=128",
           *QUICK)
    stream("fine_tune", "train", "-c", REPOSITORY / "configs/yolo/synth_yolov8n.yaml",
           f"data.root={synth}", f"output_dir={tmp / 'fine_tune'}", "train.epochs=1",
           "data.max_size=128", f"model.weights={run / 'last.ckpt'}", *QUICK)
    stream("predict", "predict", "--config", run / "config.yaml", "--weights", run / "last.ckpt",
           "--ann", synth / "annotations/instances_val.json", "--images", synth / "val", "--out",
           tmp / "dt.json", "--mode", "eval")
    stream("eval", "eval", "--gt", synth / "annotations/instances_val.json", "--dt",
           tmp / "dt.json")
    stream("export", "export", "--config", run / "config.yaml", "--weights", run / "last.ckpt",
           "--out", tmp / "weights.pth")
    stream("config_error", "train", "-c", REPOSITORY / "configs/yolo/synth_yolov8n.yaml",
           f"data.root={synth}", "train.epoch=2", code=3)
    # Events on stdout: the human summary moves to stderr, stdout is JSON lines only.
    completed = detforge("eval", "--gt", synth / "annotations/instances_val.json", "--dt",
                         tmp / "dt.json", "--events", "-")
    streams["stdout"] = [json.loads(line) for line in completed.stdout.splitlines()]
    assert "Average Precision" in completed.stderr
    return streams


def test_every_event_matches_the_schema_and_every_type_is_written(streams):
    written = {e["event"] for s in streams.values() for e in s}
    for s in streams.values():
        for e in s:
            jsonschema.validate(e, SCHEMA)
            assert e["v"] == 1
    # A preemption is written by a run a signal stops (test_package.py's stopped run).
    documented = {branch["properties"]["event"]["const"] for branch in SCHEMA["oneOf"]}
    assert documented - written == {"preemption"}


def test_a_training_run_tells_its_start_epochs_metrics_checkpoints_and_end(streams, synth):
    events = streams["train"]
    kinds = [e["event"] for e in events]
    assert kinds[0] == "run_start" and kinds[-1] == "run_end"
    assert [e["epoch"] for e in events if e["event"] == "epoch_start"] == [0, 1]
    start, end = events[0], events[-1]
    assert start["world_size"] == 1 and start["device"] == "cpu" and start["resume"] is None
    assert f"root: {synth}" in start["config"]
    train = [e for e in events if e["event"] == "train"]
    assert [e["step"] for e in train] == list(range(1, start["total_steps"] + 1))
    assert all("box_loss" in e and "dfl_clamped_targets" in e for e in train)
    evals = [e for e in events if e["event"] == "eval"]
    assert [e["weights"] for e in evals] == ["live", "ema", "live", "ema"]
    assert set(evals[-1]["per_class"]) == {"circle", "rectangle", "triangle"}
    metrics = [json.loads(line) for line in
               (Path(end["run_dir"]) / "metrics.jsonl").read_text().splitlines()]
    assert [m["AP"] for m in metrics if m["type"] == "eval"] == \
        [e["stats"]["AP"] for e in evals]
    checkpoints = {Path(e["path"]).name for e in events if e["event"] == "checkpoint"}
    assert {"last.ckpt", "best.ckpt"} <= checkpoints
    assert end["final"]["live"]["stats"] == evals[-2]["stats"]
    assert end["final"]["ema"]["stats"] == evals[-1]["stats"]
    assert Path(end["last"]).is_file() and end["steps_done"] == start["total_steps"]
    progress = [e for e in events if e["event"] == "progress"]
    assert progress and progress[-1]["step"] == start["total_steps"]
    assert any("DFL" in e["message"] for e in events if e["event"] == "warning")


def test_weights_loaded_into_a_run_are_reported(streams):
    (report,) = [e for e in streams["fine_tune"] if e["event"] == "weights"]
    assert report["path"].endswith("last.ckpt") and report["loaded_fraction"] == 1.0
    assert report["reinitialised"]["tensors"] == report["missing"]["tensors"] == 0
    assert report["loaded"]["values"] > 3_000_000
    assert not [e for e in streams["train"] if e["event"] == "weights"]


def test_commands_tell_what_they_wrote_and_errors_their_category(streams, tmp_path_factory):
    (predictions,) = [e for e in streams["predict"] if e["event"] == "predictions"]
    assert predictions["images"] == 8
    assert predictions["detections"] == len(json.loads(Path(predictions["path"]).read_text()))
    (scored,) = [e for e in streams["eval"] if e["event"] == "eval"]
    assert scored["detections"] == predictions["detections"]
    assert [e for e in streams["stdout"] if e["event"] == "eval"][0]["stats"] == scored["stats"]
    (exported,) = [e for e in streams["export"] if e["event"] == "export"]
    assert exported["format"] == "pth" and Path(exported["path"]).is_file()
    (error,) = [e for e in streams["config_error"] if e["event"] == "error"]
    assert error["exit_code"] == 3 and error["category"] == "config error"
    assert "train.epoch" in error["message"] and "epochs" in error["message"]


def test_an_unwritable_stream_is_an_io_error_naming_it(tmp_path):
    completed = detforge("eval", "--gt", "x", "--dt", "y", "--events",
                         tmp_path / "missing" / "e.jsonl", check=False)
    assert completed.returncode == 6
    assert "missing/e.jsonl" in completed.stderr
    assert Path(binary()).is_file()
