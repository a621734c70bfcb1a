"""The models the experiments (and examples/train_volumes.py) train.

VolumeNet is a small 3D CNN that learns the seed task in an epoch or two, and ImageCNN its 2D
counterpart for the image workload; the shuffle and batch studies train them, since they compare
loaders and orders rather than models.

ResNet3D is the published DeepIQ model: a 3D ResNet-18 backbone (a 7x7x7 stem convolution with
stride 2, batch norm and 3x3x3 max pooling, then four stages of two basic blocks with 3x3x3
convolutions, widths w, 2w, 4w, 8w) pooled to one vector of 8w features, and a dense layer giving
one logit. As in Keras, where it was built, every convolution has a bias, and the projection
shortcuts (1x1x1 convolutions where a stage changes width and stride) have no batch norm. At w = 64
and 10 input channels it has the published summary's counts exactly: 33,361,089 trainable
parameters, 33,368,897 with batch norm's running statistics (Keras's "Total params").
"""

from __future__ import annotations

from typing import Dict, Sequence

import torch
import torch.nn as nn

PUBLISHED_WIDTH = 64


class BasicBlock3D(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv3d(cin, cout, 3, stride, 1)
        self.bn1 = nn.BatchNorm3d(cout)
        self.conv2 = nn.Conv3d(cout, cout, 3, 1, 1)
        self.bn2 = nn.BatchNorm3d(cout)
        self.shortcut = nn.Conv3d(cin, cout, 1, stride) if stride != 1 or cin != cout else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + (x if self.shortcut is None else self.shortcut(x)))


class ResNet3D(nn.Module):
    """Binary classifier of [batch, channels, X, Y, Z] volumes; forward gives [batch] logits."""

    def __init__(self, in_channels: int, width: int = PUBLISHED_WIDTH, blocks: Sequence[int] = (2, 2, 2, 2)) -> None:
        super().__init__()
        if width < 1:
            raise ValueError(f"ResNet3D: width must be >= 1, got {width}")
        self.stem = nn.Sequential(nn.Conv3d(in_channels, width, 7, 2, 3), nn.BatchNorm3d(width), nn.ReLU(inplace=True),
                                  nn.MaxPool3d(3, 2, 1))
        layers = []
        cin = width
        for stage, n in enumerate(blocks):
            cout = width << stage
            for i in range(n):
                layers.append(BasicBlock3D(cin, cout, 2 if i == 0 and stage > 0 else 1))
                cin = cout
        self.stages = nn.Sequential(*layers)
        self.head = nn.Linear(cin, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stages(self.stem(x))
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool3d(x, 1), 1)).squeeze(1)


def parameter_counts(model: nn.Module) -> Dict[str, int]:
    """{"trainable", "total"}: total also counts batch norm's running mean and variance, as Keras's
    model summary does ("Total params")."""
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    frozen = sum(p.numel() for p in model.parameters() if not p.requires_grad)
    running = sum(b.numel() for name, b in model.named_buffers()
                  if name.endswith(("running_mean", "running_var")))
    return {"trainable": trainable, "total": trainable + frozen + running}


class VolumeNet(nn.Module):
    """Two 3D convolutions, global max pooling and a linear head giving one logit.

    The input channel count comes from the data. Volumes of at least 8 voxels along every spatial
    axis use unpadded convolutions (cheaper); smaller ones are padded so that any shape works.
    """

    def __init__(self, in_channels: int, spatial: Sequence[int], width: int = 16) -> None:
        super().__init__()
        pad = 0 if min(spatial) >= 8 else 1
        self.features = nn.Sequential(
            nn.Conv3d(in_channels, width, 3, padding=pad), nn.ReLU(inplace=True), nn.MaxPool3d(2, ceil_mode=True),
            nn.Conv3d(width, 2 * width, 3, padding=pad), nn.ReLU(inplace=True), nn.AdaptiveMaxPool3d(1),
        )
        self.head = nn.Linear(2 * width, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1)).squeeze(1)


class ImageCNN(nn.Module):
    """VolumeNet in 2D, for [batch, channels, H, W] images: a strided 3x3 convolution, max pooling,
    a second 3x3 convolution, global max pooling and a linear head giving one logit."""

    def __init__(self, in_channels: int = 3, width: int = 16) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, width, 3, stride=2, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2, ceil_mode=True),
            nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(inplace=True), nn.AdaptiveMaxPool2d(1),
        )
        self.head = nn.Linear(2 * width, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1)).squeeze(1)
