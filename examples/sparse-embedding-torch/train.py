#!/usr/bin/env python3
"""Train a sparse embedding + logistic model in PyTorch, its tables on Spindle's parameter server.

Every worker generates its own rows from a known sparse logistic model
(categorical fields whose values follow a power law, so some ids are hot;
a true weight for the hot values of each field), and trains

    logit = sum_f w[id_f] + v . sum_f e[id_f] + b

where w (one weight per id) and e (an 8-wide embedding per id) are sparse
tables of ``spindle.ps.Embedding`` and (v, b) is a dense one-row table:
nothing of the model lives in the process, so the tables may be larger
than one machine. Each step's forward pulls the batch's distinct ids, its
backward pushes their gradients, and ``clock()`` ends the step, so under
BSP every worker sees every other's updates. Run it with::

    spindle submit --master 'local[2]' --num-ps 2 \\
        -- /usr/bin/python3 examples/sparse-embedding-torch/train.py

At the end every worker scores the same held-out rows and prints
``sparse-embedding-torch: rank R auc A (known model K) accuracy X
(majority M) steps S pushes P``, where K is the AUC of the model that made
the data (the best any learner can do on those rows), M the accuracy of
always guessing the commoner label, and P counts the pushes the servers
applied to w. Under BSP every worker scores the same model: the lines
agree.
"""

import argparse
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

import spindle
import spindle.ps

VALUE_BITS = 20  # an id is field << VALUE_BITS | value


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--fields", type=int, default=8, help="categorical fields per row")
    p.add_argument("--vocab", type=int, default=2000, help="values per field")
    p.add_argument("--hot", type=int, default=60, help="values per field with a nonzero true weight")
    p.add_argument("--power", type=float, default=1.1, help="power law of the values (larger: hotter ids)")
    p.add_argument("--weight-scale", type=float, default=0.8, help="standard deviation of the true weights")
    p.add_argument("--rows", type=int, default=60000, help="training rows per worker")
    p.add_argument("--batch", type=int, default=500, help="rows per step")
    p.add_argument("--eval-rows", type=int, default=20000, help="held-out rows every worker scores")
    p.add_argument("--dim", type=int, default=8, help="embedding width")
    p.add_argument("--lr", type=float, default=0.5, help="the servers' AdaGrad learning rate")
    p.add_argument("--seed", type=int, default=7, help="seed of the true model and the rows")
    return p.parse_args(argv)


class Data:
    """Rows of a known sparse logistic model."""

    def __init__(self, o):
        self.o = o
        rng = np.random.default_rng(o.seed)
        self.true = np.zeros((o.fields, o.vocab))
        self.true[:, :o.hot] = rng.normal(0, o.weight_scale, (o.fields, o.hot))
        self.bias = -0.5
        p = 1.0 / np.arange(1, o.vocab + 1) ** o.power
        self.p = p / p.sum()

    def rows(self, n, stream):
        """Return n rows of stream: ids (n, fields) as uint64, labels (n,), the true logits (n,)."""
        o = self.o
        rng = np.random.default_rng([o.seed, stream])
        values = rng.choice(o.vocab, size=(n, o.fields), p=self.p)
        logit = self.bias + self.true[np.arange(o.fields), values].sum(axis=1)
        y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(np.float32)
        ids = (np.arange(o.fields, dtype=np.uint64) << np.uint64(VALUE_BITS)) | values.astype(np.uint64)
        return ids, y, logit


class Model(torch.nn.Module):
    """logit = sum_f w[id_f] + v . sum_f e[id_f] + b, every table on the parameter servers."""

    def __init__(self, ps, o):
        super().__init__()
        self.dim = o.dim
        self.wide = spindle.ps.Embedding(ps, "wide", 1, optimizer="adagrad", lr=o.lr)
        self.emb = spindle.ps.Embedding(ps, "emb", o.dim, optimizer="adagrad", lr=o.lr,
                                        initializer="normal", scale=0.05, seed=o.seed)
        self.head = spindle.ps.Embedding(ps, "head", o.dim + 1, optimizer="adagrad", lr=o.lr / 2, rows=1,
                                         initializer="uniform", scale=0.05, seed=o.seed)

    def forward(self, ids):
        head = self.head(torch.zeros(1, dtype=torch.int64))[0]
        v, b = head[:self.dim], head[self.dim]
        deep = self.emb(ids).sum(dim=1) @ v
        return self.wide(ids).sum(dim=(1, 2)) + deep + b


def auc(scores, labels):
    """The probability that a random positive scores above a random negative."""
    order = np.argsort(scores, kind="stable")
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(1, len(scores) + 1)
    pos = labels > 0.5
    npos, nneg = pos.sum(), (~pos).sum()
    return (ranks[pos].sum() - npos * (npos + 1) / 2) / (npos * nneg)


def main(argv):
    o = parse_args(argv)
    torch.set_num_threads(1)
    rank = spindle.role_rank()
    data = Data(o)
    ps = spindle.ps.connect()
    model = Model(ps, o)

    start = time.monotonic()
    ids, y, _ = data.rows(o.rows, stream=1 + rank)
    steps = 0
    for at in range(0, o.rows, o.batch):
        logits = model(torch.from_numpy(ids[at:at + o.batch].astype(np.int64)))
        loss = F.binary_cross_entropy_with_logits(logits, torch.from_numpy(y[at:at + o.batch]))
        loss.backward()   # pushes the gradients of every table's rows
        ps.clock()        # ends the step: under BSP the next pull waits for every worker
        steps += 1
        if steps % 40 == 0:
            print(f"rank={rank} step={steps} loss={loss.item():.4f}", flush=True)

    # The same held-out rows on every worker; pulled after every worker's
    # last step (BSP), so every worker scores the same model.
    ids, y, known = data.rows(o.eval_rows, stream=0)
    with torch.no_grad():
        scores = model(torch.from_numpy(ids.astype(np.int64))).numpy()
    acc = float(((scores > 0) == (y > 0.5)).mean())
    majority = max(float(y.mean()), 1 - float(y.mean()))
    pushes = sum(t["pushes"] for s in ps.stats()["servers"] for t in s["tables"] if t["name"] == "wide")
    ps.close()
    print(f"sparse-embedding-torch: rank {rank} auc {auc(scores, y):.4f} (known model {auc(known, y):.4f}) "
          f"accuracy {acc:.4f} (majority {majority:.4f}) steps {steps} pushes {pushes} seconds {time.monotonic() - start:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
