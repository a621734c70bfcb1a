"""One process of a torchrun job that records which table rows each rank reads per epoch.

    PYTHONPATH=build/python torchrun --standalone --nproc_per_node 2 --redirects 2 --tee 2 \\
        python/tests/dist_epoch_worker.py --table TABLE --out order.json

(--redirects 2 --tee 2: torch 1.13's torchrun cannot parse its default "0" under Python 3.11.)

Every process joins a gloo process group, then removes RANK and WORLD_SIZE from its
environment, so the stoke Loader it opens (no rank or world_size given) can take its shard only
from torch.distributed. For each epoch it sets the epoch, reads its batches' __row_ids__ and
gathers them on every rank with all_gather_object; rank 0 writes a JSON file:

    {"world_size": W, "num_rows": n,
     "ranks": [{"rank", "samples_per_epoch", "batches_per_epoch"}, ...],   # one per rank
     "epochs": [[[row ids of rank 0], [row ids of rank 1], ...], ...]}     # one per epoch

test_train_volumes.py checks from it that every row is read exactly once per epoch.
"""

import argparse
import json
import os

import torch.distributed as dist


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--table", required=True)
    p.add_argument("--out", required=True, help="JSON file written by rank 0")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    dist.init_process_group("gloo")
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        os.environ.pop(name, None)
    rank, world = dist.get_rank(), dist.get_world_size()

    import stoke
    loader = stoke.Loader(stoke.open_table(args.table), batch_size=args.batch_size, shuffle="global",
                          seed=args.seed, columns=["label"], drop_last=False, threads=1)
    num_rows = loader.num_rows
    me = {"rank": rank, "samples_per_epoch": loader.samples_per_epoch, "batches_per_epoch": len(loader)}
    ranks = [None] * world
    dist.all_gather_object(ranks, me)

    epochs = []
    for epoch in range(args.epochs):
        loader.set_epoch(epoch)
        ids = [int(i) for batch in loader for i in batch["__row_ids__"]]
        gathered = [None] * world
        dist.all_gather_object(gathered, ids)
        epochs.append(gathered)
    loader.close()

    if rank == 0:
        with open(args.out, "w") as f:
            json.dump({"world_size": world, "num_rows": num_rows, "ranks": ranks, "epochs": epochs}, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
