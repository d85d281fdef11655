"""Wrong: every worker uses the same seed, so they all draw the same batches."""

import torch
import torch.nn.functional as F

from helpers.checkers import regression_batch


def hogwild_worker(rank: int, model: torch.nn.Module, seed: int, steps: int, lr: float = 0.05) -> list[float]:
    torch.manual_seed(seed)  # the mistake: not seed + rank
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        x, y = regression_batch()
        loss = F.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses
