"""shuffle: the NERSC poster's shuffle study with stoke.

Global shuffle (a new permutation of all rows every epoch), block shuffle (the table's files in a
random order, rows in file order, through a shuffle buffer of several sizes) and no shuffle, warm
(page cache) and cold (O_DIRECT reads), for two sample sizes. The table is written the way data
often arrives, one class after the other: its files each hold samples of one label, so an order
that keeps files together also keeps labels together.

Per run and epoch: the I/O share of the step time (the trainer's data wait over the epoch time),
the TimeLogger fields (data wait, host-to-device, forward/backward, optimizer, total), the loader's
shuffle-quality measures (mean jump, distinct files per batch) and the validation accuracy; per
order also the loader's speed alone (no model). The claims it checks: global shuffle costs no more
epoch time than no shuffle with stoke, and what block shuffle costs in accuracy.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import time
from pathlib import Path
from typing import Any, Dict, List, Sequence

import torch

from . import common, data, html as H, models, pipelines, train
from .common import say

NAME = "shuffle"
SIZES = {  # name -> (shape, channels)
    "large": ((30, 30, 10), 10),   # the seed volumes, 360 KB
    "small": ((16, 16, 8), 2),     # 8 KB
}
SCALES = {
    "small": {"samples": 320, "epochs": 2, "files": 8, "buffers": [32, 256], "batch": 32},
    "default": {"samples": 4000, "epochs": 4, "files": 32, "buffers": [64, 512, 2048], "batch": 32},
}
LR = 1e-3


def add_arguments(p: argparse.ArgumentParser) -> None:
    common.add_common_arguments(p, default_storage="local")
    p.add_argument("--epochs", type=int, default=0, help="epochs per run (default by scale: small 2, default 4)")
    p.add_argument("--samples", type=int, default=0, help="samples per sample size (default by scale: 320, 4,000)")
    p.add_argument("--buffers", default="", help="block-shuffle buffer sizes, comma-separated "
                   "(default by scale: 32,256 / 64,512,2048)")


def orders(buffers: Sequence[int]) -> List[Dict[str, Any]]:
    """The orders compared, in the order they run: none and global back to back (their epoch times
    are compared, and a busy machine drifts less between neighbours), then block shuffle."""
    out = [{"name": "none", "shuffle": "none"}, {"name": "global", "shuffle": "global"}]
    out += [{"name": f"block {b}", "shuffle": "block", "shuffle_buffer": b} for b in buffers]
    return out


def run(args: argparse.Namespace, argv: Sequence[str]) -> Dict[str, Any]:
    scale = dict(SCALES[args.scale])
    epochs = args.epochs or scale["epochs"]
    samples = args.samples or scale["samples"]
    buffers = [int(b) for b in args.buffers.split(",")] if args.buffers else scale["buffers"]
    batch = scale["batch"]
    devs, skipped = common.devices(args.device)
    dev = devs[-1]  # the accelerator where there is one
    threads = common.setup_torch(args.threads)
    caches = ["warm", "cold"] if args.storage == "local" else ["store"]
    result: Dict[str, Any] = common.run_facts(NAME, args, argv)
    result.update({
        "title": "Shuffle: global, block and none, warm and cold",
        "schedule": {"epochs": epochs, "batch_size": batch, "optimizer": f"Adam, lr {LR:g}", "device": dev,
                     "torch_threads": threads, "model": "VolumeNet (two 3D convolutions, max pooling, a linear head)"},
        "orders": orders(buffers), "caches": caches, "skipped": [n for n in skipped],
        "sizes": [],
    })
    with common.storage(args, NAME) as st:
        result["storage"] = st.describe()
        for size_name, (shape, channels) in SIZES.items():
            workload = data.VolumeWorkload(shape=shape, channels=channels)
            result["sizes"].append(run_size(args, st, size_name, workload, samples, epochs, batch, buffers, caches, dev))
    result["measured"]["global_vs_none"] = global_vs_none(result)
    result["measured"]["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    return result


def label_sorted_sources(workload: data.VolumeWorkload, local_dir: str, samples: int, seed: int) -> None:
    """Sample files named so that listing order groups them by label (label 0 first); ingest
    numbers rows in listing order, so the table is ordered by label."""
    workload.write_sources(local_dir, samples, seed)
    path = os.path.join(local_dir, "labels.csv")
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        new = f"label{r['label']}_{r['file']}"
        os.rename(os.path.join(local_dir, r["file"]), os.path.join(local_dir, new))
        r["file"] = new
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def run_size(args: argparse.Namespace, st: common.Storage, size_name: str, workload: data.VolumeWorkload,
             samples: int, epochs: int, batch: int, buffers: Sequence[int], caches: Sequence[str],
             dev: str) -> Dict[str, Any]:
    scale = SCALES[args.scale]
    # The sources stay local (they are only ingested); the table lives on the chosen storage.
    local_src = os.path.join(st.work, f"{size_name}-src")
    table_uri = st.uri(f"{size_name}-table")
    say(f"shuffle: {size_name} samples ({workload.sample_bytes / 1e3:,.0f} KB): writing {samples}, label-sorted table")
    label_sorted_sources(workload, local_src, samples, args.seed)
    rows_per_file = -(-samples // scale["files"])
    table = data.ingest_table(workload, local_src, table_uri, rows_per_file=rows_per_file)
    st.emulate()
    device = torch.device(dev)
    warm_up(workload, table_uri, batch, args.seed, device)
    runs: List[Dict[str, Any]] = []
    alone: List[Dict[str, Any]] = []
    for cache in caches:
        for order in orders(buffers):
            opts = {k: v for k, v in order.items() if k in ("shuffle", "shuffle_buffer")}
            if cache == "cold":
                opts["direct"] = True
            say(f"shuffle: {size_name}, {cache}, {order['name']}")
            alone.append({"cache": cache, "order": order["name"], **load_alone(workload, table_uri, batch, args.seed, opts)})
            # one run per size is traced for the report's stall attribution: global shuffle, coldest cache
            stem = f"{NAME}-{size_name}-{cache}-global" if cache == caches[-1] and order["name"] == "global" else ""
            runs.append({"cache": cache, "order": order["name"],
                         **train_run(args, workload, table_uri, batch, epochs, opts, device, stem)})
    return {"name": size_name, "description": workload.describe(), "sample_bytes": workload.sample_bytes,
            "samples": samples, "table": {"location": st.label(f"{size_name}-table"), "rows_per_file": rows_per_file,
                                          **table},
            "runs": runs, "loading_alone": alone}


def warm_up(workload: data.VolumeWorkload, table_uri: str, batch: int, seed: int, device: torch.device) -> None:
    """A few untimed steps first, so that one-time costs (kernel selection, allocator growth) do
    not land on whichever order runs first."""
    model = workload.small_model().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    with pipelines.stoke_loader(workload, table_uri, "train", batch, seed, str(device)) as loader:
        train.train_epoch(model, opt, pipelines.stoke_batches(loader, workload.column), device, max_steps=3)


def load_alone(workload: data.VolumeWorkload, table_uri: str, batch: int, seed: int, opts: Dict[str, Any]) -> Dict[str, Any]:
    """One epoch of the training split read by the loader with no model: its speed for this order."""
    loader = pipelines.stoke_loader(workload, table_uri, "train", batch, seed, "cpu", **opts)
    with loader:
        t = time.perf_counter()
        n = 0
        for b in loader:
            n += int(b[workload.column].shape[0])
        seconds = time.perf_counter() - t
    return {"samples": n, "measured": {"seconds": seconds, "samples_per_second": n / seconds if seconds else 0.0}}


def train_run(args: argparse.Namespace, workload: data.VolumeWorkload, table_uri: str, batch: int, epochs: int,
              opts: Dict[str, Any], device: torch.device, trace_stem: str = "") -> Dict[str, Any]:
    """Trains the small model for `epochs` with one order; with trace_stem, also writes the
    loader's trace and the step log (common.save_trace)."""
    train.seed_everything(args.seed)
    model = workload.small_model().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    loader = pipelines.stoke_loader(workload, table_uri, "train", batch, args.seed, str(device), trace=bool(trace_stem),
                                    **opts)
    step_log: List[Dict[str, float]] = []
    traced: Dict[str, Any] = {"measured": {}}
    val = pipelines.stoke_loader(workload, table_uri, "val", batch, args.seed, str(device), shuffle="none",
                                 direct=bool(opts.get("direct", False)))
    records = []
    with loader, val:
        for e in range(epochs):
            loader.set_epoch(e)
            quality = loader.shuffle_quality()
            r = train.train_epoch(model, opt, pipelines.stoke_batches(loader, workload.column), device, epoch=e,
                                  step_log=step_log)
            correct, counted = train.evaluate(model, pipelines.stoke_batches(val, workload.column, 0), device)
            rec = train.epoch_record(e, r)
            rec.update(mean_jump=quality["mean_jump"], distinct_file_fraction=quality["distinct_file_fraction"],
                       val_accuracy=correct / counted if counted else None, val_samples=counted)
            records.append(rec)
        if trace_stem:
            traced = common.save_trace(loader, step_log, Path(args.out), trace_stem)
    params = models.parameter_counts(model)["trainable"]
    return {"parameters": params, "epochs": records,
            "final_val_accuracy": records[-1]["val_accuracy"] if records else None,
            **{k: v for k, v in traced.items() if k != "measured"},
            "measured": {"epoch_seconds_mean": sum(r["measured"]["seconds"] for r in records) / max(1, len(records)),
                         "epoch_seconds_median": statistics.median(r["measured"]["seconds"] for r in records),
                         "io_share_mean": sum(r["measured"]["wait_share"] for r in records) / max(1, len(records)),
                         **traced["measured"]}}


