"""Load an mnddp checkpoint into an equivalent PyTorch nn.Module, with h5py only (no mnddp needed).

    from load_checkpoint import load_checkpoint
    model, config = load_checkpoint("ckpt/step-00000384.h5")     # or an `mnddp export` file
    model.eval(); logits = model(x)

Command line: evaluate a checkpoint on HDF5 shards and print the accuracy:
    python data_tools/load_checkpoint.py ckpt/step-00000384.h5 --data 'data/demo/val_*.h5'
The module layouts mirror src/model/ (ResNets are torchvision's own, which needs torchvision), so
parameter names match the checkpoint's.
"""
import argparse
import configparser
import glob
import sys

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


class ImageInput(nn.Module):
    """[N, H, W] images get one channel, as in mnddp."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        return self.net(x.unsqueeze(1) if x.dim() == 3 else x)

    def load_state_dict(self, state, strict=True):
        return self.net.load_state_dict(state, strict=strict)


def build_model(config, sample_shape):
    name = config["model"]
    hidden, layers = int(config["hidden"]), int(config["layers"])
    classes, dropout = int(config["num-classes"]), float(config["dropout"])
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
    raise ValueError(f"unknown model '{name}' in the checkpoint's config")


def read_state(path):
    """(state_dict, config dict, sample shape) from an HDF5 checkpoint or an `mnddp export` file."""
    if h5py.is_hdf5(path):
        with h5py.File(path, "r") as f:
            state = {}
            for group in ("model", "buffers"):
                if group in f:
                    for name, dataset in f[group].items():
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
    model = build_model(config, shape)
    model.load_state_dict(state, strict=True)
    return model, config


def evaluate(model, pattern, x_name="x", y_name="y"):
    """Accuracy over every sample of the shards matching `pattern`, exactly as mnddp counts it."""
    correct = total = 0
    model.eval()
    with torch.no_grad():
        for path in sorted(glob.glob(pattern)):
            with h5py.File(path, "r") as f:
                x = torch.from_numpy(f[x_name][...].astype(np.float32))
                y = torch.from_numpy(f[y_name][...].astype(np.int64))
            for start in range(0, len(x), 256):
                correct += int((model(x[start:start + 256]).argmax(1) == y[start:start + 256]).sum())
            total += len(x)
    return correct / total, total


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint", help="step-N.h5 checkpoint, or a file written by `mnddp export`")
    parser.add_argument("--data", help="HDF5 shards (glob) to evaluate on")
    args = parser.parse_args()
    model, config = load_checkpoint(args.checkpoint)
    print(f"loaded {config['model']} with {sum(p.numel() for p in model.parameters())} parameters")
    if args.data:
        accuracy, total = evaluate(model, args.data, config.get("x-name", "x"), config.get("y-name", "y"))
        print(f"accuracy: {accuracy:.4f} ({total} samples)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
