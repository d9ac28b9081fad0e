"""The peer of bench/compare.sh: PyTorch DDP (gloo on CPU, NCCL on GPU) under torchrun, training one of
mnddp's models, rebuilt layer for layer, on the same HDF5 shards through h5py with a DistributedSampler,
with the same per-rank batch, optimizer, threads and number of steps.

Usage: torchrun --nproc_per_node 2 bench/torch_peer.py --model mlp --data 'DIR/train_*.h5' --steps 620 \
         --batch-size 64 --hidden 512 --layers 2
Rank 0 prints "parameters: N" before training, "step S/T: loss L" every --log-interval steps and at the
last step (the loss averaged over the interval and the ranks, as mnddp logs it), and "done: T steps".

Data: each batch is read from the HDF5 files as it is needed, the way mnddp's loader reads it (not
preloaded): a BatchSampler over a DistributedSampler hands a DataLoader one batch of indices at a
time; the dataset reads those rows with h5py (labels are read once per file, as mnddp does). By
default the rank reads them itself (--workers 0): for these small batches a worker process costs more
in inter-process transfer than it hides; --workers N reads --prefetch batches ahead in N processes.
"""
import argparse
import bisect
import glob
import math
import os

import h5py
import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import BatchSampler, DataLoader, Dataset, DistributedSampler


# ---- data -----------------------------------------------------------------------------------------


class H5Batches(Dataset):
    """The samples of several HDF5 files as one dataset, indexed by a list of sample ids (one batch).

    Files are opened lazily in the process that reads them: an h5py handle must not cross a fork into
    a DataLoader worker."""

    def __init__(self, paths, lm):
        self.paths, self.lm = paths, lm
        self.starts, total = [], 0
        for path in paths:
            with h5py.File(path, "r") as f:
                self.starts.append(total)
                total += len(f["x"])
                self.sample_shape, self.dtype = f["x"].shape[1:], f["x"].dtype
        self.total = total
        self.files = None

    def _open(self):
        # No chunk cache: with h5py's default 1 MiB cache, each random row pulls its whole ~1 MiB chunk
        # through the cache (14x slower per batch here); without it HDF5 reads just the row, from the
        # page cache, as mnddp's direct reads do.
        self.files = [h5py.File(path, "r", rdcc_nbytes=0) for path in self.paths]
        self.x = [f["x"] for f in self.files]
        self.y = None if self.lm else [f["y"][...].astype(np.int64) for f in self.files]

    def __len__(self):
        return self.total

    def __getitem__(self, indices):
        if self.files is None:
            self._open()
        indices = sorted(indices)  # file order: the reads walk forward through the chunks
        x = np.empty((len(indices), *self.sample_shape), dtype=self.dtype)
        y = None if self.lm else np.empty(len(indices), dtype=np.int64)
        for row, index in enumerate(indices):
            shard = bisect.bisect_right(self.starts, index) - 1
            local = index - self.starts[shard]
            # One row per read: faster with h5py than one fancy-indexed read of the batch.
            x[row] = self.x[shard][local]
            if y is not None:
                y[row] = self.y[shard][local]
        if self.lm:
            return torch.from_numpy(x.astype(np.int64)), None
        return torch.from_numpy(x), torch.from_numpy(y)


# ---- models (each as mnddp's src/model/*.cpp builds it) --------------------------------------------


def mlp(sample_shape, hidden, layers, outputs):
    """src/model/mlp.cpp: Flatten -> [Linear -> ReLU] x layers -> Dropout -> Linear."""
    width, modules = math.prod(sample_shape), [nn.Flatten()]
    for _ in range(layers):
        modules += [nn.Linear(width, hidden), nn.ReLU()]
        width = hidden
    modules += [nn.Dropout(0.0), nn.Linear(width, outputs)]
    return nn.Sequential(*modules)


