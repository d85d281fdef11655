"""Hogwild: processes train one model in shared memory, each with its own optimizer and no lock.
Run: python 05_hogwild.py [spawn|fork|forkserver]   (default: spawn)"""

import sys

import torch


def train(rank, model, x, y, steps, seed=0):
    torch.set_num_threads(1)  # first, before any torch op: no oversubscription, fork-safe
    torch.manual_seed(seed + rank)  # each worker draws its own batches
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)  # its own, built in the worker
    for batch in torch.randint(len(x), (steps, 32)):
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x[batch]), y[batch]).backward()
        optimizer.step()  # writes straight into the shared parameters, no lock


if __name__ == "__main__":
    method = sys.argv[1] if len(sys.argv) > 1 else "spawn"
    x = torch.randn(1024, 8)
    y = x @ torch.randn(8, 1)  # a random linear-regression problem: the loss can reach 0
    model = torch.nn.Linear(8, 1).share_memory()  # parameters in shared memory: one copy for all
    ctx = torch.multiprocessing.get_context(method)
    workers = [ctx.Process(target=train, args=(r, model, x, y, 200), daemon=True) for r in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=100)
        if w.exitcode is None:  # still running after its deadline: stop it, then reap it
            w.terminate()
            w.join(timeout=5)
    loss = torch.nn.functional.mse_loss(model(x), y).item()  # the parent's model, trained in place
    print(f"{method}: 2 Hogwild workers, exit codes {[w.exitcode for w in workers]}, loss now {loss:.6f}")
    sys.exit(0 if [w.exitcode for w in workers] == [0, 0] and loss < 1e-3 else 1)
