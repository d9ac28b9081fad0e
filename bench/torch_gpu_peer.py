"""The peer of mnddp's GPU benchmark (bench/gpu_bench.py): PyTorch on the GPU training the same model as
`mnddp train` (bench/torch_peer.py's builders, layer for layer), bf16 autocast, the same per-rank batch
and optimizer. One process: PyTorch eager, no DDP. Under torchrun: DistributedDataParallel over NCCL
(gradient_as_bucket_view, as mnddp's buckets), each rank on GPU LOCAL_RANK % devices; --one-gpu gives
two ranks on one GPU each its own NCCL_HOSTID, as tests/gpu/one_gpu_pair.sh does for mnddp.

The peer gets its data for free: the whole training set is loaded onto the GPU once and batches are
drawn there, where mnddp reads HDF5 shards through its loader. It reads the loss only at the end,
as a throughput-minded script does. Prints on rank 0, after --warmup steps:
  "peer samples/s: X peak_mib: Y host_waits_per_step: Z"
(X global; Y torch.cuda.max_memory_allocated; Z the preloaded host-wait counter's count per step,
bench/host_wait_counter.c, or nan without it.)
"""
import argparse
import ctypes
import glob
import math
import os
import sys
import time

import h5py
import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_peer import Gpt, convnet  # noqa: E402


class BasicBlock(nn.Module):
    """torchvision's ResNet BasicBlock (torchvision may be missing where the benchmark runs)."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (x if self.downsample is None else self.downsample(x)))


def resnet18_cifar(channels, outputs):
    """mnddp's --model resnet18 --stem cifar: torchvision's ResNet-18 with a 3x3 stride-1 stem, no max-pool."""
    layers, cin = [nn.Conv2d(channels, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU()], 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, outputs)]
    return nn.Sequential(*layers)


def host_waits():
    try:
        count = ctypes.CDLL(None).mnddp_interposed_host_waits
    except AttributeError:
        return math.nan
    count.restype = ctypes.c_uint64
    return float(count())


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=["convnet", "resnet18", "gpt"], required=True)
    p.add_argument("--data", required=True, help="the directory of train_*.h5 (mnddp-data synth)")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--batch-size", type=int, required=True, help="per rank")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--vocab-size", type=int, default=512)
    p.add_argument("--one-gpu", action="store_true", help="every rank on GPU 0, NCCL told they are hosts apart")
    args = p.parse_args()

    distributed = "LOCAL_RANK" in os.environ
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if distributed and args.one_gpu:
        os.environ.update(NCCL_HOSTID=f"peer-{local_rank}", NCCL_SOCKET_IFNAME="lo", NCCL_IB_DISABLE="1")
    device = torch.device("cuda", 0 if args.one_gpu else local_rank % torch.cuda.device_count())
    torch.cuda.set_device(device)
    if distributed:
        dist.init_process_group("nccl", device_id=device)
    rank, world = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)

    xs, ys = [], []
    for path in sorted(glob.glob(os.path.join(args.data, "train_*.h5"))):
        with h5py.File(path, "r") as f:
            xs.append(f["x"][...])
            if "y" in f:
                ys.append(f["y"][...].astype(np.int64))
    lm = args.model == "gpt"
    x = torch.from_numpy(np.concatenate(xs).astype(np.int64 if lm else np.float32)).to(device)
    y = None if lm else torch.from_numpy(np.concatenate(ys)).to(device)
    torch.manual_seed(42)
    if args.model == "convnet":
        model = convnet(tuple(x.shape[1:]), args.hidden, args.layers, args.classes)
    elif args.model == "resnet18":
        model = resnet18_cifar(x.shape[1], args.classes)
    else:
        model = Gpt(args.vocab_size, x.shape[1] - 1, args.hidden, args.layers, args.heads)
    model = model.to(device)
    trained = nn.parallel.DistributedDataParallel(model, device_ids=[device.index], gradient_as_bucket_view=True) \
        if distributed else model
    if lm:
        decay = [q for q in model.parameters() if q.dim() > 1]
        rest = [q for q in model.parameters() if q.dim() <= 1]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                                lr=3e-3, betas=(0.9, 0.95))
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    generator = torch.Generator(device=device).manual_seed(rank)
    torch.cuda.reset_peak_memory_stats(device)
    start, waits = None, math.nan
    total = torch.zeros((), device=device)
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            torch.cuda.synchronize(device)
            if distributed:
                dist.barrier()
            start, waits = time.perf_counter(), host_waits()
        index = torch.randint(0, x.shape[0], (args.batch_size,), device=device, generator=generator)
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            if lm:
                tokens = x[index]
                out = trained(tokens[:, :-1])
                loss = F.cross_entropy(out.float().reshape(-1, out.shape[-1]), tokens[:, 1:].reshape(-1))
            else:
                loss = F.cross_entropy(trained(x[index]).float(), y[index])
        loss.backward()
        opt.step()
        total += loss.detach()
    waits = (host_waits() - waits) / args.steps
    torch.cuda.synchronize(device)
    if distributed:
        dist.barrier()
    elapsed = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated(device) / 2**20
    if rank == 0:
        print(f"peer samples/s: {args.steps * args.batch_size * world / elapsed:.1f} peak_mib: {peak:.0f} "
              f"host_waits_per_step: {waits:.2f} (loss {total.item() / (args.warmup + args.steps):.3f})", flush=True)
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
