"""What the doctor reports: :class:`Finding`, :class:`DoctorError`, and what each check is about."""

from __future__ import annotations

import dataclasses
import platform
import sys

from helpers.environment import TESTED_PYTHONS, TESTED_TORCH

# Finding, DoctorError and CHECKS are public through helpers.doctor, which re-exports them; finding is
# what the doctor's check modules share.
__all__ = ["finding", "torch_missing"]

STATUSES = ("ok", "warn", "fail", "n/a")
TORCHRUN_DEFAULT_PORT = 29500  # torchrun's --master-port default (static rendezvous)
TORCHRUN_RDZV_PORT = 29400  # torchrun's c10d rendezvous port (--rdzv-endpoint host without a port)
DOCKER_DEFAULT_SHM = 64 * 1024**2  # `docker run` without --shm-size (moby/moby#29492)
DEFAULT_SHM_NEED = 512 * 1024**2
DEFAULT_WORKER_MEM = 1024**3  # a rough figure for one torch worker's memory; --mem-need names the real one


class DoctorError(ValueError):
    """Bad input to the doctor (a malformed or unimportable target, a process that does not exist).

    The message is one line that says what to do; the command line prints it and exits with 2.
    """


@dataclasses.dataclass
class Finding:
    """One check's result: what was measured, whether it is a problem, and what to do about it.

    ``status`` is ``ok``, ``warn`` (works, but a known failure is near), ``fail`` (a launch will
    fail or hang) or ``n/a`` (not measurable from here, e.g. a per-process check run from a fresh
    command line). ``teaches`` links the notebook sections (Markdown, as from ``helpers/``; the report
    prints them with :func:`helpers.section_links.as_plain_text`); ``prevents`` names the upstream issue or doc.

    >>> Finding("open files", "ok", "soft 4096", "...", "...", "", "pytorch#973").status
    'ok'
    """

    name: str
    status: str
    measured: str
    why: str
    fix: str
    teaches: str
    prevents: str

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")


BINDING_VARIABLES = ("OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY")
"""OpenMP settings under which importing torch (its OpenMP runtime, libgomp) binds the process to CPUs."""
CPU_BINDING_WHY = (
    "With OMP_PROC_BIND, OMP_PLACES or GOMP_CPU_AFFINITY set, importing torch (its OpenMP runtime) "
    "binds the process to fewer CPUs (often one), and every process it starts inherits that binding: "
    "DataLoader workers and ranks all share those CPUs, whatever the machine or its container allows."
)
CPU_BINDING_FIX = (
    "Unset OMP_PROC_BIND, OMP_PLACES and GOMP_CPU_AFFINITY for a multiprocess job (or give each "
    "process its own CPUs: taskset, numactl, a launcher that pins ranks); then size the threads per "
    "worker to the usable CPUs."
)

# --- What each check is about: why it matters, the fix, where it is taught, what it prevents -------

