#!/usr/bin/env python3
"""Train a small MLP with DistributedDataParallel over gloo, fed by Spindle.

Every rank reads its own share of the data from the executor's feed (tensor
or arrow mode), gradients are averaged across ranks by DDP, and every rank
ends with the same parameters. Run it with spindle submit::

    spindle submit --master 'local[2]' --input 'data/demo/*.parquet' \\
        --label-column label --feed tensor --batch-rows 256 --epochs 3 \\
        --shuffle --seed 7 --checkpoint-dir /tmp/ckpt \\
        -- /usr/bin/python3 examples/pytorch/train.py

Each epoch prints ``rank=R epoch=E loss=... accuracy=...`` (the figures
are averaged over every rank's rows); the end prints
``final rank=R loss=... accuracy=... params_sha256=...``, where the hash
covers the final parameters, so equal hashes mean equal models.
"""

import argparse
import hashlib
import itertools
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import spindle
import spindle.torch as st


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hidden", type=int, default=32, help="hidden layer width")
    p.add_argument("--lr", type=float, default=0.01, help="Adam learning rate")
    p.add_argument("--seed", type=int, default=0, help="seed of the initial weights")
    p.add_argument("--label-column", default=None,
                   help="label column when the feed does not name it (arrow mode)")
    p.add_argument("--threads", type=int, default=0,
                   help="torch threads per rank (0: the host's cores divided among its ranks)")
    p.add_argument("--checkpoint-name", default="model.pt", help="file name inside SPINDLE_CHECKPOINT_DIR")
    return p.parse_args(argv)


class MLP(nn.Module):
    """A one-hidden-layer perceptron that outputs one logit per row."""

    def __init__(self, features, hidden):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, x):
        return self.net(x).squeeze(1)


def params_sha256(model):
    """Hash the model's parameters, flattened in order, as float32 bytes."""
    flat = torch.cat([p.detach().reshape(-1).to(torch.float32) for p in model.parameters()])
    return hashlib.sha256(flat.numpy().tobytes()).hexdigest()


def train(args):
    local_ranks = int(os.environ.get("LOCAL_WORLD_SIZE") or 1)
    threads = args.threads or max(1, (os.cpu_count() or 1) // max(1, local_ranks))
    torch.set_num_threads(threads)
    torch.manual_seed(args.seed)

    st.init_process_group("gloo")
    rank = dist.get_rank()

    ds = st.FeedDataset(label_column=args.label_column)
    model = MLP(ds.num_features, args.hidden)
    if spindle.checkpoint_dir():
        state = st.load_checkpoint(args.checkpoint_name)
        if state is not None:
            model.load_state_dict(state["model"])
            print(f"rank={rank} resumed from {args.checkpoint_name} after {state['epochs']} epochs", flush=True)
    ddp = DDP(model)  # broadcasts rank 0's parameters, so every rank starts equal
    opt = torch.optim.Adam(ddp.parameters(), lr=args.lr)
    loss_fn = nn.BCEWithLogitsLoss()

    loss = accuracy = float("nan")
    epochs = 0
    for _ in itertools.count():
        start = time.monotonic()
        stats = torch.zeros(3, dtype=torch.float64)  # loss sum, correct, rows
        for x, y in ds:
            if y is None:
                raise SystemExit(f"rank={rank}: the feed has no label column; submit with --label-column")
            y = y.to(torch.float32)
            opt.zero_grad()
            logits = ddp(x)
            batch_loss = loss_fn(logits, y)
            batch_loss.backward()
            opt.step()
            with torch.no_grad():
                stats += torch.tensor([batch_loss.item() * len(y), ((logits > 0) == (y > 0.5)).sum().item(), len(y)],
                                      dtype=torch.float64)
        if ds.end_of_feed:
            break
        dist.all_reduce(stats)
        epochs += 1
        if stats[2] > 0:
            loss, accuracy = (stats[0] / stats[2]).item(), (stats[1] / stats[2]).item()
        print(f"rank={rank} epoch={ds.epoch} loss={loss:.4f} accuracy={accuracy:.4f} rows={int(stats[2])} "
              f"seconds={time.monotonic() - start:.2f}", flush=True)

    if st.is_chief() and spindle.checkpoint_dir():
        path = st.save_checkpoint({"model": model.state_dict(), "epochs": epochs}, args.checkpoint_name)
        print(f"rank={rank} checkpoint={path}", flush=True)
    dist.barrier()
    print(f"final rank={rank} loss={loss:.4f} accuracy={accuracy:.4f} params_sha256={params_sha256(model)}",
          flush=True)
    # destroy_process_group, bounded in time; then end the process without
    # torch's own teardown, which can hang once the other ranks are gone.
    st.finish(exit_status=0)


def main(argv=None):
    args = parse_args(argv)
    try:
        train(args)
    except (RuntimeError, spindle.SpindleError) as e:
        # A lost peer surfaces here as a gloo error; say which rank gave up and why, on one line.
        where = os.environ.get("RANK", "?")
        print(f"rank={where} training failed: {str(e).splitlines()[0] if str(e) else type(e).__name__}",
              file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
