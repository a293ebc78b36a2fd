"""A small regression trained and logged as torch.utils.tensorboard's users log one: scalars (a
number, a 0-d tensor, several series of one chart, given wall times, NaN), histograms of the
weights, images in several layouts, text, a graph, and the hparams with the final loss.

Usage: tensorboard_training.py LOG_DIR
"""

import sys

import numpy as np
import torch
from torch.utils.tensorboard import SummaryWriter

torch.manual_seed(0)
rng = np.random.default_rng(0)
inputs = torch.randn(64, 4)
targets = inputs.sum(dim=1, keepdim=True) + 0.1 * torch.randn(64, 1)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)

writer = SummaryWriter(sys.argv[1])
writer.add_graph(model, inputs)
for epoch in range(30):
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(inputs), targets)
    loss.backward()
    optimizer.step()
    writer.add_scalar("Loss/train", loss.item(), epoch)
    writer.add_scalar("Loss/train_tensor", loss.detach(), epoch)
    writer.add_scalars("Error", {"train": loss.item(), "val": 1.1 * loss.item()}, epoch)
    writer.add_scalar("lr", optimizer.param_groups[0]["lr"], epoch, walltime=1_700_000_000.0 + 2 * epoch)
    if epoch % 10 == 0:
        writer.add_histogram("linear/weight", model.weight, epoch)
        writer.add_histogram("linear/bias", model.bias.detach().numpy(), epoch)
        writer.add_image("chw", torch.rand(3, 8, 10), epoch)
        writer.add_image("hwc", rng.random((6, 5, 3)), epoch, dataformats="HWC")
        writer.add_image("hw", rng.random((7, 4)) * 1.5, epoch, dataformats="HW")  # clipped above 1
        writer.add_images("batch", torch.rand(10, 1, 4, 4), epoch)
        writer.add_text("notes", f"epoch {epoch}: **loss** {loss.item():.4f}", epoch)
writer.add_scalar("odd", float("nan"), 0)
writer.add_scalar("odd", float("inf"), 1)
writer.add_hparams({"lr": 0.05, "optimizer": "sgd", "layers": 1}, {"hparam/final_loss": loss.item()})
writer.close()
