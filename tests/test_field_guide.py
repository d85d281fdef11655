"""helpers.field_guide beyond its doctests: what notebook 10 section 2 teaches about Join, and the
cgroup v1 branches of the OOM demo (appendix G) that this machine may not have."""

from __future__ import annotations

import faulthandler
import re
import shutil
import sys
from pathlib import Path

import pytest
import torch.multiprocessing as mp

from helpers import field_guide
from helpers.ddp import free_port
from helpers.launch import spawn_with_deadline

needs_fork = pytest.mark.skipif(
    sys.platform != "linux" or "fork" not in mp.get_all_start_methods(), reason="the ranks are forked"
)


@pytest.fixture(scope="module")
def ddp_imported():
    """Forked ranks inherit torch._dynamo, which DDP's constructor imports (seconds per rank)."""
    field_guide.preload_ddp()


@needs_fork
def test_join_adds_zeros_for_the_rank_that_is_done(capfd, ddp_imported):
    spawn_with_deadline(
        field_guide.train_uneven, args=(2, free_port(), [1, 3], True, 30), nprocs=2, method="fork"
    )
    printed = capfd.readouterr().out
    assert "rank 0: bias gradients [8.0]," in printed, printed
    assert "rank 1: bias gradients [8.0, 4.0, 4.0]," in printed, printed  # (8 + 0) / 2
    assert len(set(re.findall(r"weights (-?\d+\.\d+)", printed))) == 1, printed  # the same weights


@needs_fork
def test_a_metric_all_reduced_inside_join_fails(ddp_imported):
    # gloo may abort a rank (SIGABRT): pytest's faulthandler, inherited through fork, would print
    # "Fatal Python error: Aborted" and a stack into a green log
    faulthandler.disable()
    try:
        with pytest.raises((mp.ProcessRaisedException, mp.ProcessExitedException)):
            spawn_with_deadline(field_guide.metric_in_join, args=(2, free_port(), 3), nprocs=2, method="fork")
    finally:
        faulthandler.enable()


def _fake_v1(tmp_path: Path, monkeypatch, memsw: bool, swap: bool) -> None:
    """A cgroup v1 hierarchy in ``tmp_path``: a new folder comes with its control files, and
    removing it removes them (as the kernel does)."""
    monkeypatch.setattr(field_guide, "_memory_cgroup_root", lambda: (tmp_path, 1))
    monkeypatch.setattr(field_guide, "_swap_in_use", lambda: swap)
    real_mkdir, real_rmdir = Path.mkdir, Path.rmdir

    def mkdir(self, *args, **kwargs):
        real_mkdir(self, *args, **kwargs)
        if self.parent == tmp_path:
            (self / "memory.limit_in_bytes").write_text("max")
            if memsw:
                (self / "memory.memsw.limit_in_bytes").write_text("max")

    def rmdir(self):
        if self.parent == tmp_path:
            shutil.rmtree(self)
        else:
            real_rmdir(self)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    monkeypatch.setattr(Path, "rmdir", rmdir)


def test_cgroup_v1_limits_memory_and_swap(tmp_path, monkeypatch):
    _fake_v1(tmp_path, monkeypatch, memsw=True, swap=True)
    with field_guide.memory_cgroup(64 << 20) as folder:
        assert (folder / "memory.limit_in_bytes").read_text() == str(64 << 20)
        assert (folder / "memory.memsw.limit_in_bytes").read_text() == str(64 << 20)  # no swapping
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("swap", [True, False])
def test_cgroup_v1_without_swap_accounting(tmp_path, monkeypatch, swap):
    _fake_v1(tmp_path, monkeypatch, memsw=False, swap=swap)
    with field_guide.memory_cgroup(64 << 20) as folder:
        # with swap on, the limit would be met by swapping, not by the OOM killer: the stand-in
        assert (folder is None) == swap
    assert list(tmp_path.iterdir()) == []
