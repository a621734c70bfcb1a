#!/usr/bin/python3
"""The stoke loader driven from Python: the loop of `stoke bench load`, through the binding.

Opens stoke.Loader(TABLE) with the options `stoke bench load` uses by default (all columns, batch
size 32, global shuffle, seed 0, 512 MiB budget), consumes --warmup-batches batches, then measures
--batches batches (crossing epochs with set_epoch as needed) or --epochs whole epochs. Each batch is
converted as a training script sees it (to="torch": a dict of torch.Tensor sharing the batch
buffer; to="numpy": numpy arrays) and dropped before the next. Prints samples/s and MB/s, or with
--json one line with the keys of `stoke bench load --json` that apply (tool "stoke-python-torch" or
"stoke-python-numpy").

    PYTHONPATH=build/python /usr/bin/python3 bench/python_loader.py TABLE [--to torch|numpy]
        [--batches N | --epochs E] [--warmup-batches K] [--batch-size B] [--where PRED]
        [--threads T] [--device cpu|cuda] [--json]

--device cuda: the loader copies each batch to the GPU (asynchronously from its pinned buffers);
the clock stops after a final torch.cuda.synchronize().
"""

import argparse
import json
import sys
import time

import stoke


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("table")
    ap.add_argument("--to", choices=["torch", "numpy"], default="torch")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batches", type=int, default=0, help="measured batches (0: whole epochs)")
    ap.add_argument("--warmup-batches", type=int, default=0)
    ap.add_argument("--where", default="")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--device", default="cpu", help="cpu (default), or cuda / cuda:N (needs --to torch)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    cuda = a.device != "cpu"
    if cuda:
        import torch

    t_open = time.perf_counter()
    loader = stoke.Loader(stoke.open_table(a.table, where=a.where), batch_size=a.batch_size, shuffle="global",
                          seed=0, to=a.to, threads=a.threads, rank=0, world_size=1, device=a.device)
    open_s = time.perf_counter() - t_open
    warm_left, batches, samples, epoch = a.warmup_batches, 0, 0, 0
    t_start = time.perf_counter() if warm_left == 0 else None
    bytes_at_start = 0 if warm_left == 0 else None
    done = False
    while not done:
        for batch in loader:
            n = len(batch["__row_ids__"])
            del batch
            if warm_left > 0:
                warm_left -= 1
                if warm_left == 0:
                    if cuda:
                        torch.cuda.synchronize(a.device)
                    bytes_at_start = loader.stats()["bytes_read"]
                    t_start = time.perf_counter()
                continue
            batches += 1
            samples += n
            if a.batches and batches >= a.batches:
                done = True
                break
        epoch += 1
        if not a.batches and epoch >= a.epochs:
            done = True
    if cuda:
        torch.cuda.synchronize(a.device)
    wall = time.perf_counter() - t_start if t_start is not None else 0.0
    stats = loader.stats()
    loader.close()
    mb = (stats["bytes_read"] - (bytes_at_start or 0)) / 1e6
    out = {"tool": f"stoke-python-{a.to}" + ("-cuda" if cuda else ""), "samples": samples, "batches": batches, "wall_s": round(wall, 6),
           "samples_per_s": round(samples / wall, 3) if wall > 0 else 0.0,
           "mb_per_s": round(mb / wall, 3) if wall > 0 else 0.0, "open_s": round(open_s, 6),
           "batch_size": a.batch_size}
    if a.json:
        print(json.dumps(out))
    else:
        print(f"{out['tool']}: {samples} samples in {wall:.2f} s: {out['samples_per_s']:.0f} samples/s, "
              f"{out['mb_per_s']:.0f} MB/s")


if __name__ == "__main__":
    sys.exit(main())
