"""batch: the UND study (DALI and fast storage) with stoke: the batch size against a naive DataLoader.

A sweep of the (global) batch size with the learning rate scaled linearly (Adam, 1e-3 x batch / 32,
as He et al. scale it), for two input pipelines: a naive torch DataLoader over one file per sample
(worker processes; a DistributedSampler under torchrun) and stoke.Loader over the table; each as
1 process and as 2 processes under torchrun (data-parallel with gloo on the CPU, standing in for
2 GPUs; NCCL and one GPU per process where CUDA is present), each process taking batch / 2.
Reports samples/s, the time to a fixed validation accuracy (the training time up to the first
epoch that reaches it; evaluation not counted) and the efficiency of 2 processes against 1
(samples/s with 2 / (2 x samples/s with 1)).

The workload is a parameter (--workload). The published study trained VGG16 on skin-cancer
photographs; the default here is its stand-in: generated JPEGs in class folders, decoded and
augmented (RandomResizedCrop, flip, ToTensor, Normalize) by each pipeline, PIL + torchvision for
the naive DataLoader and stoke's decode workers for stoke, with a small 2D CNN so that the input
pipelines, not the model, are what is compared on CPU cores. `--workload volumes` runs the seed
volumes with a small 3D CNN instead.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import torch

from . import common, data, html as H, models, pipelines, train
from .common import say

NAME = "batch"
SCALES = {
    "small": {"samples": 256, "batches": [16, 64], "epochs": 2, "target": 0.6,
              "volumes": {"shape": [16, 16, 8], "channels": 2},
              "images": {"size": 32, "min_side": 40, "max_side": 96}},
    "default": {"samples": 2000, "batches": [16, 32, 64, 128, 256], "epochs": 3, "target": 0.7,
                "volumes": {"shape": [30, 30, 10], "channels": 10},
                "images": {"size": 224, "min_side": 200, "max_side": 500}},
}
WORKLOAD_NOTES = {
    "images": "The published study trained VGG16 on skin-cancer photographs on GPUs; here generated JPEGs of two "
              "classes (about 110 KB at the default scale) and a small 2D CNN stand in, so that on CPU cores the input "
              "pipelines (read, decode, augment), not the model, set the pace.",
    "volumes": "The published study trained VGG16 on images; this run used the seed volumes and a small 3D CNN instead "
               "(--workload volumes).",
}
BASE_LR, BASE_BATCH = 1e-3, 32
LOADERS = ("torch", "stoke")
LOADER_TITLES = {"torch": "naive DataLoader", "stoke": "stoke"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    common.add_common_arguments(p, default_storage="local")
    p.add_argument("--workload", default="images", choices=data.WORKLOADS,
                   help="the data set: images (generated JPEGs in class folders, the study's kind of data; default) or "
                        "volumes (the seed volumes)")
    p.add_argument("--batches", default="", help="global batch sizes, comma-separated (default by scale: "
                   "16,64 / 16,32,64,128,256)")
    p.add_argument("--epochs", type=int, default=0, help="epochs per run (default by scale: 2 / 3)")
    p.add_argument("--samples", type=int, default=0, help="samples in the data set (default by scale: 256 / 2,000)")
    p.add_argument("--target", type=float, default=0.0,
                   help="validation accuracy to reach (default by scale: 0.6 / 0.7)")
    p.add_argument("--processes", default="1,2", help="process counts to run (default 1,2)")


def run(args: argparse.Namespace, argv: Sequence[str]) -> Dict[str, Any]:
    scale = dict(SCALES[args.scale])
    batches = [int(b) for b in args.batches.split(",")] if args.batches else scale["batches"]
    epochs = args.epochs or scale["epochs"]
    samples = args.samples or scale["samples"]
    target = args.target or scale["target"]
    procs = [int(p) for p in args.processes.split(",")]
    devs, skipped = common.devices(args.device)
    dev = devs[-1]
    workload = data.workload_by_name(args.workload, **scale[args.workload])
    threads = common.setup_torch(args.threads)
    result: Dict[str, Any] = common.run_facts(NAME, args, argv)
    result.update({
        "title": "Batch size: a naive DataLoader against stoke, 1 and 2 processes",
        "workload": {"name": workload.name, "description": workload.describe(), "samples": samples,
                     "file_kind": workload.file_kind, "note": WORKLOAD_NOTES[workload.name]},
        "schedule": {"epochs": epochs, "batch_sizes": batches, "lr_rule": f"Adam, {BASE_LR:g} x batch / {BASE_BATCH}",
                     "target_accuracy": target, "device": dev, "processes": procs, "seed": args.seed,
                     "torch_threads_one_process": threads,
                     "model": workload.model_description},
        "skipped": skipped,
    })
    with common.storage(args, NAME) as st:
        result["storage"] = st.describe()
        files_uri, table_uri = st.uri(workload.name), st.uri("table")
        say(f"batch: writing {samples} {workload.name} to {files_uri} and ingesting them into {table_uri}")
        workload.write_sources(files_uri, samples, args.seed)
        result["table"] = data.ingest_table(workload, files_uri, table_uri)
        st.emulate()
        configs = [{"loader": ld, "batch_size": b, "processes": p, "epochs": epochs, "target": target,
                    "seed": args.seed, "device": dev, "files": files_uri, "table": table_uri,
                    "workload": workload.config()}
                   for p in procs for b in batches for ld in LOADERS]
        # the stoke run of 1 process at the smallest batch is traced for the report's stall attribution
        for c in configs:
            if c["loader"] == "stoke" and c["processes"] == 1 and c["batch_size"] == min(batches):
                c.update(trace_stem=f"{NAME}-stoke-{c['batch_size']}", out=args.out)
        runs: List[Dict[str, Any]] = []
        for p in procs:
            mine = [c for c in configs if c["processes"] == p]
            if p == 1:
                for c in mine:
                    say(f"batch: 1 process, {c['loader']}, batch {c['batch_size']}")
                    runs.append(train_config(c, Dist(False, dev)))
            else:
                say(f"batch: {p} processes under torchrun: {len(mine)} runs")
                runs += launch(mine, p, st.work)
    result["runs"] = runs
    result["measured"]["efficiency"] = efficiency(runs)
    result["measured"]["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    return result


# ---------------------------------------------------------------------------
# one configuration

class Dist:
    """The process group of a torchrun worker (or nothing, for one process)."""

    def __init__(self, enabled: bool, device: str) -> None:
        self.enabled = enabled
        self.rank, self.world = 0, 1
        self.local_rank = 0
        if enabled:
            import torch.distributed as dist
            backend = "nccl" if device == "cuda" and dist.is_nccl_available() else "gloo"
            dist.init_process_group(backend)
            self.rank, self.world = dist.get_rank(), dist.get_world_size()
            self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))

    def reduce(self, values: Sequence[float], op: str, device: torch.device) -> List[float]:
        if not self.enabled:
            return list(values)
        import torch.distributed as dist
        t = torch.tensor(list(values), dtype=torch.float64, device=device)
        dist.all_reduce(t, op=dist.ReduceOp.SUM if op == "sum" else dist.ReduceOp.MAX)
        return t.tolist()

    def barrier(self) -> None:
        if self.enabled:
            import torch.distributed as dist
            dist.barrier()

    def close(self) -> None:
        if self.enabled:
            import torch.distributed as dist
            dist.destroy_process_group()


def train_config(c: Dict[str, Any], d: Dist) -> Dict[str, Any]:
    """Trains one configuration in this process (one rank of it under torchrun)."""
    device = torch.device(f"cuda:{d.local_rank}" if c["device"] == "cuda" else "cpu")
    workload = data.workload_from_config(c["workload"])
    per_process = c["batch_size"] // d.world
    lr = BASE_LR * c["batch_size"] / BASE_BATCH
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    share = max(1, cores // d.world)  # loader threads or DataLoader workers of this process
    train.seed_everything(c["seed"])
    model: torch.nn.Module = workload.small_model().to(device)
    params = models.parameter_counts(model)["trainable"]
    if d.enabled:
        model = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    files = data.SampleFiles(c["files"])
    if c["loader"] == "stoke":
        tr = pipelines.stoke_loader(workload, c["table"], "train", per_process, c["seed"], str(device),
                                    rank=d.rank, world_size=d.world, threads=share, trace=bool(c.get("trace_stem")))
        va = pipelines.stoke_loader(workload, c["table"], "val", 64, c["seed"], str(device), shuffle="none",
                                    rank=0, world_size=1, threads=share)
        batches = lambda e: pipelines.stoke_batches(tr, workload.column, e)  # noqa: E731
        val_batches = lambda: pipelines.stoke_batches(va, workload.column, 0)  # noqa: E731
        closers = [tr.close, va.close]
    else:
        names, labels = files.split("train")
        vnames, vlabels = files.split("val")
        pin = device.type == "cuda"
        tr, sampler = pipelines.torch_dataloader(pipelines.FileDataset(files, workload, names, labels), per_process,
                                                 c["seed"], share, True, d.rank, d.world, pin)
        va, _ = pipelines.torch_dataloader(pipelines.FileDataset(files, workload, vnames, vlabels, train=False), 64,
                                           c["seed"], share, False, pin_memory=pin)

        def batches(e: int) -> Any:
            if sampler is not None:
                sampler.set_epoch(e)
            return pipelines.dataloader_batches(tr)
        val_batches = lambda: pipelines.dataloader_batches(va)  # noqa: E731
        closers = []
    records: List[Dict[str, Any]] = []
    step_log: List[Dict[str, float]] = []
    traced: Dict[str, Any] = {"measured": {}}
    total_seconds = 0.0
    reached: Optional[int] = None
    time_to_target: Optional[float] = None
    try:
        for e in range(c["epochs"]):
            r = train.train_epoch(model, opt, batches(e), device, epoch=e, step_log=step_log)
            ph = [r["phases"][p] for p in train.PHASES]
            samples, loss_sum, *ph = d.reduce([r["samples"], r["loss_sum"], *ph], "sum", device)
            seconds, = d.reduce([r["seconds"]], "max", device)
            acc = None
            if d.rank == 0:
                correct, counted = train.evaluate(getattr(model, "module", model), val_batches(), device)
                acc = correct / counted if counted else None
            acc_t, = d.reduce([acc if acc is not None else 0.0], "sum", device)
            acc = acc_t if d.world > 1 else acc
            total_seconds += seconds
            if reached is None and acc is not None and acc >= c["target"]:
                reached, time_to_target = e + 1, total_seconds
            steps = r["steps"]
            records.append({"epoch": e, "steps": steps, "samples": int(samples), "train_loss": loss_sum / max(1, samples),
                            "val_accuracy": acc,
                            "measured": {"seconds": seconds, "samples_per_second": samples / seconds if seconds else 0.0,
                                         "wait_share": ph[0] / d.world / seconds if seconds else 0.0,
                                         "phases_per_step": {p: v / d.world / max(1, steps)
                                                             for p, v in zip(train.PHASES, ph)}}})
        if c.get("trace_stem"):
            traced = common.save_trace(tr, step_log, Path(c["out"]), c["trace_stem"])
    finally:
        for close in closers:
            close()
    total_samples = sum(r["samples"] for r in records)
    return {"loader": c["loader"], "processes": d.world, "batch_size": c["batch_size"], "per_process_batch": per_process,
            "lr": lr, "parameters": params, "epochs": records, "reached_target_after_epochs": reached,
            "final_val_accuracy": records[-1]["val_accuracy"] if records else None,
            **{k: v for k, v in traced.items() if k != "measured"},
            "measured": {"train_seconds": total_seconds,
                         "samples_per_second": total_samples / total_seconds if total_seconds else 0.0,
                         "time_to_target_seconds": time_to_target, **traced["measured"]}}


def launch(configs: List[Dict[str, Any]], processes: int, work: str) -> List[Dict[str, Any]]:
    """Runs configurations as `processes` torchrun workers of this module; rank 0's results."""
    import stoke
    tmp = tempfile.mkdtemp(prefix="torchrun-", dir=work)
    cfg, out = os.path.join(tmp, "configs.json"), os.path.join(tmp, "runs.json")
    Path(cfg).write_text(json.dumps(configs))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ)
    pkg_parent = str(Path(stoke.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = pkg_parent + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    # --redirects 2 --tee 2: torch 1.13's launcher cannot parse its default ("0") under Python 3.11.
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", str(processes),
           "--master_addr", "127.0.0.1", "--master_port", str(port), "--monitor_interval", "0.2",
           "--redirects", "2", "--tee", "2", "-m", "stoke.experiments.batch", "--worker", cfg, out]
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0 or not os.path.exists(out):
        raise RuntimeError(f"batch: the torchrun workers failed (exit {r.returncode}):\n{r.stderr[-4000:]}")
    return json.loads(Path(out).read_text())


def worker(config_path: str, out_path: str) -> int:
    """A torchrun worker: every configuration in order, results written by rank 0."""
    configs = json.loads(Path(config_path).read_text())
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))
    torch.set_num_threads(max(1, cores // local_world))
    d = Dist(True, configs[0]["device"] if configs else "cpu")
    if configs and configs[0]["device"] == "cuda":
        torch.cuda.set_device(d.local_rank)
    runs = []
    try:
        for c in configs:
            runs.append(train_config(c, d))
            d.barrier()
    finally:
        d.close()
    if d.rank == 0:
        Path(out_path).write_text(json.dumps(runs))
    return 0


def efficiency(runs: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """samples/s of N processes over N x samples/s of 1, per loader and batch size."""
    one = {(r["loader"], r["batch_size"]): r["measured"]["samples_per_second"] for r in runs if r["processes"] == 1}
    out = []
    for r in runs:
        base = one.get((r["loader"], r["batch_size"]))
        if r["processes"] > 1 and base:
            out.append({"loader": r["loader"], "batch_size": r["batch_size"], "processes": r["processes"],
                        "efficiency": r["measured"]["samples_per_second"] / (r["processes"] * base)})
    return out


# ---------------------------------------------------------------------------
# terminal and HTML

def terminal(result: Dict[str, Any]) -> str:
    eff = {(e["loader"], e["batch_size"]): e["efficiency"] for e in result["measured"]["efficiency"]}
    rows = []
    for r in result["runs"]:
        m = r["measured"]
        e = eff.get((r["loader"], r["batch_size"])) if r["processes"] > 1 else None
        rows.append([LOADER_TITLES[r["loader"]], r["processes"], r["batch_size"], f"{r['lr']:.4g}",
                     f"{m['samples_per_second']:.1f}", common.fmt(r["final_val_accuracy"], ".3f"),
                     common.fmt(m["time_to_target_seconds"], ".1f"), common.fmt(e, ".0%")])
    s = result["schedule"]
    return common.text_table(["loader", "processes", "batch", "lr", "samples/s", "val acc",
                              f"s to {s['target_accuracy']:g}", "efficiency"], rows,
                             title=f"batch ({result['scale']}): {s['epochs']} epochs, {result['workload']['description']}; "
                                   f"{result['storage']['text']}") + f"\nnote: {result['workload']['note']}"


def _by_batch(runs: Sequence[Dict[str, Any]], s: Dict[str, Any], key: str) -> List[H.Series]:
    """One series per loader and process count: measured[key] against the batch size."""
    out = []
    for ld in LOADERS:
        for p in s["processes"]:
            idx = [i for i, r in enumerate(runs) if r["loader"] == ld and r["processes"] == p]
            out.append(H.Series(f"{LOADER_TITLES[ld]}, {p} process{'es' if p > 1 else ''}",
                                [runs[i]["measured"][key] for i in idx],
                                [H.pointer("runs", i, "measured", key) for i in idx],
                                xs=[runs[i]["batch_size"] for i in idx]))
    return out


def report_html(result: Dict[str, Any], out_dir: Path) -> str:
    s = result["schedule"]
    runs = result["runs"]
    eff_index = {(e["loader"], e["batch_size"]): i for i, e in enumerate(result["measured"]["efficiency"])}
    rows = []
    for i, r in enumerate(runs):
        m = r["measured"]
        ei = eff_index.get((r["loader"], r["batch_size"])) if r["processes"] > 1 else None
        rows.append([LOADER_TITLES[r["loader"]], r["processes"], r["batch_size"],
                     H.Num(r["lr"], H.pointer("runs", i, "lr"), ".4g"),
                     H.Num(m["samples_per_second"], H.pointer("runs", i, "measured", "samples_per_second"), ".1f"),
                     H.Num(m["train_seconds"], H.pointer("runs", i, "measured", "train_seconds"), ".1f"),
                     H.Num(r["final_val_accuracy"], H.pointer("runs", i, "final_val_accuracy"), ".3f"),
                     H.Num(m["time_to_target_seconds"], H.pointer("runs", i, "measured", "time_to_target_seconds"), ".1f"),
                     H.Num(result["measured"]["efficiency"][ei]["efficiency"],
                           H.pointer("measured", "efficiency", ei, "efficiency"), ".1%") if ei is not None else "–"])
    table = H.table(["loader", "processes", "batch (global)", "learning rate", "samples/s", "training time (s)",
                     "final val accuracy", f"time to {s['target_accuracy']:g} (s)", "efficiency vs 1 process"], rows,
                    caption="Every run")
    sps_chart = H.line_chart("Training throughput against the batch size", _by_batch(runs, s, "samples_per_second"),
                             x_label="batch size (global)", y_label="samples/s", chart_id="batch-throughput",
                             log_x=True, y_min=0.0)
    tts_chart = H.line_chart(f"Training time to {s['target_accuracy']:g} validation accuracy (no mark: not reached)",
                             _by_batch(runs, s, "time_to_target_seconds"), x_label="batch size (global)",
                             y_label="seconds", chart_id="batch-time-to-accuracy", log_x=True, y_min=0.0)
    effs = result["measured"]["efficiency"]
    eff_chart = H.bar_chart("Efficiency of 2 processes against 1", [str(b) for b in s["batch_sizes"]],
                            [H.Series(LOADER_TITLES[ld],
                                      [next((e["efficiency"] for e in effs if e["loader"] == ld and e["batch_size"] == b), None)
                                       for b in s["batch_sizes"]],
                                      [next((H.pointer("measured", "efficiency", i, "efficiency") for i, e in enumerate(effs)
                                             if e["loader"] == ld and e["batch_size"] == b), None) for b in s["batch_sizes"]])
                             for ld in LOADERS], y_label="samples/s (2) / (2 x samples/s (1))",
                            x_label="batch size (global)", chart_id="batch-efficiency")
    epoch_rows = []
    for i, r in enumerate(runs):
        for j, e in enumerate(r["epochs"]):
            base = ("runs", i, "epochs", j)
            epoch_rows.append([LOADER_TITLES[r["loader"]], r["processes"], r["batch_size"], e["epoch"],
                               *train.phase_cells(e, *base),
                               H.Num(e["measured"]["seconds"], H.pointer(*base, "measured", "seconds"), ".2f"),
                               H.Num(e["val_accuracy"], H.pointer(*base, "val_accuracy"), ".3f")])
    per_epoch = H.table(["loader", "processes", "batch", "epoch", *train.PHASE_HEADERS,
                         "epoch time (s)", "val accuracy"], epoch_rows,
                        caption="Per epoch: the TimeLogger fields (mean seconds per step, mean over processes)")
    sections = [
        H.section("What was run",
                  H.paragraph(f"Workload: {result['workload']['description']}, {result['workload']['samples']:,} samples. "
                              f"{result['workload']['note']}"),
                  H.paragraph(f"Storage: {result['storage']['text']}."),
                  H.paragraph(f"Model: {s['model']}; {s['lr_rule']}; {s['epochs']} epochs; device {s['device']}; seed "
                              f"{s['seed']}. With 2 processes each takes half the batch (torchrun, DistributedDataParallel, "
                              "gloo on the CPU) and half the cores: 1 torch thread and 1 loader thread or DataLoader "
                              "worker each on 2 cores; 1 process gets all of them."),
                  H.paragraph(f"The naive DataLoader reads and decodes one {result['workload']['file_kind']} per sample "
                              "in worker processes (torch.utils.data.DataLoader, shuffled by a seeded generator, a "
                              "DistributedSampler under torchrun); stoke reads the table."),
                  *[H.paragraph(f"Note: {n}") for n in result["skipped"]]),
        H.section("Results", table, sps_chart, tts_chart, eff_chart),
        H.section("Where each step's time went (TimeLogger fields)", per_epoch),
        *[common.stall_section(out_dir, r, ("runs", i), chart_prefix=f"stalls-{i}",
                               title=f"Where the time goes: stoke, {r['processes']} process, batch {r['batch_size']}")
          for i, r in enumerate(runs) if "trace_file" in r],
    ]
    sub = (f"{result['command']} — scale {result['scale']}, seed {result['seed']}, "
           f"{result['environment']['cores']} cores, started {result['measured']['started']}")
    return H.page("stoke experiment: batch size (the UND study)", sub, sections)


if __name__ == "__main__":
    # `python -m stoke.experiments.batch --worker CONFIG OUT`: a torchrun worker (see launch()).
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", nargs=2, required=True)
    sys.exit(worker(*ap.parse_args().worker))
