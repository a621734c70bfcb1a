"""The experiments (`python3 -m stoke.experiments deepiq|shuffle|batch --scale small`) and the stall
report (`python3 -m stoke.report`), checked as a person would: each small-scale run writes its JSON
and a self-contained HTML report and prints its tables; headless Chromium (Debian's `chromium`)
opens each report, takes a screenshot that must not be blank, and measures the charts (every SVG
chart has a non-zero size and its marks) and the numbers (every number the page takes from the
JSON is the JSON's value, shown with its format). The same seed gives the same JSON apart from the
"measured" members (times). The stall attribution is checked on hand-made traces and bad input.

About two to three minutes on 2 cores (deepiq about 40 s on the emulated blob store, shuffle about
40 s, batch about 15 s and again for the reproducibility check). Needs the object-store emulators
(tests/servers), Microsoft's Azure SDK (python3-azure) and chromium, which scripts/bootstrap.sh
installs: without them the tests that need them skip, unless CI is set, where that is a failure.

    STOKE_BIN=build/stoke /usr/bin/python3 -m pytest -q python/tests/test_experiments.py
"""

import html
import importlib.util
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from stoke_env import PYTHONPATH, REPO, import_stoke

stoke = import_stoke()

from stoke import report  # noqa: E402
from stoke.experiments import common, html as H  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
HAVE_SERVERS = (REPO / "tests" / "servers" / "node_modules" / "azurite").is_dir()
HAVE_AZURE_SDK = importlib.util.find_spec("azure.storage.blob") is not None
HAVE_PIL = importlib.util.find_spec("PIL") is not None


def need(ok, what):
    if ok:
        return
    if os.environ.get("CI"):
        raise AssertionError(f"{what} is missing: run scripts/bootstrap.sh")
    pytest.skip(f"{what} not installed (run scripts/bootstrap.sh)")


def env():
    e = dict(os.environ)
    e["PYTHONPATH"] = PYTHONPATH + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    e["STOKE_SOURCE_DIR"] = str(REPO)
    return e


