"""The peer for mnddp's GPU benchmark: PyTorch eager (one process, no DDP) training the same ConvNet as
`mnddp train --model convnet` on the same HDF5 data, with the same batch, optimizer and bf16 autocast.

Usage: python3 bench/torch_gpu_peer.py --data DIR --steps 200 --warmup 20 --batch-size 256 \
         --hidden 64 --layers 4 --classes 10
Prints "peer samples/s: X peak_mib: Y" (X measured after --warmup steps, like mnddp's metrics; Y from
torch.cuda.max_memory_allocated).
"""
import argparse
import glob
import os
import time

import h5py
import numpy as np
import torch
import torch.nn.functional as F

# mnddp's ConvNet, built layer for layer as bench/compare.sh's peer builds it (script run from bench/).
from torch_peer import convnet


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--classes", type=int, default=10)
    args = parser.parse_args()

    device = torch.device("cuda", 0)
    xs, ys = [], []
    for path in sorted(glob.glob(os.path.join(args.data, "train_*.h5"))):
        with h5py.File(path, "r") as f:
            xs.append(f["x"][...].astype(np.float32))
            ys.append(f["y"][...].astype(np.int64))
    # The whole training set on the GPU: the peer gets its data for free.
    x = torch.from_numpy(np.concatenate(xs)).to(device)
    y = torch.from_numpy(np.concatenate(ys)).to(device)
    torch.manual_seed(42)
    model = convnet(tuple(x.shape[1:]), args.hidden, args.layers, args.classes).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    generator = torch.Generator(device=device).manual_seed(0)
    torch.cuda.reset_peak_memory_stats(device)
    start = None
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            torch.cuda.synchronize(device)
            start = time.perf_counter()
        index = torch.randint(0, x.shape[0], (args.batch_size,), device=device, generator=generator)
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x[index]).float(), y[index])
        loss.backward()
        opt.step()
    torch.cuda.synchronize(device)
    elapsed = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated(device) / 2**20
    print(f"peer samples/s: {args.steps * args.batch_size / elapsed:.1f} peak_mib: {peak:.0f}")


if __name__ == "__main__":
    main()
