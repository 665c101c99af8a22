"""A PyTorch training process that goes on in place when a rank is lost.

For the elastic tests: a job without input whose ranks train a small
linear model with gloo, averaging gradients with all_reduce (or through a
DistributedDataParallel module with --ddp), each step on data made from
the step number and the rank. When a peer's process dies and the job goes
on without it (spindle.failure.shrinkInPlace), spindle.torch.reform
re-forms the process group with the survivors and catch_up hands them the
furthest survivor's model; the process keeps running. When the job
replaces the lost rank alone instead (spindle.failure.replaceWorkers),
reform re-forms the group with the replacement, which joins it in
init_process_group and gets a survivor's model from catch_up before it
trains. With --grow every rank calls spindle.torch.grow at each step
boundary, so that newcomers join in place (spindle.failure.growInPlace):
the ranks that grew print "grew", a newcomer prints "replaced" (it joins
and catches up as a replacement does). Every step also
all_reduces a one from every rank and checks the sum is the world size,
so a rank left in the old world fails. It prints::

    torchshrink joined pid=123 rank=2 world=4
    torchshrink at pid=123 rank=2 world=4 step=50
    torchshrink went on pid=123 rank=1 world=3 was=2/4 step=41 at_ms=1764412345678
    torchshrink replaced pid=124 rank=1 world=4 step=41 at_ms=1764412345678
    torchshrink grew pid=123 rank=1 world=4 was=1/3 step=97 at_ms=1764412345678
    torchshrink final pid=123 rank=1 world=3 steps=200 params_sha256=...

("at" every 50 steps; "replaced" from a lost rank's replacement; at_ms:
when its first step in the new world completed, Unix milliseconds).
"""

import argparse
import hashlib
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import spindle
import spindle.torch as st


def batch(step, rank):
    """The rows rank trains at step: the same wherever it runs."""
    g = torch.Generator().manual_seed(step * 1000 + rank)
    x = torch.randn(16, 4, generator=g)
    return x, x @ torch.tensor([1.0, -2.0, 0.5, 3.0]) + 0.1 * torch.randn(16, generator=g)


def train_step(net, model, opt, step, ddp):
    """One step: the gradients of every rank's batch, averaged."""
    one = torch.ones(1)
    dist.all_reduce(one)
    world = dist.get_world_size()
    if int(one.item()) != world:
        raise SystemExit(f"torchshrink: step {step}: the ranks' ones sum to {one.item()} in a world of {world}")
    x, y = batch(step, dist.get_rank())
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x).squeeze(1), y)
    loss.backward()
    if not ddp:
        for p in net.parameters():
            dist.all_reduce(p.grad)
            p.grad /= dist.get_world_size()
    opt.step()


def params_sha256(net):
    h = hashlib.sha256()
    for t in net.state_dict().values():
        h.update(t.detach().numpy().tobytes())
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--pause", type=float, default=0.02, help="the work of one step, seconds")
    ap.add_argument("--ddp", action="store_true", help="average gradients with a DistributedDataParallel module")
    ap.add_argument("--grow", action="store_true", help="grow in place at every step boundary (spindle.torch.grow)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    st.init_process_group()
    net = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    pid = os.getpid()
    step, was = 0, None
    if spindle.replacement():
        step = st.catch_up(step, net, opt)  # before DDP, as the survivors do after reform
        was = "replaced"
    # A newcomer's catch_up answered the others' grow at this step
    # boundary: its first step does not call grow.
    fresh = was is not None
    model = DDP(net) if args.ddp else net
    print(f"torchshrink joined pid={pid} rank={dist.get_rank()} world={dist.get_world_size()}", flush=True)
    while step < args.steps:
        time.sleep(args.pause)  # the step's work: not synchronisation
        try:
            if args.grow and not fresh:
                before = f"{dist.get_rank()}/{dist.get_world_size()}"
                step, grew = st.grow(step, net, opt)
                if grew:
                    was, model = f"grew:{before}", DDP(net) if args.ddp else net
            fresh = False
            train_step(net, model, opt, step, args.ddp)
        except RuntimeError as e:
            was = f"{dist.get_rank()}/{dist.get_world_size()}"
            model = None  # the old DDP module holds the old group
            st.reform(e)
            step = st.catch_up(step, net, opt)
            model = DDP(net) if args.ddp else net
            continue
        step += 1
        if step % 50 == 0:
            print(f"torchshrink at pid={pid} rank={dist.get_rank()} world={dist.get_world_size()} step={step}",
                  flush=True)
        if was == "replaced":
            print(f"torchshrink replaced pid={pid} rank={dist.get_rank()} world={dist.get_world_size()} "
                  f"step={step} at_ms={int(time.time() * 1000)}", flush=True)
        elif was is not None and was.startswith("grew:"):
            print(f"torchshrink grew pid={pid} rank={dist.get_rank()} world={dist.get_world_size()} was={was[5:]} "
                  f"step={step} at_ms={int(time.time() * 1000)}", flush=True)
        elif was is not None:
            print(f"torchshrink went on pid={pid} rank={dist.get_rank()} world={dist.get_world_size()} was={was} "
                  f"step={step} at_ms={int(time.time() * 1000)}", flush=True)
        was = None
    print(f"torchshrink final pid={pid} rank={dist.get_rank()} world={dist.get_world_size()} steps={step} "
          f"params_sha256={params_sha256(net)}", flush=True)
    st.barrier()
    st.finish(exit_status=0)


if __name__ == "__main__":
    sys.exit(main())
