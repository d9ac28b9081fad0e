"""Load an mnddp checkpoint into an equivalent PyTorch nn.Module, with h5py only (no mnddp needed).

    from load_checkpoint import load_checkpoint
    model, config = load_checkpoint("ckpt/step-00000384.h5")     # or an `mnddp export` file
    model.eval(); logits = model(x)

Command line: evaluate a checkpoint on HDF5 shards and print the accuracy, or verify every array
of it (parameters, buffers, optimizer state; exit 1 naming the corrupt ones):
    python data_tools/load_checkpoint.py ckpt/step-00000384.h5 --data 'data/demo/val_*.h5'
    python data_tools/load_checkpoint.py ckpt/step-00000384.h5 --verify
The module layouts mirror src/model/ (ResNets are torchvision's own, which needs torchvision), so
parameter names match the checkpoint's. Every array read is verified against its checksum
(verify_dataset: XXH3-64 blocks, which needs the `xxhash` wheel, or CRC-32 in format 1 files).
"""
import argparse
import configparser
import glob
import struct
import sys
import zlib

import h5py
import numpy as np
import torch
import torch.jit._pickle  # noqa: F401  (restore_type_tag, allow-listed for torch.load below)
import torch.nn as nn


def parse_config(text):
    """The run's INI text (mnddp --print-config format) as a dict of strings."""
    parser = configparser.ConfigParser(interpolation=None, comment_prefixes=("#",))
    parser.read_string("[run]\n" + text)
    return dict(parser["run"])


class Mlp(nn.Module):
    def __init__(self, in_features, hidden, layers, classes, dropout):
        super().__init__()
        modules, width = [], in_features
        for _ in range(layers):
            modules += [nn.Linear(width, hidden), nn.ReLU()]
            width = hidden
        modules += [nn.Dropout(dropout), nn.Linear(width, classes)]
        self.body = nn.Sequential(*modules)

    def forward(self, x):
        return self.body(x.flatten(1))


class ConvNet(nn.Module):
    def __init__(self, shape, hidden, layers, classes, dropout, batch_norm=True):
        super().__init__()
        channels, height, width = shape
        out, modules = hidden, []
        for _ in range(layers):
            modules.append(nn.Conv2d(channels, out, 3, padding=1, bias=not batch_norm))
            if batch_norm:
                modules.append(nn.BatchNorm2d(out))
            modules.append(nn.ReLU())
            if height >= 2 and width >= 2:
                modules.append(nn.MaxPool2d(2))
                height, width = height // 2, width // 2
            channels, out = out, min(out * 2, 1024)
        modules += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(dropout), nn.Linear(channels, classes)]
        self.features = nn.Sequential(*modules)

    def forward(self, x):
        return self.features(x.unsqueeze(1) if x.dim() == 3 else x)


def resnet(name, shape, classes, stem):
    """torchvision's ResNet with mnddp's input channels and stem (--stem; auto: cifar up to 64x64)."""
    import torchvision  # only needed for ResNets

    channels, height, width = shape
    model = getattr(torchvision.models, name)(num_classes=classes)
    cifar = stem == "cifar" or (stem == "auto" and height <= 64 and width <= 64)
    if cifar:
        model.conv1 = nn.Conv2d(channels, 64, 3, stride=1, padding=1, bias=False)
        model.maxpool = nn.Identity()
    elif channels != 3:
        model.conv1 = nn.Conv2d(channels, 64, 7, stride=2, padding=3, bias=False)
    return model


def vit(shape, hidden, layers, heads, patch, classes, dropout):
    """torchvision's VisionTransformer (mlp_dim 4 x hidden), with mnddp's input channels."""
    from torchvision.models import VisionTransformer

    channels, height, width = shape
    if height != width:
        raise ValueError(f"torchvision's ViT takes square images only, this checkpoint's are {height}x{width}")
    model = VisionTransformer(image_size=height, patch_size=patch, num_layers=layers, num_heads=heads,
                              hidden_dim=hidden, mlp_dim=4 * hidden, num_classes=classes, dropout=dropout)
    if channels != 3:
        model.conv_proj = nn.Conv2d(channels, hidden, patch, stride=patch)
    return model