def run_experiment(name, out, *extra, timeout=600):
    """Runs one small experiment; returns (its JSON, its stdout)."""
    cmd = [sys.executable, "-m", "stoke.experiments", name, "--scale", "small", "--out", str(out), *map(str, extra)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env(), timeout=timeout, cwd=REPO)
    assert r.returncode == 0, f"{' '.join(cmd)} failed:\n{r.stdout}\n{r.stderr[-6000:]}"
    return json.loads((Path(out) / f"{name}.json").read_text()), r.stdout


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Each experiment at small scale, run once for the whole module (lazily)."""
    base = tmp_path_factory.mktemp("experiments")
    done = {}

    def get(name):
        if name not in done:
            if name == "deepiq":
                need(HAVE_SERVERS, "the object-store emulators (tests/servers/node_modules)")
                need(HAVE_AZURE_SDK, "Microsoft's Azure SDK for Python (python3-azure)")
            out = base / name
            doc, stdout = run_experiment(name, out)
            done[name] = (doc, stdout, out)
        return done[name]
    return get


# ---------------------------------------------------------------------------
# the experiments' results

def test_deepiq_small(runs):
    doc, stdout, out = runs("deepiq")
    assert doc["experiment"] == "deepiq" and doc["scale"] == "small" and doc["storage"]["kind"] == "azurite"
    from stoke.experiments import deepiq
    assert doc["storage"]["latency_ms"] == deepiq.LATENCY_MS and doc["storage"]["bandwidth_bytes_per_s"] == 125e6
    cells = {(c["device"], c["layout"]): c for c in doc["cells"]}
    assert set(cells) >= {("cpu", "per_file"), ("cpu", "table")}
    import torch
    if not torch.cuda.is_available():
        assert any("CUDA" in s for s in doc["skipped"]) and "skipped" in stdout
    steps = doc["schedule"]["steps_per_epoch"]
    for c in doc["cells"]:
        assert len(c["epochs"]) == 5 and all(e["steps"] == steps and e["samples"] == steps * 32 for e in c["epochs"])
        assert 0 <= c["val_accuracy"] <= 1 and c["val_samples"] == doc["workload"]["val"]
        m = c["measured"]
        assert m["train_seconds"] > 0 and 0 <= m["wait_share"] <= 1
        assert math.isclose(sum(e["measured"]["seconds"] for e in c["epochs"]), m["train_seconds"], rel_tol=0.2)
    # same seed, same model: both layouts start from the same initialisation and the model is the published one
    assert cells[("cpu", "per_file")]["parameters"] == cells[("cpu", "table")]["parameters"]
    assert doc["published"]["parameters"]["trainable"] == 33361089
    # the table was ingested one file per sample and OPTIMIZEd into one
    t = doc["layouts"]["table"]
    assert t["files_ingested"] == doc["workload"]["samples"] and t["files"] == 1
    # the ratio is the ratio of the cells' times
    r = doc["measured"]["speedups"]["cpu"]
    assert math.isclose(r, cells[("cpu", "per_file")]["measured"]["train_seconds"] /
                        cells[("cpu", "table")]["measured"]["train_seconds"])
    # the table cell's stall attribution, from its trace and steps written next to the report
    table = cells[("cpu", "table")]
    assert (out / table["trace_file"]).is_file() and (out / table["steps_file"]).is_file()
    att = table["measured"]["stalls"]
    charged = sum(v["seconds"] for k, v in att["by_stage"].items() if k != "copy")
    assert math.isclose(charged, att["stall_seconds"], rel_tol=1e-6, abs_tol=1e-9)
    assert sum(v["stalls_behind"] for k, v in att["by_stage"].items() if k != "copy") == att["stalls"]
    assert att["step_offset_seconds"] is not None
    for head in ("device", "layout", "train s", "data wait", "published", "faster than per-file"):
        assert head in stdout


def test_shuffle_small(runs):
    doc, stdout, _ = runs("shuffle")
    assert [o["name"] for o in doc["orders"]] == ["none", "global", "block 32", "block 256"]
    assert doc["caches"] == ["warm", "cold"]
    assert [s["name"] for s in doc["sizes"]] == ["large", "small"]
    for s in doc["sizes"]:
        runs_by = {(r["cache"], r["order"]): r for r in s["runs"]}
        assert len(runs_by) == len(doc["orders"]) * 2
        for order in doc["orders"]:
            warm, cold = runs_by[("warm", order["name"])], runs_by[("cold", order["name"])]
            # the cache changes the times only: the same order, the same arithmetic, the same accuracy
            assert [e["train_loss"] for e in warm["epochs"]] == [e["train_loss"] for e in cold["epochs"]]
            assert [e["val_accuracy"] for e in warm["epochs"]] == [e["val_accuracy"] for e in cold["epochs"]]
        none, glob = runs_by[("warm", "none")], runs_by[("warm", "global")]
        assert none["epochs"][0]["mean_jump"] == 1.0
        assert glob["epochs"][0]["mean_jump"] > 10 * none["epochs"][0]["mean_jump"]
        assert glob["epochs"][0]["distinct_file_fraction"] > none["epochs"][0]["distinct_file_fraction"]
        for r in s["runs"]:
            assert len(r["epochs"]) == doc["schedule"]["epochs"]
            for e in r["epochs"]:
                assert set(e["measured"]["phases_per_step"]) == {"data_wait", "h2d", "forward_backward", "optimizer", "total"}
                assert 0 <= e["measured"]["wait_share"] <= 1
        assert {(a["cache"], a["order"]) for a in s["loading_alone"]} == set(runs_by)
        assert all(a["samples"] == s["loading_alone"][0]["samples"] > 0 for a in s["loading_alone"])
    assert len(doc["measured"]["global_vs_none"]) == 4
    assert "global shuffle's median epoch time" in stdout and "I/O share" in stdout


def test_batch_small(runs):
    doc, stdout, _ = runs("batch")
    s = doc["schedule"]
    assert len(doc["runs"]) == 2 * len(s["batch_sizes"]) * len(s["processes"])
    for r in doc["runs"]:
        assert math.isclose(r["lr"], 1e-3 * r["batch_size"] / 32)
        assert r["per_process_batch"] * r["processes"] == r["batch_size"]
        assert len(r["epochs"]) == s["epochs"]
        # every epoch trains on the whole training split, whatever the process count
        n = r["epochs"][0]["samples"]
        assert n > 0 and n % r["batch_size"] == 0
        if r["reached_target_after_epochs"] is not None:
            k = r["reached_target_after_epochs"]
            assert r["epochs"][k - 1]["val_accuracy"] >= s["target_accuracy"]
            assert all(e["val_accuracy"] < s["target_accuracy"] for e in r["epochs"][:k - 1])
    assert {(e["loader"], e["batch_size"]) for e in doc["measured"]["efficiency"]} == \
        {(ld, b) for ld in ("torch", "stoke") for b in s["batch_sizes"]}
    assert doc["workload"]["name"] == "images" and "JPEG" in doc["workload"]["description"]
    assert "VGG16" in doc["workload"]["note"] and "note:" in stdout


def test_same_seed_same_json(runs, tmp_path):
    """Two runs with the same seed and options: equal JSON once the measured members are removed."""
    doc, _, out = runs("batch")
    keep = tmp_path / "first"
    shutil.copytree(out, keep)
    try:
        again, _ = run_experiment("batch", out)  # same options, same --out: the same command line
    finally:  # the other tests read the first run's files
        shutil.rmtree(out)
        shutil.copytree(keep, out)
    assert common.strip_measured(again) == common.strip_measured(doc)
    assert again["runs"][0]["epochs"][0]["train_loss"] == doc["runs"][0]["epochs"][0]["train_loss"]


# ---------------------------------------------------------------------------
# the reports, as a browser shows them

MEASURE = """<script>
window.addEventListener('load', () => {
  const out = {charts: [], numbers: []};
  for (const s of document.querySelectorAll('svg.chart')) {
    const r = s.getBoundingClientRect();
    const marks = [...s.querySelectorAll('rect.bar, circle.point, rect.span')].map(m => {
      const b = m.getBoundingClientRect(); return [b.width, b.height]; });
    out.charts.push({id: s.id, width: r.width, height: r.height, marks: marks});
  }
  for (const e of document.querySelectorAll('[data-path]')) {
    out.numbers.push({path: e.getAttribute('data-path'), value: e.getAttribute('data-value'),
                      format: e.getAttribute('data-format'), text: e.textContent, tag: e.tagName});
  }
  const pre = document.createElement('pre'); pre.id = 'measure'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def chromium(*args, timeout=120):
    profile = tempfile.mkdtemp(prefix="stoke-chromium-")
    try:
        cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               f"--user-data-dir={profile}", *args]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        assert r.returncode == 0, f"chromium failed: {r.stderr[-3000:]}"
        return r.stdout
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def measure_page(page, tmp_path):
    """Chromium's view of a report: chart sizes and the numbers the DOM holds."""
    copy = tmp_path / "measured.html"
    copy.write_text(page.read_text().replace("</body>", MEASURE + "</body>"))
    dom = chromium("--dump-dom", copy.as_uri())
    m = re.search(r'<pre id="measure">(.*?)</pre>', dom, re.S)
    assert m, "the measuring script did not run"
    return json.loads(html.unescape(m.group(1)))


def check_report(name, doc, out, tmp_path, min_charts, min_numbers):
    need(CHROMIUM, "chromium")
    need(HAVE_PIL, "python3-pil")
    page = out / f"{name}.html"
    text = page.read_text()
    # self-contained: no script, no stylesheet or image from elsewhere
    assert "<script" not in text.lower() and "<link" not in text.lower() and "@import" not in text
    assert not re.search(r'(src|href)\s*=\s*"(https?:)?//', text) and "url(" not in text
    # a screenshot that is not blank
    shot = tmp_path / f"{name}.png"
    chromium(f"--screenshot={shot}", "--window-size=1200,2400", "--hide-scrollbars", page.as_uri())
    from PIL import Image, ImageStat
    img = Image.open(shot).convert("L")
    stat = ImageStat.Stat(img)
    assert stat.stddev[0] > 15, f"{name}: the screenshot looks blank (stddev {stat.stddev[0]:.1f})"
    hist = img.histogram()
    dark = sum(hist[:200]) / (img.width * img.height)
    assert dark > 0.01, f"{name}: only {dark:.2%} of the screenshot is drawn"
    # the charts render, with marks of non-zero size
    seen = measure_page(page, tmp_path)
    assert len(seen["charts"]) >= min_charts, seen["charts"]
    for c in seen["charts"]:
        assert c["width"] > 100 and c["height"] > 100, c
        assert c["marks"], f"chart {c['id']} has no marks"
        assert any(w > 0 and h > 0 for w, h in c["marks"]), f"chart {c['id']}: every mark is empty"
    # every number in the page is the JSON's, shown with its format
    nums = seen["numbers"]
    assert len(nums) >= min_numbers, len(nums)
    for n in nums:
        value = H.resolve(doc, n["path"])
        assert json.loads(n["value"]) == value, (n["path"], n["value"], value)
        if n["format"] is not None:
            assert n["text"] == H.Num(value, n["path"], n["format"]).text(), (n["path"], n["text"], value)
    return seen


def test_deepiq_report_in_chromium(runs, tmp_path):
    doc, _, out = runs("deepiq")
    seen = check_report("deepiq", doc, out, tmp_path, min_charts=5, min_numbers=60)
    ids = {c["id"] for c in seen["charts"]}
    assert {"deepiq-train-time", "deepiq-published", "deepiq-phases", "stalls-cpu-by-stage", "stalls-cpu-timeline"} <= ids
    paths = {n["path"] for n in seen["numbers"]}
    assert "/measured/speedups/cpu" in paths and "/published/cells/0/hours" in paths
    assert "/cells/1/measured/stalls/by_stage/fetch/seconds" in paths


def test_shuffle_report_in_chromium(runs, tmp_path):
    doc, _, out = runs("shuffle")
    seen = check_report("shuffle", doc, out, tmp_path, min_charts=4, min_numbers=100)
    paths = {n["path"] for n in seen["numbers"]}
    assert "/measured/global_vs_none/0/ratio" in paths
    assert "/sizes/0/runs/0/epochs/0/measured/phases_per_step/data_wait" in paths
    # one traced run per sample size (global shuffle, cold), with its stall attribution
    ids = {c["id"] for c in seen["charts"]}
    assert {"stalls-large-by-stage", "stalls-large-timeline", "stalls-small-timeline"} <= ids
    traced = [(si, ri) for si, sz in enumerate(doc["sizes"]) for ri, r in enumerate(sz["runs"]) if "trace_file" in r]
    assert [(doc["sizes"][si]["runs"][ri]["cache"], doc["sizes"][si]["runs"][ri]["order"]) for si, ri in traced] == \
        [("cold", "global")] * 2
    assert f"/sizes/{traced[0][0]}/runs/{traced[0][1]}/measured/stalls/wait_seconds" in paths


def test_batch_report_in_chromium(runs, tmp_path):
    doc, _, out = runs("batch")
    seen = check_report("batch", doc, out, tmp_path, min_charts=5, min_numbers=40)
    traced = [i for i, r in enumerate(doc["runs"]) if "trace_file" in r]
    assert len(traced) == 1 and doc["runs"][traced[0]]["loader"] == "stoke" and doc["runs"][traced[0]]["processes"] == 1
    assert {"batch-throughput", "batch-time-to-accuracy", "batch-efficiency", f"stalls-{traced[0]}-timeline"} <= \
        {c["id"] for c in seen["charts"]}


# ---------------------------------------------------------------------------
# stoke.report: the stall attribution

def X(name, ts_us, dur_us, batch, tid=1):
    return {"ph": "X", "name": name, "ts": ts_us, "dur": dur_us, "pid": 1, "tid": tid, "args": {"batch": batch, "bytes": 0}}


def write_trace(path, events):
    path.write_text(json.dumps({"traceEvents": [{"ph": "M", "name": "thread_name", "pid": 1, "tid": 9,
                                                 "args": {"name": "consumer"}}, *events]}))
    return str(path)


def test_stall_attribution_names_the_stage_behind(tmp_path):
    ev = [
        # batch 0: its reads are still in flight for the whole wait -> fetch
        X("plan", 0, 100, 0), X("fetch", 100, 20000, 0), X("decode", 20100, 400, 0),
        X("wait", 1000, 19500, 0, tid=9),
        # batch 1: read before the wait; decode runs from 30 ms to 40 ms, the wait is 32..40 ms -> decode
        X("fetch", 21000, 5000, 1), X("decode", 30000, 10000, 1), X("wait", 32000, 8000, 1, tid=9),
        # batch 2: read, then nothing until its transform starts (queued for a worker) -> transform
        X("fetch", 41000, 1000, 2), X("transform", 50000, 2000, 2), X("wait", 45000, 7000, 2, tid=9),
        # a short wait is no stall
        X("wait", 60000, 500, 3, tid=9),
    ]
    att = report.attribute_stalls(report.load_trace(write_trace(tmp_path / "t.json", ev)))
    assert att["waits"] == 4 and att["stalls"] == 3
    assert math.isclose(att["wait_seconds"], 0.035)
    bs = att["by_stage"]
    assert math.isclose(bs["fetch"]["seconds"], 0.0191) and bs["fetch"]["stalls_behind"] == 1
    assert math.isclose(bs["decode"]["seconds"], 0.0084) and bs["decode"]["stalls_behind"] == 1
    assert math.isclose(bs["transform"]["seconds"], 0.007) and bs["transform"]["stalls_behind"] == 1
    assert math.isclose(bs["other"]["seconds"], 0.0)
    assert [s["behind"] for s in att["longest"]] == ["fetch", "decode", "transform"]


def test_each_wait_sees_only_its_own_production_of_the_batch(tmp_path):
    # batch 0 of epoch 0, then batch 0 of epoch 1: the later production's spans do not explain the
    # earlier wait (its last 0.5 ms, when nothing of the batch ran, is "other"), and the earlier
    # production's do not explain the later wait (1 ms queued for decode, then 6 ms of decode)
    ev = [X("fetch", 0, 5000, 0), X("wait", 1000, 4500, 0, tid=9),
          X("fetch", 10000, 1000, 0), X("decode", 12000, 6000, 0), X("wait", 11000, 7000, 0, tid=9)]
    att = report.attribute_stalls(report.load_trace(write_trace(tmp_path / "t.json", ev)))
    bs = att["by_stage"]
    assert math.isclose(bs["fetch"]["seconds"], 0.004) and bs["fetch"]["stalls_behind"] == 1
    assert math.isclose(bs["other"]["seconds"], 0.0005) and bs["other"]["stalls_behind"] == 0
    assert math.isclose(bs["decode"]["seconds"], 0.007) and bs["decode"]["stalls_behind"] == 1


def test_steps_align_and_copies_count(tmp_path):
    ev = [X("fetch", 0, 10000, 0), X("wait", 2000, 8000, 0, tid=9), X("fetch", 11000, 3000, 1),
          X("wait", 12000, 2000, 1, tid=9)]
    trace = report.load_trace(write_trace(tmp_path / "t.json", ev))
    # the trainer's clock is 100 s ahead of the trace's
    steps = [{"epoch": 0, "step": 0, "start": 100.0019, "data_wait": 0.0081, "h2d": 0.002, "forward_backward": 0.001,
              "optimizer": 0.0001, "total": 0.0112},
             {"epoch": 0, "step": 1, "start": 100.0115, "data_wait": 0.0025, "h2d": 0.0, "forward_backward": 0.001,
              "optimizer": 0.0001, "total": 0.0036}]
    att = report.attribute_stalls(trace, steps)
    assert math.isclose(att["step_offset_seconds"], -100.0, abs_tol=1e-6)
    assert math.isclose(att["by_stage"]["copy"]["seconds"], 0.002) and att["by_stage"]["copy"]["stalls_behind"] == 1
    assert math.isclose(att["trainer_data_wait_seconds"], 0.0106)


def test_report_cli(runs, tmp_path):
    doc, _, out = runs("deepiq")
    cell = next(c for c in doc["cells"] if c["layout"] == "table")
    page, js = tmp_path / "r.html", tmp_path / "r.json"
    r = subprocess.run([sys.executable, "-m", "stoke.report", str(out / cell["trace_file"]), "--steps",
                        str(out / cell["steps_file"]), "--out", str(page), "--json", str(js)],
                       capture_output=True, text=True, env=env(), timeout=120)
    assert r.returncode == 0, r.stderr
    assert "stalls behind" in r.stdout and "fetch" in r.stdout
    att = json.loads(js.read_text())["attribution"]
    assert att == json.loads(json.dumps(cell["measured"]["stalls"]))  # the same analysis as the experiment's page
    text = page.read_text()
    assert "Stall attribution" in text and 'id="stalls-timeline"' in text and "<script" not in text


def test_report_bad_input(tmp_path):
    def fails(content, match, steps=None):
        p = tmp_path / "bad.json"
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content)
        args = [sys.executable, "-m", "stoke.report", str(p), "--out", str(tmp_path / "o.html")]
        if steps is not None:
            s = tmp_path / "steps.json"
            s.write_text(steps)
            args[4:4] = ["--steps", str(s)]
        r = subprocess.run(args, capture_output=True, text=True, env=env(), timeout=60)
        assert r.returncode == 2, (content, r.stdout, r.stderr)
        assert match in r.stderr and "Traceback" not in r.stderr, r.stderr
        return r.stderr

    assert "no such trace file" in fails_missing(tmp_path)
    fails('{"traceEvents": [', "not JSON (line 1")
    fails(b"\xff\xfe\x00", "cannot read the trace")
    fails('{"events": []}', "no traceEvents list")
    fails('{"traceEvents": [1]}', "event 0: not an object")
    fails('{"traceEvents": [{"ph": "X", "name": "fetch", "ts": "a", "dur": 1}]}', "event 0: 'ts' is not a finite number")
    fails('{"traceEvents": [{"ph": "X", "name": "fetch", "ts": 1, "dur": -5}]}', "event 0: negative duration")
    fails('{"traceEvents": [{"ph": "X", "name": 3, "ts": 1, "dur": 1}]}', "'name' is not a string")
    fails('{"traceEvents": [{"ph": "X", "name": "fetch", "ts": 1, "dur": 1, "args": {"batch": 1e999}}]}',
          "args.batch is not a finite number")
    fails('{"traceEvents": []}', "step 0: 'start'", steps='{"steps": [{"epoch": 0}]}')
    fails('{"traceEvents": []}', "no steps list", steps='{"x": 1}')


