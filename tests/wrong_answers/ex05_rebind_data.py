"""Wrong: a hand-written SGD step that rebinds p.data to a new tensor: the shared storage never changes."""

import torch
import torch.nn.functional as F

from helpers.checkers import regression_batch


def hogwild_worker(rank: int, model: torch.nn.Module, seed: int, steps: int, lr: float = 0.05) -> list[float]:
    torch.manual_seed(seed + rank)
    losses = []
    for _ in range(steps):
        x, y = regression_batch()
        loss = F.mse_loss(model(x), y)
        model.zero_grad()
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                p.data = p.data - lr * p.grad  # the mistake: new storage, private to this process
        losses.append(loss.item())
    return losses