class CosmoFlowBlock(nn.Module):
    def __init__(self, channels, out, pool):
        super().__init__()
        self.conv = nn.Conv3d(channels, out, 3, padding=1)
        self.pool = pool

    def forward(self, x):
        x = nn.functional.leaky_relu(self.conv(x))
        return nn.functional.max_pool3d(x, 2) if self.pool else x


class Cnn3d(nn.Module):
    """mnddp's cnn3d: the CosmoFlow layout (src/model/cnn3d.cpp), linear output."""

    def __init__(self, shape, hidden, layers, outputs, dropout):
        super().__init__()
        channels, sides = shape[0], list(shape[1:])
        self.conv_seq = nn.ModuleList()
        for i in range(layers):
            out = min(hidden << min(i, 10), 1024)
            pool = all(side >= 2 for side in sides)
            self.conv_seq.append(CosmoFlowBlock(channels, out, pool))
            sides = [side // 2 for side in sides] if pool else sides
            channels = out
        self.dense1 = nn.Linear(channels * int(np.prod(sides)), 128)
        self.dense2 = nn.Linear(128, 64)
        self.output = nn.Linear(64, outputs)
        self.dr1, self.dr2 = nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, x):
        x = x.unsqueeze(1) if x.dim() == 4 else x
        for block in self.conv_seq:
            x = block(x)
        x = x.permute(0, 2, 3, 4, 1).flatten(1)
        x = self.dr1(nn.functional.leaky_relu(self.dense1(x), 0.3))
        x = self.dr2(nn.functional.leaky_relu(self.dense2(x), 0.3))
        return self.output(x)


class GptBlock(nn.Module):
    """nanoGPT's Block: its parameter names (attn.c_attn, mlp.c_fc, ...)."""

    def __init__(self, d, heads, dropout):
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.Module()
        self.attn.c_attn, self.attn.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Module()
        self.mlp.c_fc, self.mlp.c_proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.dropout = dropout

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.attn.c_attn(self.ln_1(x)).split(d, 2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.attn.c_proj(y.transpose(1, 2).contiguous().view(b, t, d))
        return x + self.mlp.c_proj(nn.functional.gelu(self.mlp.c_fc(self.ln_2(x))))


class Gpt(nn.Module):
    """mnddp's gpt in nanoGPT's layout; with tied embeddings lm_head shares transformer.wte."""

    def __init__(self, vocab, context, d, layers, heads, dropout, tied):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, d), wpe=nn.Embedding(context, d), drop=nn.Dropout(dropout),
            h=nn.ModuleList([GptBlock(d, heads, dropout) for _ in range(layers)]), ln_f=nn.LayerNorm(d)))
        self.tied = tied
        if not tied:
            self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, tokens):
        t = self.transformer
        x = t.drop(t.wte(tokens) + t.wpe(torch.arange(tokens.size(1), device=tokens.device)))
        for block in t.h:
            x = block(x)
        x = t.ln_f(x)
        return nn.functional.linear(x, t.wte.weight) if self.tied else self.lm_head(x)


def torchscript(path):
    """The user's own scripted module: the file the run trained (--model torchscript:PATH)."""
    return torch.jit.load(path, map_location="cpu")