def global_vs_none(result: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Median epoch time of global shuffle over that of no shuffle, per sample size and cache (the
    median: one epoch disturbed by other work on the machine moves it less than the mean)."""
    out = []
    for s in result["sizes"]:
        for cache in result["caches"]:
            by = {r["order"]: r["measured"]["epoch_seconds_median"] for r in s["runs"] if r["cache"] == cache}
            if by.get("none"):
                ratio = by["global"] / by["none"]
                out.append({"size": s["name"], "cache": cache, "ratio": ratio, "at_most_5_percent_more": ratio <= 1.05})
    return out


# ---------------------------------------------------------------------------
# terminal and HTML

def terminal(result: Dict[str, Any]) -> str:
    parts = []
    for s in result["sizes"]:
        rows = []
        for r in s["runs"]:
            last = r["epochs"][-1]
            rows.append([r["cache"], r["order"], f"{r['measured']['epoch_seconds_median']:.2f}",
                         f"{r['measured']['io_share_mean']:.1%}", f"{last['mean_jump']:.1f}",
                         f"{last['distinct_file_fraction']:.2f}", common.fmt(r["final_val_accuracy"], ".3f")])
        alone = {(a["cache"], a["order"]): a["measured"]["samples_per_second"] for a in s["loading_alone"]}
        for row, r in zip(rows, s["runs"]):
            row.insert(4, f"{alone[(r['cache'], r['order'])]:,.0f}")
        parts.append(common.text_table(
            ["cache", "order", "median epoch s", "I/O share", "load alone/s", "mean jump", "files/batch", "val acc"], rows,
            title=f"shuffle ({result['scale']}), {s['name']} samples ({s['sample_bytes'] / 1e3:,.0f} KB), "
                  f"{result['schedule']['epochs']} epochs, {s['samples']} samples in {s['table']['files']} label-sorted files"))
    for g in result["measured"]["global_vs_none"]:
        parts.append(f"{g['size']}, {g['cache']}: global shuffle's median epoch time = {g['ratio']:.3f} x no shuffle's "
                     f"({'at most' if g['at_most_5_percent_more'] else 'MORE than'} 5 % more)")
    return "\n".join(parts)


def report_html(result: Dict[str, Any], out_dir: Path) -> str:
    sections = [H.section(
        "What was run",
        H.paragraph(f"Storage: {result['storage']['text']}. Caches: " + ", ".join(result["caches"]) +
                    " (warm: the page cache holds the table, read once before; cold: O_DIRECT reads, every sample from "
                    "the disk)."),
        H.paragraph(f"Model: {result['schedule']['model']}, {result['schedule']['optimizer']}, batch "
                    f"{result['schedule']['batch_size']}, {result['schedule']['epochs']} epochs, device "
                    f"{result['schedule']['device']}, seed {result['seed']}."),
        H.paragraph("Orders: none (table order), block (the table's files in a random order, rows in file order, "
                    "through a shuffle buffer of the given number of rows), global (a new permutation of all rows "
                    "each epoch). The table's files each hold samples of one label (written class by class), so "
                    "orders that keep files together keep labels together."),
        H.paragraph("I/O share: the trainer's data wait over the epoch's time. Mean jump: mean distance in table "
                    "rows between consecutive samples (about n/3 for a uniform permutation of n rows, 1 without "
                    "shuffle). Files per batch: distinct data files over samples in a batch."),
        *[H.paragraph(f"Note: {n}") for n in result["skipped"]]),
    ]
    g_rows = [[g["size"], g["cache"], H.Num(g["ratio"], H.pointer("measured", "global_vs_none", i, "ratio"), ".3f"),
               "yes" if g["at_most_5_percent_more"] else "no"] for i, g in enumerate(result["measured"]["global_vs_none"])]
    sections.append(H.section("Global shuffle against no shuffle",
                              H.table(["sample size", "cache", "median epoch time, global / none", "at most 5 % more"],
                                      g_rows)))
    for si, s in enumerate(result["sizes"]):
        sections.append(size_section(result, si, s, out_dir))
    sub = (f"{result['command']} — scale {result['scale']}, seed {result['seed']}, "
           f"{result['environment']['cores']} cores, started {result['measured']['started']}")
    return H.page("stoke experiment: shuffle (the NERSC study)", sub, sections)


def size_section(result: Dict[str, Any], si: int, s: Dict[str, Any], out_dir: Path) -> str:
    runs = s["runs"]
    rows = []
    for ri, r in enumerate(runs):
        last = len(r["epochs"]) - 1
        ai = next(i for i, a in enumerate(s["loading_alone"]) if a["cache"] == r["cache"] and a["order"] == r["order"])
        base = ("sizes", si, "runs", ri)
        rows.append([r["cache"], r["order"],
                     H.Num(r["measured"]["epoch_seconds_median"], H.pointer(*base, "measured", "epoch_seconds_median"),
                           ".2f"),
                     H.Num(r["measured"]["io_share_mean"], H.pointer(*base, "measured", "io_share_mean"), ".1%"),
                     H.Num(s["loading_alone"][ai]["measured"]["samples_per_second"],
                           H.pointer("sizes", si, "loading_alone", ai, "measured", "samples_per_second"), ",.0f"),
                     H.Num(r["epochs"][last]["mean_jump"], H.pointer(*base, "epochs", last, "mean_jump"), ".1f"),
                     H.Num(r["epochs"][last]["distinct_file_fraction"],
                           H.pointer(*base, "epochs", last, "distinct_file_fraction"), ".3f"),
                     H.Num(r["final_val_accuracy"], H.pointer(*base, "final_val_accuracy"), ".3f")])
    summary = H.table(["cache", "order", "median epoch time (s)", "I/O share", "loader alone (samples/s)", "mean jump",
                       "files per batch", f"val accuracy after {len(runs[0]['epochs'])} epochs"], rows,
                      caption="Per order and cache")
    cats = [f"{r['cache']}, {r['order']}" for r in runs]
    time_chart = H.bar_chart(f"Median epoch time ({s['name']} samples)", cats,
                             [H.Series("epoch time", [r["measured"]["epoch_seconds_median"] for r in runs],
                                       [H.pointer("sizes", si, "runs", i, "measured", "epoch_seconds_median")
                                        for i in range(len(runs))])],
                             y_label="seconds", chart_id=f"shuffle-{s['name']}-time",
                             category_colors=[H.PALETTE[result["caches"].index(r["cache"])] for r in runs],
                             width=900)
    first_cache = result["caches"][0]
    acc_series = [H.Series(r["order"], [e["val_accuracy"] for e in r["epochs"]],
                           [H.pointer("sizes", si, "runs", i, "epochs", j, "val_accuracy") for j in range(len(r["epochs"]))],
                           xs=[e["epoch"] + 1 for e in r["epochs"]])
                  for i, r in enumerate(runs) if r["cache"] == first_cache]
    acc_chart = H.line_chart(f"Validation accuracy after each epoch ({s['name']} samples)", acc_series,
                             x_label="epochs trained", y_label="validation accuracy", chart_id=f"shuffle-{s['name']}-acc",
                             y_min=0.0)
    epoch_rows = []
    for ri, r in enumerate(runs):
        for j, e in enumerate(r["epochs"]):
            base = ("sizes", si, "runs", ri, "epochs", j)
            epoch_rows.append([r["cache"], r["order"], e["epoch"], *train.phase_cells(e, *base),
                               H.Num(e["measured"]["seconds"], H.pointer(*base, "measured", "seconds"), ".2f"),
                               H.Num(e["measured"]["wait_share"], H.pointer(*base, "measured", "wait_share"), ".1%"),
                               H.Num(e["val_accuracy"], H.pointer(*base, "val_accuracy"), ".3f")])
    per_epoch = H.table(["cache", "order", "epoch", *train.PHASE_HEADERS,
                         "epoch time (s)", "I/O share", "val accuracy"], epoch_rows,
                        caption="Per epoch: the TimeLogger fields (mean seconds per step)")
    stalls = [common.stall_section(out_dir, r, ("sizes", si, "runs", ri),
                                   title=f"Where the time goes: {s['name']} samples, {r['cache']}, {r['order']} shuffle",
                                   chart_prefix=f"stalls-{s['name']}")
              for ri, r in enumerate(runs) if "trace_file" in r]
    return H.section(f"{s['name'].capitalize()} samples: {s['description']}",
                     H.paragraph(f"{s['samples']:,} samples in {s['table']['files']} files of {s['table']['rows_per_file']} "
                                 f"rows, ordered by label."),
                     summary, time_chart, acc_chart, per_epoch, id=f"size-{s['name']}") + "".join(stalls)