def fails_missing(tmp_path):
    r = subprocess.run([sys.executable, "-m", "stoke.report", str(tmp_path / "nope.json"), "--out",
                        str(tmp_path / "o.html")], capture_output=True, text=True, env=env(), timeout=60)
    assert r.returncode == 2 and "nope.json" in r.stderr
    return r.stderr


def test_report_survives_mutated_traces(tmp_path):
    """Random damage to a valid trace: the report either reads it or says why; it never crashes."""
    good = {"traceEvents": [X("plan", 0, 100, 0), X("fetch", 100, 2000, 0), X("decode", 2100, 400, 0),
                            X("wait", 1000, 1600, 0, tid=9), X("fetch", 3000, 500, 1), X("wait", 3000, 600, 1, tid=9)]}
    text = json.dumps(good)
    rng = random.Random(1)
    values = [None, True, -1, 0, 1e308, -1e-9, "x", [], {}, float("nan")]
    for i in range(300):
        doc = json.loads(text)
        for _ in range(rng.randint(1, 3)):
            ev = rng.choice(doc["traceEvents"])
            key = rng.choice(["ph", "name", "ts", "dur", "tid", "args"])
            ev[key] = rng.choice(values) if rng.random() < 0.8 else {"batch": rng.choice(values)}
        p = tmp_path / f"m{i}.json"
        p.write_text(json.dumps(doc, allow_nan=True))
        try:
            tr = report.load_trace(str(p))
        except report.ReportError as e:
            assert str(p) in str(e)
            continue
        att = report.attribute_stalls(tr)
        H.page("t", "", [report.section_html(tr, None, att)])
    # and cut short anywhere
    for cut in range(0, len(text), 37):
        p = tmp_path / "cut.json"
        p.write_text(text[:cut])
        try:
            report.attribute_stalls(report.load_trace(str(p)))
        except report.ReportError:
            pass