class ImageInput(nn.Module):
    """[N, H, W] images get one channel, as in mnddp."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        return self.net(x.unsqueeze(1) if x.dim() == 3 else x)

    def load_state_dict(self, state, strict=True):
        return self.net.load_state_dict(state, strict=strict)


def outputs(config, state):
    """The model's output width: classes, or regression targets (from the head's shape)."""
    if config.get("task", "classification") == "regression":
        last = [v for k, v in state.items() if k.endswith("weight") and v.dim() == 2][-1]
        return last.shape[0]
    return int(config["num-classes"])


def build_model(config, sample_shape, state):
    name = config["model"]
    hidden, layers = int(config["hidden"]), int(config["layers"])
    classes, dropout = outputs(config, state), float(config["dropout"])
    if name.startswith("torchscript:"):
        return torchscript(name[len("torchscript:"):])
    if name == "gpt":
        vocab, d = state["transformer.wte.weight"].shape
        return Gpt(vocab, state["transformer.wpe.weight"].shape[0], d, layers, int(config["heads"]), dropout,
                   config.get("tie-embeddings", "true") == "true")
    if name == "cnn3d":
        shape = list(sample_shape)
        return Cnn3d([1] + shape if len(shape) == 3 else shape, hidden, layers, classes, dropout)
    if name == "mlp":
        return Mlp(int(np.prod(sample_shape)), hidden, layers, classes, dropout)
    if name == "convnet":
        shape = list(sample_shape)
        if len(shape) == 2:
            shape = [1] + shape
        return ConvNet(shape, hidden, layers, classes, dropout)
    if name in ("resnet18", "resnet34", "resnet50"):
        shape = list(sample_shape)
        if len(shape) == 2:
            shape = [1] + shape
        return ImageInput(resnet(name, shape, classes, config.get("stem", "auto")))
    if name == "vit":
        shape = list(sample_shape)
        if len(shape) == 2:
            shape = [1] + shape
        return ImageInput(vit(shape, hidden, layers, int(config["heads"]), int(config["patch-size"]), classes,
                              dropout))
    raise ValueError(f"unknown model '{name}' in the checkpoint's config")


CHECKSUM_BLOCK_BYTES = 1 << 20


def array_checksum(data):
    """The checksum mnddp stores as `xxh3_64` (format 2): XXH3-64 of the XXH3-64 hashes of the
    array's 1 MiB blocks, as little-endian uint64s (docs/CHECKPOINT_FORMAT.md)."""
    import xxhash  # pip install xxhash

    view = memoryview(data)
    hashes = b"".join(struct.pack("<Q", xxhash.xxh3_64_intdigest(view[i:i + CHECKSUM_BLOCK_BYTES]))
                      for i in range(0, len(view), CHECKSUM_BLOCK_BYTES))
    return xxhash.xxh3_64_intdigest(hashes)


def verify_dataset(dataset):
    """True when a checkpoint array's bytes (C order) match its stored checksum."""
    data = np.ascontiguousarray(dataset[()]).tobytes()
    if "xxh3_64" in dataset.attrs:
        return array_checksum(data) == int(dataset.attrs["xxh3_64"])
    return zlib.crc32(data) == int(dataset.attrs["crc32"])  # format 1


def verify_checkpoint(path):
    """(format_version, checksum name, arrays checked, names of the corrupt ones) of a checkpoint."""
    with h5py.File(path, "r") as f:
        arrays = []
        f.visititems(lambda name, obj: arrays.append(obj) if isinstance(obj, h5py.Dataset) else None)
        version = f.attrs["format_version"]
        version = version.decode() if isinstance(version, bytes) else str(version)
        kinds = {"xxh3_64" if "xxh3_64" in a.attrs else "crc32" if "crc32" in a.attrs else "none" for a in arrays}
        bad = [a.name for a in arrays if not ("xxh3_64" in a.attrs or "crc32" in a.attrs) or not verify_dataset(a)]
        return version, "+".join(sorted(kinds)), len(arrays), bad


def read_state(path):
    """(state_dict, config dict, sample shape) from an HDF5 checkpoint or an `mnddp export` file."""
    if h5py.is_hdf5(path):
        with h5py.File(path, "r") as f:
            state = {}
            for group in ("model", "buffers"):
                if group in f:
                    for name, dataset in f[group].items():
                        if not verify_dataset(dataset):
                            raise ValueError(f"checkpoint '{path}': array '{group}/{name}' is corrupt (checksum mismatch)")
                        state[name] = torch.from_numpy(np.array(dataset[()]))
            config = parse_config(f.attrs["config"].decode() if isinstance(f.attrs["config"], bytes) else f.attrs["config"])
            shape_text = f.attrs["sample_shape"]
    else:
        # `mnddp export` writes with torch::pickle_save, whose dicts carry a type tag that
        # torch.load's weights-only unpickler must be told is safe.
        with torch.serialization.safe_globals([torch.jit._pickle.restore_type_tag]):
            exported = torch.load(path)
        state, config, shape_text = exported["state_dict"], parse_config(exported["config"]), exported["sample_shape"]
    if isinstance(shape_text, bytes):
        shape_text = shape_text.decode()
    return state, config, [int(d) for d in str(shape_text).split(",")]


