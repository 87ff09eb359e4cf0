"""The Python package, installed by pip into a fresh venv, gives the CLI's numbers: training,
prediction and evaluation; callbacks fire once per event with one and two processes and can stop
a run that then resumes to the uninterrupted run's metrics; errors are typed exceptions with the
binary's message; Ctrl-C leaves no process behind."""

import json
import os
import signal
import subprocess
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from conftest import QUICK, REPOSITORY, detforge, run_python

CONFIG = REPOSITORY / "configs" / "yolo" / "synth_yolov8n.yaml"


def overrides(synth, out, epochs=2):
    return [f"data.root={synth}", f"output_dir={out}", f"train.epochs={epochs}",
            "data.max_size=128", *QUICK]


def kwargs(synth, out, epochs=2):
    return dict(o.split("=", 1) for o in overrides(synth, out, epochs))


def eval_records(run_dir):
    lines = (Path(run_dir) / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["type"] == "eval"]


@pytest.fixture(scope="module")
def yolo_data(synth, tmp_path_factory):
    """The synthetic set as an Ultralytics dataset (detforge convert): its data.yaml."""
    out = tmp_path_factory.mktemp("yolo")
    for split in ("train", "val"):
        detforge("convert", "--from", "coco", "--to", "yolo", "--ann",
                 synth / "annotations" / f"instances_{split}.json", "--images", synth / split,
                 "--split", split, "--out", out)
    return out / "data.yaml"