# ---------------------------------------------------------------------------
# the naive pipeline and the emulated cloud store

def test_generator_pipeline_is_a_seeded_endless_stream(tmp_path):
    """The published naive pipeline: per epoch a seeded permutation of the files, batches decoded from
    them in that order, the stream running on across epochs; close() stops its thread."""
    import numpy as np
    from stoke.experiments import data, pipelines
    w = data.VolumeWorkload(shape=(4, 3, 2), channels=2)
    w.write_sources(str(tmp_path / "src"), 40, 5)
    files = data.SampleFiles(str(tmp_path / "src"))
    names, labels = files.split("train")
    steps = len(names) // 8
    g = pipelines.GeneratorPipeline(files, w, names, labels, batch_size=8, seed=3, max_queue=2)
    try:
        got = [b for e in range(2) for b in g.epoch(steps)]
    finally:
        g.close()
    assert not g._thread.is_alive()
    want = [i for e in range(2) for i in pipelines.epoch_order(len(names), 3, e)[:steps * 8]]
    assert len(got) == 2 * steps
    for k, (x, y) in enumerate(got):
        idx = want[k * 8:(k + 1) * 8]
        assert x.shape == (8, 2, 4, 3, 2)
        for row, i in enumerate(idx):
            a = np.load(tmp_path / "src" / names[i])
            assert np.array_equal(x[row].numpy(), np.moveaxis(a, -1, 0))
            assert y[row].item() == labels[i]
    assert list(pipelines.epoch_order(len(names), 3, 0)) != list(pipelines.epoch_order(len(names), 3, 1))