def load_checkpoint(path):
    state, config, shape = read_state(path)
    model = build_model(config, shape, state)
    model.load_state_dict(state, strict=True)
    return model, config


def evaluate(model, config, pattern):
    """The task's validation metrics over every sample of the shards matching `pattern`, as mnddp
    computes them: {"loss", "accuracy"} (classification: argmax, exact), {"loss", "mse"}
    (regression) or {"loss", "perplexity"} (lm, over the context's next tokens), and the samples."""
    task = config.get("task", "classification")
    x_name, y_name = config.get("x-name", "x"), config.get("y-name", "y")
    loss_sum = correct = values = total = 0.0
    model.eval()
    with torch.no_grad():
        for path in sorted(glob.glob(pattern)):
            with h5py.File(path, "r") as f:
                x_all = f[x_name][...]
                y_all = f[y_name][...] if task != "lm" else None
            for start in range(0, len(x_all), 256):
                x = torch.from_numpy(x_all[start:start + 256])
                if task == "lm":
                    context = int(config.get("context", "0")) or x.shape[1] - 1
                    x = x.to(torch.int64)
                    out = model(x[:, :context])
                    target = x[:, 1:context + 1]
                    loss_sum += float(nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1),
                                                                  reduction="sum"))
                    values += target.numel()
                else:
                    scale = 255.0 if x.dtype == torch.uint8 and config.get("scale-uint8", "true") == "true" else 1.0
                    out = model(x.to(torch.float32) / scale)
                    y = torch.from_numpy(y_all[start:start + 256])
                    if task == "regression":
                        y = y.to(torch.float32).reshape(out.shape)
                        if config.get("loss", "mse") == "huber":
                            loss_sum += float(nn.functional.huber_loss(out, y, reduction="sum",
                                                                       delta=float(config["huber-delta"])))
                        else:
                            loss_sum += float(nn.functional.mse_loss(out, y, reduction="sum"))
                        values += y.numel()
                    else:
                        y = y.to(torch.int64)
                        loss_sum += float(nn.functional.cross_entropy(out, y, reduction="sum",
                                                                      label_smoothing=float(
                                                                          config.get("label-smoothing", "0"))))
                        correct += int((out.argmax(1) == y).sum())
                        values += len(y)
                total += len(x)
    metrics = {"loss": loss_sum / values}
    if task == "classification":
        metrics["accuracy"] = correct / total
    elif task == "lm":
        metrics["perplexity"] = float(np.exp(metrics["loss"]))
    else:
        metrics["mse"] = metrics["loss"] if config.get("loss", "mse") == "mse" else None
    return metrics, int(total)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint", help="step-N.h5 checkpoint, or a file written by `mnddp export`")
    parser.add_argument("--data", help="HDF5 shards (glob) to evaluate on")
    parser.add_argument("--verify", action="store_true", help="only verify every array's checksum")
    args = parser.parse_args()
    if args.verify:
        version, kind, count, bad = verify_checkpoint(args.checkpoint)
        if bad:
            print(f"{args.checkpoint}: {len(bad)} of {count} arrays corrupt: {', '.join(bad)}")
            return 1
        print(f"{args.checkpoint}: format {version}, {count} arrays verified ({kind})")
        return 0
    model, config = load_checkpoint(args.checkpoint)
    print(f"loaded {config['model']} with {sum(p.numel() for p in model.parameters())} parameters")
    if args.data:
        metrics, total = evaluate(model, config, args.data)
        for name, value in metrics.items():
            if value is not None:
                print(f"{name}: {value:.4f}" if name == "accuracy" else f"{name}: {value:.8g}")
        print(f"({total} samples)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
