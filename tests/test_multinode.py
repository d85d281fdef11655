"""helpers.multinode: torchrun agents as nodes on 127.0.0.1, bounded, and what their workers report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest
import torch

from helpers import ddp, multinode
from helpers.multinode.agents import _agent_environment
from helpers.processes import kill_tree, live_children

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.timeout(400)  # torchrun agents and their workers: a minute each on a busy machine

# A stand-in "agent": starts a "worker" in a session of its own (as torchrun does), writes its pid,
# then lives for `agent_seconds`; the worker sleeps a minute.
AGENT = textwrap.dedent(
    """
    import subprocess, sys, time
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    print(worker.pid, flush=True)
    time.sleep(float(sys.argv[1]))
    """
)


def _worker_pid(agent: multinode.Agent) -> int:
    multinode.wait_for(lambda: agent.output.strip(), timeout=30)
    return int(agent.output.split()[0])


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_past_the_deadline_agents_die_with_workers_in_their_own_sessions(tmp_path):
    with pytest.raises(TimeoutError, match="still ran after 3 s"):
        with multinode.torchrun_agents([[sys.executable, "-c", AGENT, "60"]], tmp_path, timeout=3) as agents:
            worker = _worker_pid(agents[0])
    assert agents[0].timed_out and _gone(agents[0].pid) and _gone(worker)
    assert not live_children()


def test_a_worker_that_outlives_its_agent_is_killed_when_the_block_ends(tmp_path):
    with multinode.torchrun_agents([[sys.executable, "-c", AGENT, "1"]], tmp_path, timeout=30) as agents:
        worker = _worker_pid(agents[0])
    assert agents[0].returncode == 0 and not agents[0].timed_out
    assert _gone(worker)  # orphaned when its agent exited; remembered and killed


def test_an_error_in_the_block_kills_everything_at_once(tmp_path):
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="oops"):
        with multinode.torchrun_agents([[sys.executable, "-c", AGENT, "60"]], tmp_path, timeout=60) as agents:
            worker = _worker_pid(agents[0])
            raise RuntimeError("oops")
    assert time.monotonic() - start < 30 and _gone(agents[0].pid) and _gone(worker)


def test_kill_node_kills_the_agent_and_its_workers_with_sigkill(tmp_path):
    with multinode.torchrun_agents([[sys.executable, "-c", AGENT, "60"]], tmp_path, timeout=60) as agents:
        worker = _worker_pid(agents[0])
        killed = multinode.kill_node(agents[0])
    assert agents[0].pid in killed and worker in killed
    assert agents[0].returncode == -9 and _gone(worker)


def test_store_host_is_the_agent_listening_on_the_port(tmp_path):
    port = ddp.free_port()
    listen = f"import socket, time; s = socket.create_server(('127.0.0.1', {port})); print('up', flush=True)"
    listen += "; time.sleep(60)"
    quiet = "import time; time.sleep(60)"
    commands = [[sys.executable, "-c", quiet], [sys.executable, "-c", listen]]
    with multinode.torchrun_agents(commands, tmp_path, timeout=60) as agents:
        multinode.wait_for(lambda: "up" in agents[1].output, timeout=30)
        assert multinode.store_host(agents, port) is agents[1]
        assert multinode.store_host(agents, ddp.free_port()) is None
        for agent in agents:
            multinode.kill_node(agent)


def test_reports_and_error_files_are_read_back(tmp_path):
    for rank, started in ((1, 2.0), (0, 1.0), (1, 3.0)):
        report = {"RANK": str(rank), "WORLD_SIZE": "2", "TORCHELASTIC_RUN_ID": "007", "started": started}
        (tmp_path / f"rank{rank}-pid{int(started)}.json").write_text(json.dumps(report))
    reports = multinode.read_reports(tmp_path)
    assert [(r["RANK"], r["started"]) for r in reports] == [(0, 1.0), (1, 2.0), (1, 3.0)]
    assert reports[0]["TORCHELASTIC_RUN_ID"] == "007"  # an id stays a string
    table = multinode.format_reports(reports, ["RANK", "WORLD_SIZE"]).splitlines()
    assert table == ["RANK  WORLD_SIZE", "   0           2", "   1           2", "   1           2"]
    error = tmp_path / "logs" / "job_x" / "attempt_0" / "1" / "error.json"
    error.parent.mkdir(parents=True)
    message = {
        "message": "RuntimeError: boom",
        "extraInfo": {"py_callstack": "Traceback ...", "timestamp": "0"},
    }
    error.write_text(json.dumps({"message": message}))
    assert multinode.error_reports(tmp_path / "logs") == [
        {
            "path": "job_x/attempt_0/1/error.json",
            "message": "RuntimeError: boom",
            "traceback": "Traceback ...",
        }
    ]


# A restarted job (a worker killed, then a worker raising with no restart left) is notebook 09's own
# check: its cells assert the restarted weights equal mp.spawn's and read the raised fault's error
# files; here the job without a fault, against one process training on the two ranks' batches.
def test_two_agents_form_one_world_and_train_like_one_process(tmp_path):
    (tmp_path / "reports").mkdir()
    entry = ["-m", "helpers.multinode", "--report-dir", str(tmp_path / "reports")]
    entry += ["--snapshot", str(tmp_path / "two.pt")]
    node = multinode.agent_command(entry, port=ddp.free_port(), run_id="two", log_dir=str(tmp_path / "logs"))
    with multinode.torchrun_agents([node, node], tmp_path, timeout=240) as agents:
        pass
    reports = multinode.read_reports(tmp_path / "reports")
    assert [a.returncode for a in agents] == [0, 0], agents[0].output[-3000:]
    assert sorted((r["RANK"], r["GROUP_RANK"], r["LOCAL_RANK"]) for r in reports) == [(0, 0, 0), (1, 1, 0)]
    assert {(r["WORLD_SIZE"], r["MASTER_ADDR"]) for r in reports} == {(2, "127.0.0.1")}
    assert {r["agent_pid"] for r in reports} == {a.pid for a in agents} and all(
        "finished" in r for r in reports
    )
    reference = ddp.train_single(batch_size=2 * ddp.BATCH_SIZE)
    weights = torch.load(tmp_path / "two.pt", weights_only=True)["model"]
    assert ddp.max_param_difference(weights, reference) < 1e-5
    assert len(list((tmp_path / "logs").glob("two_*"))) == 2  # --log-dir: one folder per agent, none in /tmp


def test_the_elastic_script_grows_a_job_from_one_node_to_two():
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "scripts" / "elastic_membership.py"), "--timeout", "240"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        output, _ = process.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        kill_tree(process.pid)
        process.communicate()
        raise
    assert process.returncode == 0, output[-3000:]
    assert "worlds, in start order: [1," in output and output.rstrip().endswith("2, 2]")


def test_agent_environment_binds_gloo_to_loopback_and_keeps_stores_per_round():
    env = _agent_environment(FAULT_KIND="kill")
    assert env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1" and env["FAULT_KIND"] == "kill"
    assert env.get("GLOO_SOCKET_IFNAME", os.environ.get("GLOO_SOCKET_IFNAME")) in {"lo", "lo0", None}
