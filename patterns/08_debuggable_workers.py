"""Workers that print their stacks when stuck. Run: python 08_debuggable_workers.py [method] [hang]"""

import faulthandler
import signal
import sys
import threading

import torch.multiprocessing as mp


def worker(rank, hang):
    if hasattr(signal, "SIGUSR1"):  # POSIX only
        faulthandler.register(signal.SIGUSR1, all_threads=True)  # `kill -USR1 PID`: stacks to stderr
        faulthandler.register(signal.SIGTERM, all_threads=True, chain=True)  # terminate(): stacks, then exit
    if hang and rank == 1:
        threading.Event().wait()  # `hang`: never set; the parent terminates it, its stacks show, exit 1


if __name__ == "__main__":
    method = sys.argv[1] if len(sys.argv) > 1 else "spawn"
    workers = [mp.get_context(method).Process(target=worker, args=(r, "hang" in sys.argv)) for r in range(2)]
    try:
        for w in workers:
            w.start()
        for w in workers:
            w.join(timeout=60)
    finally:  # reap everything, even after an exception or Ctrl-C
        for w in workers:
            if w.pid is not None and w.exitcode is None:  # started, still running after its deadline
                w.terminate()  # SIGTERM: its handler prints the stacks, then it exits with -15
                w.join(timeout=5)
    print(f"{method}: exit codes {[w.exitcode for w in workers]} (negative: killed by that signal)")
    sys.exit(any(w.exitcode != 0 for w in workers))