_OLDEST, _NEWEST = (".".join(map(str, version)) for version in TESTED_PYTHONS)
_ABOUT = {
    "python and torch": (
        "Python changes multiprocessing's defaults (3.14: forkserver on Linux) and its messages; "
        f"the series is tested on Python {_OLDEST}-{_NEWEST} with torch 2.11 to {TESTED_TORCH} "
        "(helpers.environment's TESTED_PYTHONS, TESTED_TORCH), and a newer torch may change what a "
        "notebook shows.",
        "Use a tested pair: if a notebook fails on a newer torch, pin the tested one "
        f"(pip install torch=={TESTED_TORCH}, or make test TORCH_VERSION={TESTED_TORCH}) and read the "
        "version notes.",
        "[00 · Your environment](../notebooks/00_overview.ipynb#your-environment)",
        "CPython gh-84559 (3.14 default start method); torch release notes",
    ),
    "default start method": (
        "fork, spawn and forkserver differ in what a child inherits and what it must import; code "
        "that silently relies on fork breaks when the default changes.",
        "Name the method explicitly: ctx = mp.get_context('spawn') (never set_start_method in a "
        "notebook or library).",
        "[01 · Three start methods](../notebooks/01_start_methods.ipynb#three-start-methods)",
        "CPython gh-84559; Python docs 'Contexts and start methods'",
    ),
    "helpers package": (
        "A notebook or script imports the first `helpers` on its path, and its own folder comes first: a "
        "helpers.py (or a helpers/ folder) of yours there shadows the series' package, and every import "
        "of the series then fails ('helpers' is not a package) or runs your file.",
        "Rename your helpers.py (and delete its __pycache__), or keep your code in another folder; the "
        "notebooks' setup cell names the file it finds.",
        "[00 · Your environment](../notebooks/00_overview.ipynb#your-environment)",
        "Python docs 'The module search path' (sys.path[0] is the script's or notebook's folder)",
    ),
    "target importable": (
        "spawn and forkserver children import the function by module and name: a function from "
        "__main__ (a notebook, an interactive session), a lambda or a nested function fails in "
        "the child ('Can't get attribute ...'), often far from its cause.",
        "Move the worker to a module (e.g. mypkg/workers.py), import it, and guard the script "
        "with if __name__ == '__main__':.",
        "[01 · A worker defined in the notebook](../notebooks/01_start_methods.ipynb#a-worker-defined-in-the-notebook-fails-under-spawn)",
        "pytorch#87016, pytorch#5301; Python docs 'Programming guidelines'",
    ),
    "threads before fork": (
        "A forked child inherits memory but only the calling thread: state that refers to threads "
        "fork did not copy (GNU OpenMP's pool waits for them at a barrier; a lock another thread held) "
        "never changes in the child, so it can hang (an OpenMP parallel op does).",
        "Start workers with spawn/forkserver, or call torch.set_num_threads(1) first thing in "
        "each fork child (DataLoader workers do).",
        "[04 · The CPU twin](../notebooks/04_fork_and_cuda.ipynb#the-cpu-twin-openmp-after-fork)",
        "pytorch#17199; CPython gh-100228 (3.12 fork DeprecationWarning)",
    ),
    "CPU threads": (
        "torch picks its thread count from the cores it sees, not from a container's CPU "
        "quota; N processes x T threads above the usable CPUs oversubscribe and run slower.",
        "In each of N workers: torch.set_num_threads(max(1, usable_cpus // N)); or set OMP_NUM_THREADS.",
        "[05 · Appendix: processes x threads on the cores](../notebooks/05_hogwild.ipynb#appendix-processes-x-threads-on-the-cores); "
        "[05 · The Hogwild pattern](../notebooks/05_hogwild.ipynb#the-hogwild-pattern)",
        "PyTorch docs 'CPU in multiprocessing' (PR #103229)",
    ),
    "launcher threads": (
        "A launcher may set each worker's thread count for you: torchrun sets OMP_NUM_THREADS=1 when it starts "
        "more than one worker and the variable is unset (it logs 'Setting OMP_NUM_THREADS environment variable "
        "for each process to be 1 in default, to avoid your system being overloaded, please further tune the "
        "variable for optimal performance in your application as needed.'), and Ray sets it in a worker to the "
        "CPUs its task or actor was assigned (1 when none). With one thread per process and more usable CPUs than processes, torch ops and a "
        "DataLoader's collate run single-threaded and the other CPUs idle.",
        "Set the threads per process yourself: OMP_NUM_THREADS=<usable CPUs // processes per node> before "
        "torchrun (it then keeps yours), or torch.set_num_threads(n) first thing in each worker; under Ray, "
        "ask for CPUs (num_cpus=n) and Ray sets OMP_NUM_THREADS to them.",
        "[05 · Appendix: processes x threads on the cores](../notebooks/05_hogwild.ipynb#appendix-processes-x-threads-on-the-cores)",
        "torch/distributed/run.py (OMP_NUM_THREADS default); Ray's set_omp_num_threads_if_unset (ray#6998)",
    ),
    "CUDA initialised": (
        "A fork child of a process that has initialised CUDA cannot use CUDA: 'Cannot "
        "re-initialize CUDA in forked subprocess'. torch.cuda.is_available() already initialises "
        "the driver, although torch.cuda.is_initialized() stays False.",
        "Use spawn or forkserver for CUDA workers; keep CUDA calls, is_available() included, out of "
        "the parent before it forks (and out of imports), or set PYTORCH_NVML_BASED_CUDA_CHECK=1.",
        "[04 · Fork versus CUDA](../notebooks/04_fork_and_cuda.ipynb#fork-versus-cuda)",
        "PyTorch docs 'Multiprocessing best practices: CUDA in multiprocessing'",
    ),
    "imports initialise CUDA": (
        "An import that initialises CUDA (torch.cuda.is_available() at module level does) poisons "
        "every later fork, and it is invisible in your own code.",
        "Import that module inside the worker, or start workers with spawn/forkserver.",
        "[04 · Fork versus CUDA](../notebooks/04_fork_and_cuda.ipynb#fork-versus-cuda)",
        "PyTorch docs 'CUDA in multiprocessing'",
    ),
    "shared memory": (
        "Tensors passed between processes (DataLoader batches, queues) live in /dev/shm; when it "
        "is full the DataLoader raises 'unable to allocate shared memory(shm) ... No space left on "
        "device (28)' (torch 2.13 to 2.15; older releases: the worker died with 'Bus error').",
        "docker run --shm-size=2g (or --ipc=host); Kubernetes: an emptyDir with medium: Memory "
        "on /dev/shm, whose pages count against the container's memory limit: raise "
        "resources.limits.memory by as much, or the Bus error becomes an OOM kill; or fewer workers "
        "/ smaller prefetch.",
        "[02 · share_memory_() moves the storage](../notebooks/02_shared_tensors.ipynb#share-memory-moves-the-storage); "
        "[08 · A full /dev/shm](../notebooks/08_debugging_and_pitfalls.ipynb#a-full-dev-shm)",
        "pytorch#5040, pytorch#16979; moby/moby#29492 (Docker's 64 MB default)",
    ),
    "memory": (
        "A job that needs more memory than the machine (or its container's cgroup) has left is "
        "killed by the kernel's OOM killer: a worker's exit code -9 (SIGKILL, 'died with signal 9') "
        "usually means host memory ran out, not a bug in the worker; dmesg says 'Out of memory'.",
        "Fewer workers, smaller batches or prefetch_factor, persistent_workers to avoid copies; "
        "raise the container's limit (docker run --memory, Kubernetes resources.limits.memory).",
        "[08 · What the parent sees](../notebooks/08_debugging_and_pitfalls.ipynb#what-the-parent-sees-exit-codes)",
        "pytorch#13246 (DataLoader memory growth); kernel docs cgroup-v2 memory.max",
    ),
    "shm counts as memory": (
        "/dev/shm is usually a tmpfs, which is memory: pages written there (shared tensors, DataLoader "
        "batches) are charged to the memory cgroup of the process that wrote them and stay charged until the "
        "file is removed. Under a container's memory limit a job whose shared memory and resident memory pass "
        "the limit is OOM-killed (a worker exits with -9) while df still shows /dev/shm with free space; a "
        "Kubernetes emptyDir with medium: Memory counts against the pod's limit the same way.",
        "Size the memory limit for resident memory plus shared memory in flight (docker run --memory with "
        "--shm-size; Kubernetes resources.limits.memory with the emptyDir's sizeLimit), or send less through "
        "/dev/shm (fewer workers, smaller prefetch_factor).",
        "[08 · A full /dev/shm](../notebooks/08_debugging_and_pitfalls.ipynb#a-full-dev-shm)",
        "kernel docs cgroup-v2 'Memory Ownership' (memory.max); Kubernetes docs 'emptyDir' (medium: Memory)",
    ),
    "open files": (
        "Under the file_descriptor sharing strategy every shared tensor in flight holds an open "
        "file; at the limit receiving one fails with 'received 0 items of ancdata' or 'Too many "
        "open files'.",
        "Raise the soft limit (ulimit -n <hard>, or resource.setrlimit in the launcher) or "
        "torch.multiprocessing.set_sharing_strategy('file_system').",
        "[02 · Too many open files](../notebooks/02_shared_tensors.ipynb#too-many-open-files)",
        "pytorch#973, pytorch#11201; PR #34768 (the ancdata message)",
    ),
    "process limit": (
        "Linux counts threads, not only processes, against a user's RLIMIT_NPROC (ulimit -u) and a cgroup's "
        "pids.max (a container's or a Slurm job's pids controller): every worker is a process and starts its "
        "own intra-op threads (DataLoader workers are processes too). Past the limit fork fails with 'OSError: "
        "[Errno 11] Resource temporarily unavailable', Python with \"RuntimeError: can't start new thread\", "
        "and GNU OpenMP aborts with 'libgomp: Thread creation failed: Resource temporarily unavailable'. "
        "RLIMIT_NPROC counts every process of the user, not just this job's, and does not bind root.",
        "Fewer threads per worker (torch.set_num_threads, OMP_NUM_THREADS) or fewer workers; raise the soft "
        "limit (ulimit -u <hard>, or /etc/security/limits.conf nproc) or the container's (docker run "
        "--pids-limit, the kubelet's podPidsLimit).",
        "[05 · Appendix: processes x threads on the cores](../notebooks/05_hogwild.ipynb#appendix-processes-x-threads-on-the-cores)",
        "man 2 setrlimit (RLIMIT_NPROC); kernel docs cgroup-v2 'PID' (pids.max); kernel/fork.c (copy_process)",
    ),
    "hostname": (
        "torchrun and init_process_group connect to MASTER_ADDR, by default this host's "
        "fully-qualified name; if it does not resolve, the rendezvous times out.",
        "Set MASTER_ADDR=127.0.0.1 on one machine (torchrun --local-addr 127.0.0.1), or fix "
        "/etc/hosts / DNS for the name shown.",
        "[06 · Appendix: where the rendezvous listens](../notebooks/06_ddp_mp_spawn.ipynb#appendix-where-the-rendezvous-listens)",
        "pytorch#150532",
    ),
    "master port": (
        "Rank 0's TCPStore listens on MASTER_PORT on all interfaces (IPv6 and IPv4); a port that "
        "something else holds on any address fails the launch with 'Address already in use' "
        "(errno 98). 29500 is the default of torchrun's static rendezvous (several nodes); its c10d "
        "rendezvous listens on 29400; a single-node torchrun picks a free port itself.",
        "Pick a free port (bind to port 0 and read it back) or stop what holds it.",
        "[06 · Appendix: where the rendezvous listens](../notebooks/06_ddp_mp_spawn.ipynb#appendix-where-the-rendezvous-listens)",
        "pytorch#85604",
    ),
    "leftover children": (
        "Children still alive from an earlier run (a stopped cell, a crashed launcher) hold "
        "memory, GPUs, ports and shared memory.",
        "Join with a timeout and terminate what is left (helpers.processes.reap / kill_tree); "
        "restart the kernel if nothing else works.",
        "[08 · Leave nothing behind](../notebooks/08_debugging_and_pitfalls.ipynb#leave-nothing-behind-reap-in-finally-and-where-signals-go)",
        "pytorch#1085, pytorch#8805",
    ),
    "orphaned workers": (
        "A plain multiprocessing child outlives a parent that was killed (only torch.mp.spawn "
        "children get PR_SET_PDEATHSIG); orphans keep their memory, GPU and shared memory.",
        "Check the pids shown (ps -o pid,ppid,pgid,args -p PID), then kill them; give children a "
        "parent-death signal or a deadline.",
        "[08 · Leave nothing behind](../notebooks/08_debugging_and_pitfalls.ipynb#leave-nothing-behind-reap-in-finally-and-where-signals-go)",
        "pytorch#14394, pytorch#1085",
    ),
    "stale shared memory": (
        "Under the file_system strategy torch_shm_manager unlinks a group's torch_* segments about "
        "2 s after its last client exits, crashes included. A segment whose creator is gone and "
        "that no process maps stays (using RAM) only while another process still holds the manager, "
        "or when the manager itself was killed.",
        "Delete the /dev/shm/torch_<pid>_* files listed: their creator is dead and nothing maps them.",
        "[02 · Sharing strategies](../notebooks/02_shared_tensors.ipynb#sharing-strategies-file-descriptors-or-names)",
        "PyTorch docs 'Multiprocessing best practices: file_system'",
    ),
    "Jupyter kernel": (
        "In a notebook, functions defined in cells live in __main__, which spawn/forkserver "
        "children cannot import; a worker's traceback may land in the terminal, not the cell.",
        "Put workers in a module and import them (helpers/ does this); run a script for long jobs. "
        "Subshells: in JupyterLab, Settings Editor > Kernels > 'Kernel Comms over subshells' > Disabled.",
        "[01 · A worker defined in the notebook](../notebooks/01_start_methods.ipynb#a-worker-defined-in-the-notebook-fails-under-spawn); "
        "[07 · What a spawn worker receives](../notebooks/07_dataloader_workers.ipynb#what-a-spawn-worker-receives)",
        "pytorch#5301, pytorch#51344; Python docs 'multiprocessing: interactive interpreter'",
    ),
    "memory maps": (
        "Every shared CPU storage (file_descriptor and file_system strategies) is one memory map in "
        "each process that holds it, and a process may have at most vm.max_map_count maps (65530 by "
        "the kernel's default; several distributions, e.g. Fedora 39+ and Ubuntu 24.04+, ship 1048576): "
        "past it, receiving one more tensor fails with 'unable to mmap ... Cannot allocate memory (12)' "
        "although memory is free (a DataLoader or Queue carrying many small tensors).",
        "Send fewer, larger tensors (stack a batch into one); or raise the limit: "
        "sysctl -w vm.max_map_count=262144 (a file in /etc/sysctl.d/ keeps it).",
        "[13 · The map count](../notebooks/13_field_guide_workers_and_machine.ipynb#unable-to-mmap-cannot-allocate-memory-12-the-map-count)",
        "pytorch#60626, pytorch#87861; kernel docs sysctl/vm.txt (max_map_count)",
    ),
    "logind RemoveIPC": (
        "With systemd-logind's RemoveIPC=yes (systemd's default; some distributions ship no) a user's "
        "named IPC objects are deleted when that user's last login session ends. At risk are the "
        "objects that keep a name while in use: shared storages under the file_system strategy "
        "(/dev/shm/torch_*) and the semaphores of spawn and forkserver contexts (/dev/shm/sem.mp-*); a "
        "job started over ssh then fails to open them ('unable to open shared memory object', a Lock "
        "that is gone) once the ssh session closes, unless the user lingers. torch's Linux default "
        "(file_descriptor, fork) unlinks its files at once. Root and system users are exempt.",
        "loginctl enable-linger $USER (keeps the user's manager, and its IPC, without a session); or "
        "RemoveIPC=no in /etc/systemd/logind.conf.d/*.conf; or launch through the scheduler, not ssh.",
        "[13 · Appendix D: RemoveIPC and containers](../notebooks/13_field_guide_workers_and_machine.ipynb#appendix-d-removeipc-and-containers)",
        "systemd/systemd#2039, #4532; man logind.conf (RemoveIPC); PostgreSQL docs 'systemd RemoveIPC'",
    ),
    "backends": (
        "Builds differ: NCCL exists only in Linux CUDA builds (not on Windows or macOS, where gloo is the "
        "backend) and needs a GPU at run time (the Linux pip wheel has it without one: 'nccl2 requires at "
        "least one CUDA device'), MPI only in builds made with it. The TCPStore uses libuv by default since "
        "torch 2.4, and Windows wheels are built without it ('use_libuv was requested but PyTorch was "
        "built without libuv support'). In torch 2.15.0 only init_process_group's tcp:// and env:// stores "
        "read USE_LIBUV (default 0 on Windows); torchrun's rendezvous stores and TCPStore(...) ignore it, "
        "so torchrun cannot start on Windows wheels (pytorch PR #196855, open, would honour USE_LIBUV).",
        "Name a backend this torch has: 'nccl' if torch.cuda.is_available() else 'gloo' (gloo on CPU, "
        "macOS and Windows). Without libuv (Windows): start the ranks with mp.spawn and "
        "init_process_group('gloo', 'tcp://127.0.0.1:PORT', ...) (the old store by default there), or "
        "run under WSL; USE_LIBUV=0 does not fix torchrun in torch 2.15.0.",
        "[13 · Windows and macOS](../notebooks/13_field_guide_workers_and_machine.ipynb#windows-and-macos-what-this-torch-has)",
        "PyTorch docs 'Distributed: Backends'; tutorial 'Introduction to Libuv TCPStore Backend'; "
        "pytorch PR #196855 (open), PR #175316 (closed)",
    ),
    "CUDA IPC": (
        "A CUDA tensor sent through a torch Queue is shared by CUDA IPC, which Windows builds do not "
        "support. With PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True the receiver takes the sender's "
        "file descriptors with pidfd_getfd, which needs ptrace permission: Yama (ptrace_scope 1 allows "
        "only a process's descendants, 2 needs CAP_SYS_PTRACE, 3 none) or a container's seccomp filter "
        "without CAP_SYS_PTRACE (Docker's default) refuses it ('pidfd_getfd: Operation not permitted'). "
        "torch 2.15.0's public builds share expandable segments this way by default "
        "(TORCH_CUDA_EXPANDABLE_SEGMENTS_IPC=0 turns it off). Between containers CUDA IPC also needs "
        "a shared PID namespace (--pid=host or --pid=container:NAME) besides --ipc=host.",
        "Leave expandable_segments off in processes that share CUDA tensors (or "
        "torch.cuda.memory._set_allocator_settings('expandable_segments:False') around them); or allow "
        "ptrace (docker run --cap-add SYS_PTRACE; ptrace_scope 0); on Windows send CPU tensors.",
        "[13 · Appendix B](../notebooks/13_field_guide_workers_and_machine.ipynb#appendix-b-cuda-between-processes-on-a-gpu); "
        "[04 · Appendix: CUDA tensors between processes](../notebooks/04_fork_and_cuda.ipynb#appendix-cuda-tensors-between-processes)",
        "c10/cuda/CUDACachingAllocator.cpp (ExpandableSegment::fromShared); moby "
        "profiles/seccomp/default.json; PyTorch docs 'Windows FAQ: CUDA IPC operations'; Triton client "
        "README (CUDA shared memory: --pid host)",
    ),
    "gloo interface": (
        "Without GLOO_SOCKET_IFNAME, gloo binds the address this host's name resolves to; a name that "
        "resolves to loopback (Debian and Ubuntu map it to 127.0.1.1 in /etc/hosts) makes every rank "
        "announce 127.x: ranks on other nodes cannot connect (a timeout or 'Gloo connectFullMesh failed').",
        "Set GLOO_SOCKET_IFNAME to the interface the nodes share (e.g. eth0: ip -br addr shows them), or "
        "map the hostname to that interface's address in /etc/hosts.",
        "[09 · Appendix: real networks](../notebooks/09_multi_node.ipynb#appendix-real-networks)",
        "torch/csrc/distributed/c10d/ProcessGroupGloo.cpp (createDefaultDevice); aws-samples/aws-do-eks#69",
    ),
    "Slurm layout": (
        "srun runs its command once per task. With torchrun as that command, N tasks per node start N agents, "
        "each starting --nproc-per-node workers: N times the processes the node should have, and N agents per "
        "node in a rendezvous that expects one (a static rendezvous with --node-rank=$SLURM_NODEID gets "
        "duplicate node ranks, rank 0's store 'Address already in use'; agents past torchrun's c10d --nnodes "
        "wait). More processes per node than "
        "the GPUs Slurm gave fail with 'invalid device ordinal' or share a GPU; more workers than the task's "
        "CPUs oversubscribe them; --nnodes above the allocation's nodes waits for nodes that never come (until "
        "the rendezvous times out), below it leaves agents waiting.",
        "With torchrun: srun --ntasks-per-node=1 torchrun --nnodes=$SLURM_NNODES --nproc-per-node=<GPUs "
        "per node> (and --cpus-per-task for all its workers); or no torchrun: srun --ntasks-per-node=<GPUs> "
        "python train.py, each task taking RANK from SLURM_PROCID and LOCAL_RANK from SLURM_LOCALID.",
        "[09 · On a cluster: Slurm](../notebooks/09_multi_node.ipynb#on-a-cluster-slurm)",
        "Slurm docs: srun, sbatch 'OUTPUT ENVIRONMENT VARIABLES'; torch/distributed/run.py; "
        "torch/distributed/elastic/rendezvous/dynamic_rendezvous.py (redundancy_list)",
    ),
    "launch in a thread": (
        "Python installs signal handlers only on the main thread: a launcher run from a threading.Thread "
        "(torchrun's elastic_launch or start_processes) installs none, logs 'Failed to register signal "
        "handlers since torchelastic is running on a child thread', and forwards no SIGTERM/SIGINT to its "
        "workers, which are orphaned when the job is stopped; a DataLoader started there sets no SIGCHLD "
        "handler, so a worker's death is noticed late.",
        "Launch from the main thread (the script's if __name__ == '__main__': block) and run the other "
        "work in the thread instead.",
        "[14 · A launcher started off the main thread](../notebooks/14_field_guide_launches_and_ranks.ipynb#a-launcher-started-off-the-main-thread)",
        "torch/distributed/elastic/multiprocessing/api.py (PContext.start); Python docs 'signal: "
        "signals and threads'",
    ),
    "main thread": (
        "This code runs off the interpreter's main thread, where Python installs no signal handlers: "
        "a launcher started here forwards no SIGTERM/SIGINT to its workers (torchelastic says 'Failed "
        "to register signal handlers ...') and a DataLoader sets no SIGCHLD handler.",
        "Call the launcher from the main thread (in Jupyter: not from a widget callback on a subshell).",
        "[14 · A launcher started off the main thread](../notebooks/14_field_guide_launches_and_ranks.ipynb#a-launcher-started-off-the-main-thread)",
        "Python docs 'signal: signals and threads'; torch/distributed/elastic/multiprocessing/api.py",
    ),
    "stack dumps": (
        "When a job hangs, its Python stacks say where; py-spy reads them from outside with ptrace (as "
        "does Python 3.15's python -m profiling.sampling dump PID), which Yama (ptrace_scope 1-3) and "
        "containers without CAP_SYS_PTRACE refuse.",
        "pip install py-spy (or use Python 3.15+); docker run --cap-add SYS_PTRACE; or run workers through "
        "helpers.launch.launch (faulthandler on SIGUSR1 needs no ptrace).",
        "[08 · Where is it stuck?](../notebooks/08_debugging_and_pitfalls.ipynb#where-is-it-stuck-a-stack-dump-on-demand)",
        "py-spy README 'How do I run py-spy in Docker?', py-spy PR #459; kernel docs LSM/Yama "
        "(ptrace_scope); Python 3.15 docs, profiling.sampling 'The dump command'",
    ),
}