def test_image_workload_feeds_both_pipelines_the_same_images(tmp_path):
    """The batch study's image workload: JPEGs in two class folders plus labels.csv (label = class
    folder, a seeded tenth in "val"); the naive side (PIL + torchvision) and stoke's loader over the
    ingested table give the same validation inputs (Resize, CenterCrop, ToTensor, Normalize: no
    randomness): equal when stoke decodes at full size, a few levels apart on average with its
    default DCT-domain downscaling; training inputs of the same shape and distribution."""
    import numpy as np
    from stoke.experiments import data, pipelines
    w = data.ImageWorkload(size=32, min_side=40, max_side=96)
    src, table = str(tmp_path / "src"), str(tmp_path / "table")
    w.write_sources(src, 60, 7)
    files = data.SampleFiles(src)
    rows = files.labels()
    assert len(rows) == 60 and {r["split"] for r in rows} == {"train", "val"}
    for r in rows:
        assert r["file"].startswith(f"class_00{r['label']}/") and r["file"].endswith(".jpg")
    with pytest.raises(ValueError, match="2 classes"):
        data.ImageWorkload(classes=3).write_sources(str(tmp_path / "three"), 6, 0)
    data.ingest_table(w, src, table)
    names, labels = files.split("val")
    want = np.stack([w.decode(files.read(n), train=False) for n in names])
    assert want.shape == (len(names), 3, 32, 32) and want.dtype == np.float32

    def stoke_val(**options):
        with pipelines.stoke_loader(w, table, "val", 4, 0, "cpu", shuffle="none", **options) as loader:
            got = [(x.numpy(), y.numpy()) for x, y in pipelines.stoke_batches(loader, w.column, 0)]
        return np.concatenate([g[0] for g in got]), np.concatenate([g[1] for g in got])
    level = 1 / 255 / min(data.IMAGENET_STD)  # one gray level after Normalize
    # decoded at full size, the pixels are PIL's (Normalize's float rounding aside)
    x, y = stoke_val(jpeg_dct_scaling=False)
    assert x.shape == want.shape and np.array_equal(y.astype(np.float32), labels)
    assert np.abs(x - want).max() <= 1e-5
    # the default decodes large boxes at a DCT scale: the same picture, pixels a few levels apart
    x, _ = stoke_val()
    assert x.shape == want.shape and np.abs(x - want).mean() <= 5 * level
    # training inputs: augmented differently on each side, the same shape, normalised alike
    a = np.stack([w.decode(files.read(n)) for n in names])
    with pipelines.stoke_loader(w, table, "train", 4, 0, "cpu") as loader:
        b = next(iter(pipelines.stoke_batches(loader, w.column, 0)))[0].numpy()
    assert a.shape[1:] == b.shape[1:] == (3, 32, 32)
    assert abs(float(a.mean()) - float(b.mean())) < 0.5


