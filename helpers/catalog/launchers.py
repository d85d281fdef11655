"""Catalog entries: Launchers: mp.spawn, torchrun and the elastic agent, signals, exit codes, debuggers in workers.

Data for :mod:`helpers.catalog` (its docstring says what each field means).
"""

from __future__ import annotations

from helpers.catalog import Entry

ENTRIES: tuple[Entry, ...] = (
    Entry(
        id="dataloader_timed_out",
        message="RuntimeError: DataLoader timed out after 1 seconds",
        cause="a worker took longer than the loader's `timeout` for one batch (a stuck or slow Dataset)",
        fix="",
        teaches="07_dataloader_workers.ipynb#worker-options-persistent-workers-prefetch-factor-pin-memory-timeout",
        case="worker_raised",
    ),
    Entry(
        id="spawn_worker_raised",
        message="-- Process 1 terminated with the following error:",
        cause=(
            "one rank raised; `mp.spawn` shows the first failure it saw, which may be an echo (the line "
            "under `torch.multiprocessing.spawn.ProcessRaisedException:` and a blank line; the rank's "
            "traceback follows)"
        ),
        fix="",
        teaches="06_ddp_mp_spawn.ipynb#when-a-rank-fails",
        case="worker_raised",
    ),
    Entry(
        id="oom_killed",
        message="torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with signal SIGKILL",
        cause="exit code -9: usually the out-of-memory killer",
        fix="",
        teaches="10_field_guide.ipynb#appendix-g-a-worker-killed-by-the-out-of-memory-killer",
        case="oom_killed",
    ),
    Entry(
        id="local_rank_argument",
        message="error: unrecognized arguments: --local-rank=0",
        cause="`torch.distributed.launch` passes `--local-rank`; read `LOCAL_RANK` from the environment",
        fix="",
        teaches="10_field_guide.ipynb#appendix-f-unrecognized-arguments-local-rank-0",
        case="local_rank_argument",
    ),
    Entry(
        id="bdb_quit",
        message="bdb.BdbQuit",
        cause=(
            "`breakpoint()` in a child process: pdb reads `/dev/null` (multiprocessing's stdin for "
            "children), takes end-of-file as quit; debug one process, or `torch.distributed.breakpoint()`"
        ),
        fix="",
        teaches="14_field_guide_launches_and_ranks.ipynb#breakpoint-in-a-worker-bdb-bdbquit",
        case="debugger_in_worker",
    ),
    Entry(
        id="pdb_quit_prompt",
        message="Quitting pdb will kill the process. Quit anyway? [y/n]",
        cause=(
            "`breakpoint()` in a child process on Python 3.14+: pdb reads end-of-file from `/dev/null` as "
            "yes and exits with code 1 (no `BdbQuit`); debug one process, or "
            "`torch.distributed.breakpoint()`"
        ),
        fix="",
        teaches="14_field_guide_launches_and_ranks.ipynb#breakpoint-in-a-worker-bdb-bdbquit",
        case="debugger_in_worker",
    ),
    Entry(
        id="signal_off_main_thread",
        message="ValueError: signal only works in main thread of the main interpreter",
        cause=(
            "`signal.signal` called off the main thread (a launcher started in a thread): launch from the "
            "main thread"
        ),
        fix="",
        teaches="14_field_guide_launches_and_ranks.ipynb#a-launcher-started-off-the-main-thread",
        case="signal_off_main_thread",
    ),
    Entry(
        id="torchelastic_on_child_thread",
        message="Failed to register signal handlers since torchelastic is running on a child thread.",
        cause=(
            "torchelastic (torchrun, `elastic_launch`) started off the main thread: no signal reaches its "
            "workers, which are orphaned when the launcher is stopped"
        ),
        fix="",
        teaches="14_field_guide_launches_and_ranks.ipynb#a-launcher-started-off-the-main-thread",
        case="signal_off_main_thread",
    ),
)
