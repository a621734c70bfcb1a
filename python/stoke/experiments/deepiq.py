"""deepiq: the DeepIQ whitepaper's 2x2, storage layout x device.

Layouts, on the same store (the emulated cloud store by default, or the local disk):
  per-file  one .npy blob per sample, read by a Python generator, one GET per sample (Microsoft's
            Azure SDK), the way Keras's fit() runs a generator by default (one background thread,
            a queue of 10 batches): the published naive pipeline;
  table     the same samples ingested with stoke into a Delta table (one Parquet file per sample,
            as the published pipeline first wrote them), OPTIMIZEd into one file, read by
            stoke.Loader (global shuffle, ranged GETs, 64 in flight).
Devices: the CPU, and CUDA where present (the loader's device="cuda": pinned buffers, asynchronous
copies). The model is the published one, a 3D ResNet-18 binary classifier (33,361,089 trainable
parameters at width 64); on the CPU it runs at --width (the report gives the parameter count).
Schedule: 5 epochs x --steps steps x batch 32, the same seed (initialisation, sample orders) for
both layouts; validation accuracy after the last epoch on the validation split.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import torch

from . import common, data, html as H, models, pipelines, train
from .common import say

NAME = "deepiq"
SCALES = {
    # samples (about 10 % go to validation), steps per epoch, CPU model width
    "small": {"samples": 192, "steps": 2, "width": 4},
    "default": {"samples": 1600, "steps": 40, "width": 4},
}
# The emulated store's latency per read request. The published GPU run on blob storage was bound by
# its reads: 1.8 h for 5 x 600 steps is 2.16 s per step of 32 blobs, about 67 ms per blob. 50 ms per
# request, plus what the SDK, the proxy and Azurite take here (about 8 ms), comes close to it.
LATENCY_MS = 50.0
EPOCHS = 5
BATCH = 32
LR = 1e-3

PUBLISHED = {
    "source": "DeepIQ whitepaper: 650,000 volumes (30x30x10 voxels x 10 features), 5 epochs x 600 steps x batch 32, "
              "Azure Databricks single node; model 33,368,897 parameters (33,361,089 trainable)",
    "cells": [
        {"device": "cpu", "layout": "per_file", "hours": 3.59},
        {"device": "cpu", "layout": "table", "hours": 2.42},
        {"device": "cuda", "layout": "per_file", "hours": 1.8},
        {"device": "cuda", "layout": "table", "hours": 19 / 60},
    ],
    "parameters": {"trainable": 33361089, "total": 33368897},
}
LAYOUT_TITLES = {"per_file": "per-file (.npy blob per sample, Python generator)",
                 "table": "table (stoke, OPTIMIZEd Delta table)"}
DEVICE_TITLES = {"cpu": "CPU", "cuda": "GPU (CUDA)"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    common.add_common_arguments(p, default_storage="azurite", default_latency_ms=LATENCY_MS)
    p.add_argument("--width", type=int, default=0,
                   help="CPU model width: channels of the first ResNet stage (default by scale: 4; published 64)")
    p.add_argument("--cuda-width", type=int, default=models.PUBLISHED_WIDTH,
                   help=f"CUDA model width (default {models.PUBLISHED_WIDTH}, the published 33M-parameter model)")
    p.add_argument("--steps", type=int, default=0, help="steps per epoch (default by scale: small 2, default 40)")
    p.add_argument("--samples", type=int, default=0, help="samples in the data set (default by scale: 192, 1,600)")


def run(args: argparse.Namespace, argv: Sequence[str]) -> Dict[str, Any]:
    scale = dict(SCALES[args.scale])
    steps = args.steps or scale["steps"]
    samples = args.samples or scale["samples"]
    cpu_width = args.width or scale["width"]
    if steps * BATCH > samples:
        raise ValueError(f"{samples} samples hold fewer than {steps} steps x {BATCH}; raise --samples or lower --steps")
    devs, skipped = common.devices(args.device)
    threads = common.setup_torch(args.threads)
    workload = data.VolumeWorkload()
    out_dir = Path(args.out)
    result: Dict[str, Any] = common.run_facts(NAME, args, argv)
    result.update({
        "title": "DeepIQ's 2x2: storage layout x device",
        "workload": {"name": workload.name, "description": workload.describe(), "samples": samples,
                     "sample_bytes": workload.sample_bytes},
        "schedule": {"epochs": EPOCHS, "steps_per_epoch": steps, "batch_size": BATCH, "optimizer": f"Adam, lr {LR:g}",
                     "seed": args.seed, "torch_threads": threads},
        "published": PUBLISHED,
        "skipped": skipped,
    })
    with common.storage(args, NAME) as st:
        result["storage"] = st.describe()
        files_uri, table_uri = st.uri("volumes"), st.uri("table")
        say(f"deepiq: writing {samples} volumes to {files_uri}")
        t = time.perf_counter()
        workload.write_sources(files_uri, samples, args.seed)
        t_write = time.perf_counter() - t
        say(f"deepiq: ingesting them into {table_uri} (one file per sample) and optimizing")
        t = time.perf_counter()
        table = data.ingest_table(workload, files_uri, table_uri, rows_per_file=1, optimize=True)
        t_table = time.perf_counter() - t
        files = data.SampleFiles(files_uri)
        names, labels = files.split("train")
        val_names, val_labels = files.split("val")
        if len(names) < steps * BATCH:
            raise ValueError(f"{len(names)} training samples, fewer than {steps} steps x {BATCH}; "
                             "raise --samples or lower --steps")
        result["workload"].update(train=len(names), val=len(val_names))
        result["layouts"] = {
            "per_file": {"location": st.label("volumes"), "files": samples + 1, "text": LAYOUT_TITLES["per_file"],
                         "measured": {"write_seconds": t_write}},
            "table": {"location": st.label("table"), "text": LAYOUT_TITLES["table"], **table,
                      "measured": {"ingest_and_optimize_seconds": t_table}},
        }
        st.emulate()
        cells: List[Dict[str, Any]] = []
        for dev in devs:
            width = cpu_width if dev == "cpu" else args.cuda_width
            for layout in ("per_file", "table"):
                say(f"deepiq: training on {dev}, {layout} layout, width {width}")
                cells.append(train_cell(args, workload, dev, layout, width, steps, files, names, labels,
                                        val_names, val_labels, table_uri, out_dir))
        result["cells"] = cells
    result["measured"]["speedups"] = speedups(cells)
    result["measured"]["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    return result


def train_cell(args: argparse.Namespace, workload: data.VolumeWorkload, dev: str, layout: str, width: int,
               steps: int, files: data.SampleFiles, names: List[str], labels: np.ndarray, val_names: List[str],
               val_labels: np.ndarray, table_uri: str, out_dir: Path) -> Dict[str, Any]:
    device = torch.device(dev)
    train.seed_everything(args.seed)
    model = workload.resnet(width).to(device)
    params = models.parameter_counts(model)
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    step_log: List[Dict[str, float]] = []
    epochs: List[Dict[str, Any]] = []
    cell: Dict[str, Any] = {"device": dev, "layout": layout, "width": width, "parameters": params}
    loader = gen = None
    try:
        if layout == "table":
            loader = pipelines.stoke_loader(workload, table_uri, "train", BATCH, args.seed, dev, trace=True)
        else:
            gen = pipelines.GeneratorPipeline(files, workload, names, labels, BATCH, args.seed)
        t_start = time.perf_counter()
        for e in range(EPOCHS):
            batches = pipelines.stoke_batches(loader, workload.column, e) if loader else gen.epoch(steps)
            r = train.train_epoch(model, opt, batches, device, max_steps=steps, step_log=step_log, epoch=e)
            epochs.append(train.epoch_record(e, r))
        train_seconds = time.perf_counter() - t_start
        traced: Dict[str, Any] = {}
        if loader is not None:
            traced = common.save_trace(loader, step_log, out_dir, f"{NAME}-{dev}")
            stats = loader.stats()
            traced["measured"]["loader"] = {k: stats[k] for k in ("samples_per_second", "mb_per_second", "wait_share",
                                                                  "stage_seconds", "backend")}
    finally:
        if gen is not None:
            gen.close()
        if loader is not None:
            loader.close()
    # validation: the same layout's reader, table order / file order
    if layout == "table":
        vloader = pipelines.stoke_loader(workload, table_uri, "val", BATCH, args.seed, dev, shuffle="none")
        with vloader:
            correct, counted = train.evaluate(model, pipelines.stoke_batches(vloader, workload.column, 0), device)
    else:
        vb = pipelines.sample_batches(files, workload, val_names, val_labels, BATCH, np.arange(len(val_names)),
                                      drop_last=False, train=False)
        correct, counted = train.evaluate(model, vb, device)
    total_steps = sum(e["steps"] for e in epochs)
    phases = {p: sum(s[p] for s in step_log) for p in train.PHASES}
    cell.update({
        "epochs": epochs, "steps": total_steps, "samples": sum(e["samples"] for e in epochs),
        "final_train_loss": epochs[-1]["train_loss"] if epochs else None,
        "val_accuracy": correct / counted if counted else None, "val_samples": counted,
        "measured": {"train_seconds": train_seconds, "data_wait_seconds": phases["data_wait"],
                     "wait_share": phases["data_wait"] / train_seconds if train_seconds else 0.0,
                     "samples_per_second": sum(e["samples"] for e in epochs) / train_seconds if train_seconds else 0.0,
                     "phases_per_step": train.phase_means(phases, total_steps)},
    })
    if traced:
        cell["measured"].update(traced.pop("measured"))
        cell.update(traced)
    return cell


def speedups(cells: Sequence[Dict[str, Any]]) -> Dict[str, Optional[float]]:
    """Training time per-file / table, per device."""
    out: Dict[str, Optional[float]] = {}
    for dev in sorted({c["device"] for c in cells}):
        by = {c["layout"]: c["measured"]["train_seconds"] for c in cells if c["device"] == dev}
        if "per_file" in by and "table" in by and by["table"] > 0:
            out[dev] = by["per_file"] / by["table"]
    return out


# ---------------------------------------------------------------------------
# terminal and HTML

def terminal(result: Dict[str, Any]) -> str:
    rows = []
    for c in result["cells"]:
        m = c["measured"]
        pub = next(p["hours"] for p in PUBLISHED["cells"] if p["device"] == c["device"] and p["layout"] == c["layout"])
        rows.append([DEVICE_TITLES[c["device"]], c["layout"].replace("_", "-"), f"{c['parameters']['trainable']:,}",
                     f"{m['train_seconds']:.1f}", f"{m['wait_share']:.1%}", f"{m['samples_per_second']:.1f}",
                     common.fmt(c["val_accuracy"], ".3f"), _hours(pub)])
    lines = [common.text_table(["device", "layout", "params", "train s", "data wait", "samples/s", "val acc",
                                "published"], rows,
                               title=f"deepiq ({result['scale']}): {EPOCHS} epochs x "
                                     f"{result['schedule']['steps_per_epoch']} steps x batch {BATCH}; "
                                     f"{result['storage']['text']}")]
    pub_ratio = _published_ratios()
    for dev, r in result["measured"]["speedups"].items():
        lines.append(f"{DEVICE_TITLES[dev]}: the table trains {r:.1f}x faster than per-file "
                     f"(published: {pub_ratio[dev]:.1f}x)")
    for note in result["skipped"]:
        lines.append(f"skipped: {note}")
    return "\n".join(lines)


def _hours(h: float) -> str:
    return f"{h:.2f} h" if h >= 1 else f"{h * 60:.0f} min"


def _published_ratios() -> Dict[str, float]:
    by = {(p["device"], p["layout"]): p["hours"] for p in PUBLISHED["cells"]}
    return {d: by[(d, "per_file")] / by[(d, "table")] for d in ("cpu", "cuda")}


def report_html(result: Dict[str, Any], out_dir: Path) -> str:
    cells = result["cells"]
    rows = []
    for i, c in enumerate(cells):
        m = c["measured"]
        rows.append([DEVICE_TITLES[c["device"]], LAYOUT_TITLES[c["layout"]],
                     H.Num(c["parameters"]["trainable"], H.pointer("cells", i, "parameters", "trainable"), ",d"),
                     H.Num(m["train_seconds"], H.pointer("cells", i, "measured", "train_seconds"), ".1f"),
                     H.Num(m["data_wait_seconds"], H.pointer("cells", i, "measured", "data_wait_seconds"), ".1f"),
                     H.Num(m["wait_share"], H.pointer("cells", i, "measured", "wait_share"), ".1%"),
                     H.Num(m["samples_per_second"], H.pointer("cells", i, "measured", "samples_per_second"), ".1f"),
                     H.Num(c["final_train_loss"], H.pointer("cells", i, "final_train_loss"), ".4f"),
                     H.Num(c["val_accuracy"], H.pointer("cells", i, "val_accuracy"), ".3f")])
    ours = H.table(["device", "layout", "trainable parameters", "training time (s)", "data wait (s)", "data wait share",
                    "samples/s", "final train loss", "val accuracy"], rows, caption="Our cells")
    pub_rows = []
    pub_ratio = _published_ratios()
    for dev in ("cpu", "cuda"):
        p_file = next(p for p in PUBLISHED["cells"] if p["device"] == dev and p["layout"] == "per_file")
        p_tab = next(p for p in PUBLISHED["cells"] if p["device"] == dev and p["layout"] == "table")
        ours_r = result["measured"]["speedups"].get(dev)
        pub_rows.append([DEVICE_TITLES[dev],
                         H.Num(p_file["hours"], H.pointer("published", "cells", PUBLISHED["cells"].index(p_file), "hours"), ".2f"),
                         H.Num(p_tab["hours"], H.pointer("published", "cells", PUBLISHED["cells"].index(p_tab), "hours"), ".2f"),
                         f"{pub_ratio[dev]:.2f}",
                         H.Num(ours_r, H.pointer("measured", "speedups", dev), ".2f") if ours_r is not None else "skipped"])
    side = H.table(["device", "published per-file (h)", "published table (h)", "published speed-up (x)",
                    "our speed-up (x)"], pub_rows, caption="Published 2x2 and speed-ups (per-file time / table time)")
    cats = [f"{DEVICE_TITLES[c['device']]}, {c['layout'].replace('_', '-')}" for c in cells]
    time_chart = H.bar_chart("Training time per cell (ours)", cats,
                             [H.Series("training time", [c["measured"]["train_seconds"] for c in cells],
                                       [H.pointer("cells", i, "measured", "train_seconds") for i in range(len(cells))])],
                             y_label="seconds", chart_id="deepiq-train-time",
                             category_colors=[H.PALETTE[0 if c["layout"] == "per_file" else 1] for c in cells])
    pcats = [f"{DEVICE_TITLES[p['device']]}, {p['layout'].replace('_', '-')}" for p in PUBLISHED["cells"]]
    pub_chart = H.bar_chart("Training time per cell (published)", pcats,
                            [H.Series("hours", [p["hours"] for p in PUBLISHED["cells"]],
                                      [H.pointer("published", "cells", i, "hours") for i in range(len(PUBLISHED["cells"]))])],
                            y_label="hours", chart_id="deepiq-published",
                            category_colors=[H.PALETTE[0 if p["layout"] == "per_file" else 1] for p in PUBLISHED["cells"]])
    phase_keys = [k for k in train.PHASES if k != "total"]
    phase_chart = H.bar_chart("Mean step time by TimeLogger field", cats,
                              [H.Series(train.PHASE_TITLES[k], [c["measured"]["phases_per_step"][k] for c in cells],
                                        [H.pointer("cells", i, "measured", "phases_per_step", k) for i in range(len(cells))])
                               for k in phase_keys], y_label="seconds per step", stacked=True, chart_id="deepiq-phases")
    epoch_rows = []
    for i, c in enumerate(cells):
        for j, e in enumerate(c["epochs"]):
            base = ("cells", i, "epochs", j)
            epoch_rows.append([DEVICE_TITLES[c["device"]], c["layout"].replace("_", "-"), e["epoch"],
                               H.Num(e["measured"]["seconds"], H.pointer(*base, "measured", "seconds"), ".2f"),
                               *train.phase_cells(e, *base),
                               H.Num(e["train_loss"], H.pointer(*base, "train_loss"), ".4f")])
    epoch_table = H.table(["device", "layout", "epoch", "epoch time (s)", *train.PHASE_HEADERS, "train loss"], epoch_rows,
                          caption="Per epoch: mean seconds per step of each TimeLogger field")
    sections = [
        H.section("What was run",
                  H.paragraph(f"Workload: {result['workload']['description']}; {result['workload']['samples']:,} samples "
                              f"({result['workload']['train']:,} train, {result['workload']['val']:,} validation)."),
                  H.paragraph(f"Storage: {result['storage']['text']}. Both layouts live on it."),
                  H.paragraph(f"Schedule: {EPOCHS} epochs x {result['schedule']['steps_per_epoch']} steps x batch {BATCH}, "
                              f"{result['schedule']['optimizer']}, seed {result['seed']}, "
                              f"{result['schedule']['torch_threads']} torch thread(s). The published run: 5 epochs x 600 "
                              "steps x batch 32 over 650,000 volumes."),
                  H.paragraph("Model: the published 3D ResNet-18 binary classifier (7x7x7 stem, four stages of two basic "
                              "blocks, global pooling, one dense output). At width 64 it has the published 33,361,089 "
                              "trainable parameters; CPU cells run it at a smaller width so that an epoch takes minutes, "
                              "not hours (parameter counts in the table)."),
                  H.paragraph("Per-file: one .npy blob per sample, read with one GET each by a Python generator run as "
                              "Keras runs one (one background thread, a queue of 10 batches). Table: the blobs ingested "
                              "with stoke into a Delta table (one Parquet file per sample), OPTIMIZEd "
                              f"({result['layouts']['table']['files_ingested']:,} files -> {result['layouts']['table']['files']:,}), "
                              "read by stoke.Loader."),
                  *[H.paragraph(f"Skipped: {n}") for n in result["skipped"]]),
        H.section("Results", ours, side, time_chart, pub_chart,
                  H.paragraph("The published CPU speed-up was only 1.5x because the 33M-parameter model dominated "
                              "the CPU's time; ours is the per-file time over the table time at the width used, with "
                              "the data-wait share telling how much of each run waited for data.")),
        H.section("Where each step's time went (TimeLogger fields)", phase_chart, epoch_table),
    ]
    for i, c in enumerate(cells):
        if "stalls" in c["measured"]:
            sections.append(common.stall_section(out_dir, c, ("cells", i),
                                                title=f"Where the time goes: the table on {DEVICE_TITLES[c['device']]}",
                                                chart_prefix=f"stalls-{c['device']}"))
    sub = (f"{result['command']} — scale {result['scale']}, seed {result['seed']}, "
           f"{result['environment']['cores']} cores, started {result['measured']['started']}")
    return H.page("stoke experiment: DeepIQ's 2x2 (storage layout x device)", sub, sections)