@pytest.fixture(scope="module")
def cli_run(synth, tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "run"
    detforge("train", "-c", CONFIG, *overrides(synth, out))
    return out


def test_installed_executables_find_every_library_in_the_venv_or_the_system(installed):
    package = run_python(installed, """
        import json, detforge._process as p; print(json.dumps(p.binary()))""")
    site = Path(installed).parents[1].glob("lib/python3*/site-packages")
    site = next(site)
    assert Path(package).is_relative_to(site / "detforge")
    for exe in (Path(package), Path(package).parent / "libexec" / "detforge-torch"):
        ldd = subprocess.run(["ldd", exe], capture_output=True, text=True, check=True).stdout
        assert "not found" not in ldd, ldd
        for line in ldd.splitlines():
            if "=>" not in line or "libtorch" not in line:
                continue
            resolved = Path(line.split("=>")[1].split("(")[0].strip())
            # Torch from the venv the package is installed in, through the relative RUNPATH.
            assert str(resolved).startswith(str(site / "detforge" / "_bin")), line


def test_train_equals_the_cli_and_val_equals_eval_and_pycocotools(installed, synth, cli_run,
                                                                  yolo_data, tmp_path):
    out = tmp_path / "py"
    result = run_python(installed, f"""
        import json, detforge
        m = detforge.Model("synth_yolov8n")
        epochs = []
        m.add_callback("epoch_start", lambda e: epochs.append(e["epoch"]))
        r = m.train(verbose=False, **{kwargs(synth, out)!r})
        trained = detforge.Model(str(r.run_dir))
        val = trained.val(batch=4)
        val_yolo = trained.val(data={str(yolo_data)!r}, batch=4)
        print(json.dumps({{"epochs": epochs, "metrics": r.metrics, "last": str(r.last),
                          "history": len(r.history), "val": val, "val_yolo": val_yolo}}))""")
    # The same split read from the Ultralytics copy: the same numbers, its class names.
    assert result["val_yolo"]["stats"] == pytest.approx(result["val"]["stats"], abs=1e-6)
    assert result["val_yolo"]["per_class"] == pytest.approx(result["val"]["per_class"], abs=1e-6)
    assert result["epochs"] == [0, 1]
    assert eval_records(out) == eval_records(cli_run)
    assert result["metrics"]["AP"] == eval_records(cli_run)[-2]["AP"]
    # val: the run's best weights through predict --mode eval, scored by detforge eval and by
    # pycocotools on the same detections.
    dt = tmp_path / "dt.json"
    gt = synth / "annotations" / "instances_val.json"
    detforge("predict", "--config", out / "config.yaml", "--weights", out / "best.ckpt",
             "--ann", gt, "--images", synth / "val", "--out", dt, "--mode", "eval",
             "--batch-size", 4)
    coco = COCO(str(gt))
    e = COCOeval(coco, coco.loadRes(str(dt)), "bbox")
    e.evaluate(), e.accumulate(), e.summarize()
    assert list(result["val"]["stats"].values()) == pytest.approx(
        [result["val"]["stats"][k] for k in result["val"]["stats"]])
    names = ["AP", "AP50", "AP75", "APs", "APm", "APl", "AR1", "AR10", "AR100", "ARs", "ARm",
             "ARl"]
    assert [result["val"]["stats"][k] for k in names] == pytest.approx(list(e.stats), abs=1e-12)


def test_predict_gives_the_boxes_detforge_predict_writes(installed, synth, cli_run, tmp_path):
    dt = tmp_path / "dt.json"
    detforge("predict", "--config", cli_run / "config.yaml", "--weights", cli_run / "best.ckpt",
             "--source", synth / "val", "--out", dt, "model.inference.score_threshold=0.001")
    images = sorted((synth / "val").iterdir())
    result = run_python(installed, f"""
        import json, numpy as np, detforge
        from PIL import Image
        m = detforge.Model({str(cli_run)!r})
        files = {[str(p) for p in images]!r}
        by_path = m.predict(files, conf=0.001)
        by_folder = m.predict({str(synth / "val")!r}, conf=0.001)
        bgr = [np.asarray(Image.open(f).convert("RGB"))[:, :, ::-1] for f in files[:2]]
        by_array = m.predict(bgr, conf=0.001)
        out = lambda rs: [dict(xyxy=r.boxes.xyxy.tolist(), xywh=r.boxes.xywh.tolist(),
                               conf=r.boxes.conf.tolist(), cls=r.boxes.cls.tolist(),
                               shape=list(r.orig_shape), names=r.names) for r in rs]
        drawn = by_path[0].plot()
        exported = str(m.export(format="pth", out={str(tmp_path / "exported.pth")!r}))
        # One loaded predictor answers every call: one image per call gives the same boxes; a
        # bad image is a DataError naming it, and the same process answers the next call.
        (server,) = m._servers.values()
        pid = server.process.pid
        one_by_one = [m.predict(f, conf=0.001)[0] for f in files]
        try:
            m.predict({str(synth / "annotations" / "instances_val.json")!r} + ".jpg")
        except FileNotFoundError:
            pass
        bad = {str(tmp_path / "bad.jpg")!r}
        open(bad, "w").write("not a jpeg")
        try:
            m.predict(bad, conf=0.001)
            error = None
        except detforge.DataError as e:
            error = str(e)
        again = m.predict(files[0], conf=0.001)[0]
        same = server.process.pid == pid and len(m._servers) == 1
        m.close()
        print(json.dumps(dict(path=out(by_path), folder=out(by_folder), array=out(by_array),
                              drawn=list(drawn.shape), one_by_one=out(one_by_one),
                              error=error, again=out([again]), same=same,
                              exported=exported)))""")
    assert result["exported"] == str(tmp_path / "exported.pth")
    assert (tmp_path / "exported.pth").stat().st_size > 1_000_000
    assert result["same"] and "bad.jpg" in result["error"]
    assert result["one_by_one"] == result["path"] and result["again"] == result["path"][:1]
    written = json.loads(dt.read_text())
    assert len(written) > 0
    names = json.loads(dt.with_suffix(".categories.json").read_text())
    cls_of = {c["id"]: i for i, c in enumerate(names)}
    assert result["path"] == result["folder"]
    assert len(result["path"]) == len(images)
    for i, r in enumerate(result["path"]):
        mine = [d for d in written if d["image_id"] == i]
        assert len(r["conf"]) == len(mine)
        for d, xyxy, xywh, conf, c in zip(mine, r["xyxy"], r["xywh"], r["conf"], r["cls"]):
            x, y, w, h = d["bbox"]
            assert xyxy == pytest.approx([x, y, x + w, y + h], abs=1e-4)
            assert xywh == pytest.approx([x + w / 2, y + h / 2, w, h], abs=1e-4)
            assert conf == pytest.approx(d["score"], rel=1e-6) and c == cls_of[d["category_id"]]
        assert r["names"] == {str(i): c["name"] for i, c in enumerate(names)}
    # numpy (BGR) images: the same boxes as their files (PNG round trip of the decoded pixels).
    for a, p in zip(result["array"], result["path"][:2]):
        assert a["shape"] == p["shape"]
        assert np.allclose(a["xyxy"], p["xyxy"], atol=1e-3) and a["cls"] == p["cls"]
    assert result["drawn"] == result["path"][0]["shape"] + [3]


def test_a_callback_stops_the_run_and_resume_reaches_the_uninterrupted_metrics(
        installed, synth, cli_run, tmp_path):
    out = tmp_path / "stopped"
    result = run_python(installed, f"""
        import json, detforge
        m = detforge.Model("synth_yolov8n")
        m.add_callback("train", lambda e: m.stop() if e["step"] == 2 else None)
        kinds = []
        m.add_callback("preemption", lambda e: kinds.append(e["stopped"]))
        first = m.train(verbose=False, **{kwargs(synth, out)!r})
        second = m.train(resume=True, verbose=False)
        print(json.dumps(dict(stopped=first.stopped, steps=first.steps_done, kinds=kinds,
                              last=str(first.last), resumed=second.stopped,
                              total=second.steps_done)))""")
    assert result["stopped"] and not result["resumed"]
    assert 2 <= result["steps"] < result["total"] and result["kinds"][-1] is True
    assert eval_records(out)[-2:] == eval_records(cli_run)[-2:]


def test_two_processes_fire_each_callback_once(installed, synth, tmp_path):
    out = tmp_path / "two"
    result = run_python(installed, f"""
        import json, detforge
        m = detforge.Model("synth_yolov8n")
        seen = {{"epoch_start": [], "run_start": [], "eval": [], "run_end": []}}
        for k in seen:
            m.add_callback(k, lambda e, k=k: seen[k].append(e.get("epoch", e.get("world_size"))))
        r = m.train(nproc=2, verbose=False, **{kwargs(synth, out)!r})
        print(json.dumps(dict(seen=seen, final=r.metrics)))""")
    assert result["seen"] == {"epoch_start": [0, 1], "run_start": [2], "eval": [0, 0, 1, 1],
                              "run_end": [None]}
    assert "AP" in result["final"]


def test_errors_are_typed_exceptions_with_the_binarys_message(installed, synth, tmp_path):
    broken = tmp_path / "broken"
    subprocess.run(["cp", "-r", synth, broken], check=True)
    ann = broken / "annotations" / "instances_train.json"
    data = json.loads(ann.read_text())
    data["annotations"][0]["bbox"][2] = -5
    ann.write_text(json.dumps(data))
    image = data["annotations"][0]["image_id"]
    result = run_python(installed, f"""
        import json, detforge
        m = detforge.Model("synth_yolov8n")
        caught = {{}}
        for name, kw in [("data", {kwargs(broken, tmp_path / "b")!r}),
                         ("config", {{"train.epoch": 2}}), ("argument", {{"epohcs": 2}})]:
            try:
                m.train(verbose=False, **kw)
            except detforge.DetforgeError as e:
                caught[name] = [type(e).__name__, e.exit_code, str(e)]
        try:
            detforge.Model("yolo11")
        except detforge.ConfigError as e:
            caught["model"] = str(e)
        print(json.dumps(caught))""")
    kind, code, message = result["data"]
    assert (kind, code) == ("DataError", 4)
    assert f"image_id={image}" in message and "instances_train.json" in message
    assert result["config"][:2] == ["ConfigError", 3] and "epochs" in result["config"][2]
    assert result["argument"][0] == "ConfigError" and "'epochs'" in result["argument"][2]
    assert "yolo11n" in result["model"]


def start_training_parent(installed, synth, out):
    """A Python process training a long run; returns once its first step is done."""
    code = f"""
        import detforge, sys
        m = detforge.Model("synth_yolov8n")
        m.add_callback("train", lambda e: print("step", e["step"], flush=True))
        try:
            m.train(verbose=False, **{kwargs(synth, out, epochs=50)!r})
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            sys.exit(0)
        """
    env = {k: v for k, v in os.environ.items() if k != "DETFORGE_BINARY"}
    parent = subprocess.Popen([str(installed), "-c", textwrap.dedent(code)], cwd="/", env=env,
                              stdout=subprocess.PIPE, text=True)
    assert parent.stdout.readline().startswith("step")
    return parent


def no_process_left(out, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        ps = subprocess.run(["pgrep", "-f", str(out)], capture_output=True, text=True).stdout
        if not ps.strip() or time.monotonic() > deadline:
            return ps.strip() == ""
        time.sleep(0.2)


def test_ctrl_c_stops_the_run_cleanly_and_leaves_no_process(installed, synth, tmp_path):
    out = tmp_path / "interrupted"
    parent = start_training_parent(installed, synth, out)
    parent.send_signal(signal.SIGINT)
    assert parent.wait(timeout=120) == 0
    assert "interrupted" in parent.stdout.read()
    assert (out / "last.ckpt").is_file()
    assert no_process_left(out, timeout=5)


def test_a_killed_parent_takes_its_training_with_it(installed, synth, tmp_path):
    out = tmp_path / "orphan"
    parent = start_training_parent(installed, synth, out)
    parent.kill()
    parent.wait()
    # The child got SIGTERM (PR_SET_PDEATHSIG): it writes last.ckpt as on preemption and ends.
    assert no_process_left(out)
    assert (out / "last.ckpt").is_file()


def test_an_ultralytics_file_fine_tunes_on_a_yolo_dataset_by_name(installed, synth, yolo_data,
                                                                  tmp_path):
    """Model("yolov8n.pt").train(data="data.yaml"): the shipped config named as the file, the
    class layers of Ultralytics' 80 classes re-initialised for the dataset's 3, reported as a
    `weights` event; the trained Model then predicts with the dataset's class names."""
    weights = tmp_path / "yolov8n.pt"
    result = run_python(installed, f"""
        import json, detforge
        from ultralytics import YOLO
        YOLO("yolov8n.yaml").save({str(weights)!r})
        m = detforge.Model({str(weights)!r})
        config = m.config
        reports = []
        m.add_callback("weights", reports.append)
        r = m.train(data={str(yolo_data)!r}, epochs=1, imgsz=128,
                    batch=8, project={str(tmp_path)!r}, name="run", verbose=False,
                    **{{"data.workers": 0}})
        names = m.predict({str(synth / "val")!r}, conf=0.001)[0].names
        print(json.dumps(dict(config=config, reports=reports, run=str(r.run_dir), names=names,
                              weights=m.weights)))""")
    assert result["config"].endswith("/yolo/yolov8n.yaml")
    (report,) = result["reports"]
    assert report["path"] == str(weights) and 0.8 < report["loaded_fraction"] < 1.0
    assert report["reinitialised"]["tensors"] > 0
    assert result["run"] == str(tmp_path / "run")
    assert result["weights"].startswith(result["run"])
    assert result["names"] == {"0": "circle", "1": "rectangle", "2": "triangle"}


def test_ultralytics_device_forms_become_detforge_devices_and_processes(installed):
    result = run_python(installed, """
        import json
        from detforge.model import _device
        print(json.dumps([_device(0, None), _device("2,3", None), _device([0, 1], None),
                          _device("cpu", None), _device("cuda:1", None)]))""")
    assert result == [["cuda:0", None, None], ["cuda", 2, "2,3"], ["cuda", 2, "0,1"],
                      ["cpu", None, None], ["cuda:1", None, None]]
