"""The peer for mnddp's training benchmark: PyTorch DDP (gloo on CPU, NCCL on GPU) launched by torchrun,
training the same MLP on the same HDF5 shards with the same global batch, sampling and optimizer.

Usage: torchrun --nproc_per_node 2 bench/torch_ddp_peer.py --data DIR --steps 200 --batch-size 64
Prints one line: "peer samples/s: X" (measured after --warmup steps, like mnddp's metrics).
"""
import argparse
import glob
import os
import time

import h5py
import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


def load_shards(pattern):
    xs, ys = [], []
    for path in sorted(glob.glob(pattern)):
        with h5py.File(path, "r") as f:
            xs.append(f["x"][...].astype(np.float32))
            ys.append(f["y"][...].astype(np.int64))
    return torch.from_numpy(np.concatenate(xs)), torch.from_numpy(np.concatenate(ys))


def mlp(inputs, hidden, layers, classes):
    modules, width = [nn.Flatten()], inputs
    for _ in range(layers):
        modules += [nn.Linear(width, hidden), nn.ReLU()]
        width = hidden
    modules.append(nn.Linear(width, classes))
    return nn.Sequential(*modules)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--classes", type=int, default=10)
    args = parser.parse_args()

    torch.set_num_threads(1)
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if cuda else torch.device("cpu")

    # The whole training set in memory: the peer gets its data for free, mnddp reads HDF5 as it goes.
    x, y = load_shards(os.path.join(args.data, "train_*.h5"))
    torch.manual_seed(42)
    model = mlp(x[0].numel(), args.hidden, args.layers, args.classes).to(device)
    ddp = nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if cuda else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    generator = torch.Generator().manual_seed(42)
    order = torch.randperm(len(x), generator=generator)
    global_batch = args.batch_size * world

    start = None
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            dist.barrier()
            start = time.perf_counter()
        first = (step * global_batch) % (len(x) - global_batch + 1)
        idx = order[first + rank * args.batch_size: first + (rank + 1) * args.batch_size]
        xb, yb = x[idx].to(device), y[idx].to(device)
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(ddp(xb), yb)
        loss.backward()
        opt.step()
    if cuda:
        torch.cuda.synchronize()
    dist.barrier()
    elapsed = time.perf_counter() - start
    if rank == 0:
        print(f"peer samples/s: {args.steps * global_batch / elapsed:.1f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
