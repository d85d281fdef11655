"""The Slurm batch script of notebook 09, run for real under the local srun/scontrol stand-ins."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
import torch

from helpers import cluster, ddp, multinode
from helpers.processes import live_children


def test_the_script_asks_slurm_for_nodes_gpus_and_one_agent_per_node():
    script = cluster.slurm_script(4, 8, ["-m", "helpers.ddp", "--snapshot", "/shared/a b.pt"], port=29511)
    assert "#SBATCH --nodes=4" in script and "#SBATCH --gpus-per-node=8" in script
    assert "#SBATCH --ntasks-per-node=1" in script and "export NPROC_PER_NODE=8" in script
    assert 'RDZV_ENDPOINT="$head_node:29511"' in script and '--rdzv-id="$SLURM_JOB_ID"' in script
    # srun does not inherit the batch's --cpus-per-task since Slurm 22.05: it is passed again
    assert "#SBATCH --cpus-per-task=8" in script and 'srun --cpus-per-task="$SLURM_CPUS_PER_TASK"' in script
    assert script.rstrip().endswith("-m helpers.ddp --snapshot '/shared/a b.pt'")
    cpu = cluster.slurm_script(2, 0, ["train.py"])
    assert "--gpus-per-node" not in cpu and "export NPROC_PER_NODE=1" in cpu
    with pytest.raises(ValueError, match="nodes >= 1"):
        cluster.slurm_script(0, 1, ["train.py"])


def test_the_batch_script_trains_on_two_stand_in_nodes(tmp_path):
    reports, snapshot = tmp_path / "reports", tmp_path / "digits.pt"
    reports.mkdir()
    entry = ["-m", "helpers.multinode", "--report-dir", str(reports), "--snapshot", str(snapshot)]
    job = tmp_path / "job.sh"
    job.write_text(cluster.slurm_script(2, 0, entry, port=ddp.free_port(), max_restarts=0))
    done = cluster._run_batch_locally(job, nodes=2, workdir=tmp_path, timeout=240, job_id=4242)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "job 4242: 2 node(s) x 1 worker(s), world 2, rendezvous at 127.0.0.1:" in done.stdout
    found = multinode.read_reports(reports)
    assert sorted(r["RANK"] for r in found) == [0, 1] and sorted(r["GROUP_RANK"] for r in found) == [0, 1]
    for r in found:  # the rank arithmetic torchrun did for the script: RANK = node * per node + local
        assert r["RANK"] == r["GROUP_RANK"] * r["LOCAL_WORLD_SIZE"] + r["LOCAL_RANK"]
        assert (r["WORLD_SIZE"], r["TORCHELASTIC_RUN_ID"]) == (2, "4242") and "finished" in r
    assert torch.load(snapshot, weights_only=True)["epoch"] == ddp.EPOCHS - 1
    assert len(list((tmp_path / "torchrun-logs" / "4242").iterdir())) == 2  # one log folder per agent
    assert not live_children()


def test_the_cpus_per_task_of_the_batch_reach_each_task(tmp_path):
    job = tmp_path / "job.sh"
    job.write_text(
        "#SBATCH --cpus-per-task=3\n"
        'srun --cpus-per-task="$SLURM_CPUS_PER_TASK" bash -c \'echo "$SLURM_NODEID: $SLURM_CPUS_PER_TASK"\'\n'
    )
    done = cluster._run_batch_locally(job, nodes=2, workdir=tmp_path, timeout=60)
    assert done.returncode == 0 and sorted(done.stdout.split("\n")[:2]) == ["0: 3", "1: 3"], done.stdout


def test_srun_stand_in_stops_the_other_tasks_when_one_fails(tmp_path):
    job = tmp_path / "job.sh"
    job.write_text("srun --kill-on-bad-exit=1 bash -c '[ \"$SLURM_NODEID\" = 1 ] && exit 3; sleep 60'\n")
    start = time.monotonic()
    done = cluster._run_batch_locally(job, nodes=2, workdir=tmp_path, timeout=60)
    assert done.returncode == 3 and time.monotonic() - start < 30
    assert not live_children()


def test_a_batch_script_past_its_deadline_is_killed_with_everything_it_started(tmp_path):
    job = tmp_path / "job.sh"
    job.write_text("srun bash -c 'sleep 60'\n")
    with pytest.raises(subprocess.TimeoutExpired):
        cluster._run_batch_locally(job, nodes=2, workdir=tmp_path, timeout=2)
    assert not live_children()


def test_the_stand_ins_say_they_are_stand_ins():
    for name in ("srun", "scontrol"):
        assert "STAND-IN" in (Path(cluster._SLURM_STANDINS) / name).read_text()