def convnet(sample_shape, hidden, layers, outputs):
    """src/model/convnet.cpp: [Conv3x3 (no bias) -> BatchNorm -> ReLU -> MaxPool 2 while the image is
    larger than 1x1] x layers, channels doubling up to 1024, global average pool, Dropout, Linear."""
    channels, height, width = sample_shape
    modules, out = [], hidden
    for _ in range(layers):
        modules += [nn.Conv2d(channels, out, 3, padding=1, bias=False), nn.BatchNorm2d(out), nn.ReLU()]
        if height >= 2 and width >= 2:
            modules.append(nn.MaxPool2d(2))
            height, width = height // 2, width // 2
        channels, out = out, min(out * 2, 1024)
    modules += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.0), nn.Linear(channels, outputs)]
    return nn.Sequential(*modules)


def resnet18_cifar(sample_shape, outputs):
    """src/model/resnet.cpp follows torchvision; its CIFAR stem (images up to 64x64) is a 3x3 stride-1
    convolution without the max-pool, as data_tools/load_checkpoint.py rebuilds it."""
    import torchvision  # only this model needs it (it costs start-up time)

    model = torchvision.models.resnet18(num_classes=outputs)
    model.conv1 = nn.Conv2d(sample_shape[0], 64, 3, stride=1, padding=1, bias=False)
    nn.init.kaiming_normal_(model.conv1.weight, mode="fan_out", nonlinearity="relu")
    model.maxpool = nn.Identity()
    return model


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, heads):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(d_model, 3 * d_model)
        self.c_proj = nn.Linear(d_model, d_model)
        self.resid_dropout = nn.Dropout(0.0)

    def forward(self, x):
        batch, length, width = x.shape
        q, k, v = self.c_attn(x).split(width, 2)
        q, k, v = (t.view(batch, length, self.heads, width // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.resid_dropout(self.c_proj(y.transpose(1, 2).contiguous().view(batch, length, width)))


class MlpBlock(nn.Module):
    def __init__(self, d_model):
        super().__init__()
        self.c_fc = nn.Linear(d_model, 4 * d_model)
        self.c_proj = nn.Linear(4 * d_model, d_model)
        self.dropout = nn.Dropout(0.0)

    def forward(self, x):
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, d_model, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, heads)
        self.ln_2 = nn.LayerNorm(d_model)
        self.mlp = MlpBlock(d_model)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt(nn.Module):
    """src/model/gpt.cpp (nanoGPT's names): embeddings, pre-LayerNorm blocks, a final LayerNorm and an
    output layer tied to the token embedding; GPT-2's initialisation."""

    def __init__(self, vocab, context, d_model, layers, heads):
        super().__init__()
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(vocab, d_model),
                wpe=nn.Embedding(context, d_model),
                drop=nn.Dropout(0.0),
                h=nn.ModuleList(Block(d_model, heads) for _ in range(layers)),
                ln_f=nn.LayerNorm(d_model),
            )
        )
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith(".bias"):
                    p.zero_()
                elif "ln_" in name:
                    p.fill_(1.0)
                else:
                    p.normal_(0.0, 0.02 / math.sqrt(2 * layers) if name.endswith("c_proj.weight") else 0.02)

    def forward(self, tokens):
        t = self.transformer
        x = t.drop(t.wte(tokens) + t.wpe(torch.arange(tokens.shape[1], device=tokens.device)))
        for block in t.h:
            x = block(x)
        return F.linear(t.ln_f(x), t.wte.weight)


def build_model(args, sample_shape):
    if args.model == "mlp":
        return mlp(sample_shape, args.hidden, args.layers, args.num_classes)
    if args.model == "convnet":
        return convnet(sample_shape, args.hidden, args.layers, args.num_classes)
    if args.model == "resnet18":
        return resnet18_cifar(sample_shape, args.num_classes)
    # lm: mnddp's context is the stored sequence length - 1 (inputs 0..C-1, targets 1..C).
    return Gpt(args.vocab_size, sample_shape[0] - 1, args.hidden, args.layers, args.heads)