def test_emulated_store_adds_latency_and_caps_bandwidth():
    need(HAVE_SERVERS, "the object-store emulators (tests/servers/node_modules)")
    need(HAVE_AZURE_SDK, "Microsoft's Azure SDK for Python (python3-azure)")
    from azure.storage.blob import ContainerClient
    from stoke.experiments.store import EmulatedBlobStore
    os.environ["STOKE_SOURCE_DIR"] = str(REPO)
    store = EmulatedBlobStore(latency_ms=40, bytes_per_s=2e6)
    with store:
        c = ContainerClient.from_connection_string(store.connection_string, "link")
        c.create_container()
        c.upload_blob("a", b"x" * 200_000)
        c.download_blob("a").readall()  # a connection and the container's first read, unmeasured
        t = time.perf_counter()
        c.download_blob("a").readall()
        plain = time.perf_counter() - t
        store.emulate()
        t = time.perf_counter()
        assert len(c.download_blob("a").readall()) == 200_000
        slow = time.perf_counter() - t
        procs = [s.proc for s in store._servers]
    # at least 40 ms of latency and 200 KB at 2 MB/s (100 ms), well above the plain read
    assert slow >= 0.14 and slow >= plain + 0.1, (plain, slow)
    assert all(p.poll() is not None for p in procs), "servers still running after the store stopped"


def test_experiments_help():
    r = subprocess.run([sys.executable, "-m", "stoke.experiments", "--help"], capture_output=True, text=True, env=env())
    assert r.returncode == 0 and all(n in r.stdout for n in ("deepiq", "shuffle", "batch"))
    r = subprocess.run([sys.executable, "-m", "stoke.experiments", "deepiq", "--help"], capture_output=True, text=True,
                       env=env())
    assert r.returncode == 0 and "--width" in r.stdout and "--storage" in r.stdout and "--scale" in r.stdout


def test_experiments_refuse_what_they_cannot_run(tmp_path):
    r = subprocess.run([sys.executable, "-m", "stoke.experiments", "batch", "--scale", "small", "--workload", "spectra",
                        "--out", str(tmp_path)], capture_output=True, text=True, env=env(), timeout=120)
    assert r.returncode == 2 and "invalid choice: 'spectra'" in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run([sys.executable, "-m", "stoke.experiments", "deepiq", "--scale", "small", "--storage", "local",
                        "--steps", "50", "--out", str(tmp_path)], capture_output=True, text=True, env=env(), timeout=300)
    assert r.returncode == 1 and "fewer than 50 steps x 32" in r.stderr and "Traceback" not in r.stderr