CHECKS = tuple(_ABOUT)  # the names :func:`check` can run, in the order it reports them


def finding(name: str, status: str, measured: str) -> Finding:
    """The :class:`Finding` of check ``name`` (one of :data:`CHECKS`): its status and what was measured,
    with why it matters, the fix, where it is taught and what it prevents. Every check builds its result
    with it.

    >>> f = finding("open files", "ok", "soft limit 4096")
    >>> f.status, f.fix.startswith("Raise the soft limit")
    ('ok', True)
    """
    return Finding(name, status, measured, *_ABOUT[name])


def torch_missing(error: ImportError) -> Finding:
    """The one finding where this interpreter cannot import torch: which interpreter, and what to do
    (most checks need torch; the doctor reports this instead of a traceback).

    >>> torch_missing(ModuleNotFoundError("No module named 'torch'")).status
    'fail'
    """
    measured = (
        f"torch is not importable by {sys.executable} (Python {platform.python_version()}): "
        f"{type(error).__name__}: {error}"
    )
    fix = (
        "Run the doctor with the Python of the environment that has torch (e.g. .venv/bin/python -m "
        f"helpers.doctor; 'which python' shows the one your shell runs), or install torch into this one: "
        f"{sys.executable} -m pip install torch"
    )
    why = (
        "The series and most of the doctor's checks run torch; this Python cannot import it, often "
        "because it is not the environment's (a shell's python, another virtual environment's)."
    )
    return dataclasses.replace(finding("python and torch", "fail", measured), why=why, fix=fix)
