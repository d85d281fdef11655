"""helpers.collectives in real gloo ranks: every collective demo, DDP by hand and with bucketed hooks
equal to DistributedDataParallel, the bucketing counts, no_sync accumulation, ranks x DataLoader workers.

Each launch of ranks costs seconds on a loaded 2-core machine, so each test is one launch. Most
start their ranks from the forkserver (which has imported torch and torch._dynamo,
conftest.FORKSERVER_PRELOAD; as in test_ddp.py); the DDP equality runs under spawn, as a learner
on macOS or Windows runs it."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.utils.data import DistributedSampler

from helpers import collectives
from helpers.ddp import free_port
from helpers.launch import spawn_with_deadline
from tests.workers import FRESH

pytestmark = pytest.mark.timeout(600)


def _launch(tmp_path, world_size: int, job, *args, method: str = FRESH) -> list:
    """``run_in_group`` in ``world_size`` ranks, bounded; what each rank saved."""
    spawn_with_deadline(
        collectives.run_in_group, args=(world_size, free_port(), str(tmp_path), job, *args),
        nprocs=world_size, method=method, timeout=300,
    )  # fmt: skip
    return [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(world_size)]


def _difference(a: dict, b: dict) -> float:
    return max((a[k] - b[k]).abs().max().item() for k in a)


def test_every_collective_gives_each_rank_what_the_notebook_draws(tmp_path):
    results = _launch(tmp_path, 4, collectives.every_collective)
    assert [r["send_recv"].tolist() for r in results] == [[0, 1, 2]] * 2 + [[0, 0, 0]] * 2
    assert all(r["broadcast"].tolist() == [0, 0] for r in results)
    assert all(
        r["all_reduce_sum"].item() == 10 and r["all_reduce_mean"].tolist() == [2.5, 2.5] for r in results
    )
    assert [r["reduce_scatter"].item() for r in results] == [60, 64, 68, 72]
    assert all(r["all_gather"].tolist() == [0, 1, 2, 3] for r in results)
    assert all(r["async_all_reduce"].tolist() == [6, 1000] for r in results)


def _average(rank: int, world_size: int) -> torch.Tensor:
    """Rank r holds ``[r + 1]`` and chunks ``[r + 1, 10 (r + 1)]``: ``ReduceOp.AVG`` of both."""
    tensor, mine = torch.tensor([rank + 1.0]), torch.zeros(1)
    dist.all_reduce(tensor, op=dist.ReduceOp.AVG)
    dist.reduce_scatter_tensor(mine, torch.tensor([1.0, 10.0]) * (rank + 1), op=dist.ReduceOp.AVG)
    return torch.cat([tensor, mine])


def test_gloo_averages_with_reduce_op_avg(tmp_path):
    # pytorch PR #149781 (2025-03) gave ProcessGroupGloo ReduceOp.AVG; notebook 11 says so, and this
    # fails the day a torch refuses it (before, gloo raised on AVG and the notebook said "gloo has no AVG").
    results = _launch(tmp_path, 2, _average)
    assert [r.tolist() for r in results] == [[1.5, 1.5], [1.5, 15.0]]


def test_hand_made_ddp_and_bucketed_hooks_equal_ddp_under_spawn(tmp_path):
    states = _launch(tmp_path, 2, collectives.hand_made_vs_ddp, method="spawn")
    for way in ("by hand", "hooks"):
        assert _difference(states[0][way], states[0]["DDP"]) < 1e-6
    assert all(_difference(states[0][w], states[1][w]) == 0 for w in states[0])  # the replicas agree
    # and training moved the weights: the equality is not that of untouched models
    untouched = collectives.make_model(seed=0, hidden=collectives.HIDDEN).state_dict()
    assert _difference(states[0]["DDP"], untouched) > 1e-3


def test_bucketing_changes_the_number_of_all_reduces_not_the_bytes(tmp_path):
    figures = _launch(tmp_path, 2, collectives.measure_bucketing, 1)[0]
    parameters = len(list(collectives.make_model(hidden=collectives.HIDDEN).parameters()))
    assert [figures[w]["all-reduces"] for w in collectives.BUCKETING_WAYS] == [parameters, parameters, 1, 1]
    assert len({f["bytes"] for f in figures.values()}) == 1
    assert all(f["ms per step"] > 0 for f in figures.values())


def test_no_sync_all_reduces_once_and_accumulation_equals_one_large_batch(tmp_path):
    results = _launch(tmp_path, 2, collectives.accumulate_vs_large_batch, 4)
    for rank in results:
        assert {way: count for way, (_, count) in rank.items()} == {
            "no_sync": 1, "without no_sync": 4, "one large batch": 1,
        }  # fmt: skip
        large = rank["one large batch"][0]
        assert _difference(rank["no_sync"][0], large) < 1e-6
        assert _difference(rank["without no_sync"][0], large) < 1e-6


@pytest.mark.parametrize("workers", [0, 2])
def test_ranks_times_workers_read_every_sample_once(tmp_path, workers):
    method = "fork" if "fork" in mp.get_all_start_methods() else "spawn"
    read = torch.cat(_launch(tmp_path, 2, collectives.read_one_epoch, 24, workers, method))
    assert sorted(read[:, 0].tolist()) == list(range(24))
    expected = {(w, r) for w in (range(workers) if workers else [-1]) for r in range(2)}
    assert set(map(tuple, read[:, 1:].tolist())) == expected


def test_buckets_hold_at_most_bucket_bytes_in_reverse_parameter_order():
    model = collectives.make_model(hidden=(8, 8))  # Linear 64-8, 8-8, 8-10: weights and biases
    params = list(model.parameters())
    buckets = collectives.BucketedAllReduce(model, bucket_bytes=params[2].nbytes + params[3].nbytes).buckets
    assert [p for bucket in buckets for p in bucket] == params[::-1]
    assert all(
        sum(p.nbytes for p in b) <= params[2].nbytes + params[3].nbytes or len(b) == 1 for b in buckets
    )
    assert len(buckets) > 1


def test_the_hooks_of_section_3_use_two_buckets_so_the_first_overlaps_backward():
    model = collectives.make_model(hidden=collectives.HIDDEN)
    buckets = collectives.BucketedAllReduce(model, bucket_bytes=55_000).buckets  # as hand_made_vs_ddp
    assert len(buckets) == 2 and buckets[0][0] is list(model.parameters())[-1]  # the last layer's first


def test_distributed_sampler_pads_or_drops_when_the_size_does_not_divide():
    # notebook 11 section 5: 10 samples on 4 ranks are not "every sample once"
    def shards(**options):
        return [
            list(DistributedSampler(range(10), num_replicas=4, rank=r, shuffle=False, **options))
            for r in range(4)
        ]

    assert shards() == [[0, 4, 8], [1, 5, 9], [2, 6, 0], [3, 7, 1]]  # 0 and 1 twice
    assert shards(drop_last=True) == [[0, 4], [1, 5], [2, 6], [3, 7]]  # 8 and 9 never
    assert sorted(sum(shards(), [])) != list(range(10))


def test_who_reads_says_main_process_outside_workers():
    assert collectives.WhoReads(5)[4].tolist() == [4, -1] and len(collectives.WhoReads(5)) == 5