def build_optimizer(args, model):
    if args.optimizer == "sgd":
        return torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum, weight_decay=args.weight_decay)
    # mnddp's --no-decay-norm-bias auto (true for adamw): tensors of at most one dimension get no decay.
    decay = [p for p in model.parameters() if p.dim() > 1]
    rest = [p for p in model.parameters() if p.dim() <= 1]
    groups = [{"params": decay, "weight_decay": args.weight_decay}, {"params": rest, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=args.lr, betas=(args.beta1, args.beta2), eps=args.eps)


# ---- training -------------------------------------------------------------------------------------


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", choices=["classification", "lm"], default="classification")
    p.add_argument("--model", choices=["mlp", "convnet", "resnet18", "gpt"], required=True)
    p.add_argument("--data", required=True, help="glob of the training shards (mnddp's --train-data)")
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--batch-size", type=int, required=True, help="per rank, as mnddp's")
    p.add_argument("--log-interval", type=int, default=0, help="0: log only the last step")
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--num-classes", type=int, default=10)
    p.add_argument("--vocab-size", type=int, default=256)
    p.add_argument("--optimizer", choices=["sgd", "adamw"], default="sgd")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--beta1", type=float, default=0.9)
    p.add_argument("--beta2", type=float, default=0.999)
    p.add_argument("--eps", type=float, default=1e-8)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--workers", type=int, default=0, help="DataLoader worker processes per rank (0: read in the rank)")
    p.add_argument("--prefetch", type=int, default=4, help="batches each worker reads ahead (mnddp's default 4)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--seed", type=int, default=42)
    args = p.parse_args()
    if (args.task == "lm") != (args.model == "gpt"):
        p.error("--model gpt goes with --task lm, and only it")
    return args


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    cuda = args.device == "cuda"
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    lm = args.task == "lm"

    paths = sorted(glob.glob(args.data))  # sorted, as mnddp expands its globs
    if not paths:
        raise SystemExit(f"torch_peer.py: no files match {args.data!r}")
    data = H5Batches(paths, lm)
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=args.seed, drop_last=True)
    loader = DataLoader(
        data,
        batch_size=None,  # the sampler yields whole batches of indices
        sampler=BatchSampler(sampler, args.batch_size, drop_last=True),
        num_workers=args.workers,
        prefetch_factor=args.prefetch if args.workers else None,
        persistent_workers=args.workers > 0,
        pin_memory=cuda,
    )

    torch.manual_seed(args.seed)
    model = build_model(args, data.sample_shape).to(device)
    if rank == 0:
        print(f"parameters: {sum(p.numel() for p in model.parameters())}", flush=True)
    # Gradients as views of the all-reduce buckets, zeroed in place: what mnddp's reducer does.
    ddp = nn.parallel.DistributedDataParallel(
        model, device_ids=[local_rank] if cuda else None, gradient_as_bucket_view=True
    )
    opt = build_optimizer(args, ddp)

    step, epoch, interval_loss, interval_steps = 0, 0, 0.0, 0
    while step < args.steps:
        sampler.set_epoch(epoch)
        for x, y in loader:
            x = x.to(device, non_blocking=True)
            if lm:
                x, y = x[:, :-1], x[:, 1:]
            else:
                y = y.to(device, non_blocking=True)
            opt.zero_grad(set_to_none=False)
            out = ddp(x)
            loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
            loss.backward()
            opt.step()
            # mnddp reads every step's loss too (for its interval mean).
            interval_loss += loss.item()
            interval_steps += 1
            step += 1
            if (args.log_interval and step % args.log_interval == 0) or step == args.steps:
                # The interval's loss averaged across ranks: mnddp's metrics all-reduce.
                mean = torch.tensor([interval_loss / interval_steps, 0.0], dtype=torch.float64, device=device)
                dist.all_reduce(mean)
                if rank == 0:
                    print(f"step {step}/{args.steps}: loss {mean[0].item() / world:.4f}", flush=True)
                interval_loss, interval_steps = 0.0, 0
            if step == args.steps:
                break
        epoch += 1
    if cuda:
        torch.cuda.synchronize(device)
    if rank == 0:
        print(f"done: {step} steps", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
