"""A launcher that stops its workers on SIGHUP (under nohup it keeps nohup's SIG_IGN); workers that log.
Run: python 14_hangup_safe_launcher.py [method] [seconds] [hangup]   (hangup: it sends itself SIGHUP)"""

import logging
import signal
import sys
import time

import torch.multiprocessing as mp


def worker(rank, seconds):
    logging.basicConfig(level=logging.INFO, format=f"rank {rank}: %(message)s")  # spawn: no handler yet
    logging.getLogger("train").info("started")
    time.sleep(seconds)


if __name__ == "__main__":
    method, seconds = (sys.argv[1:] + ["spawn"])[0], float((sys.argv[2:] + [0])[0])  # seconds: each worker's
    if hasattr(signal, "SIGHUP") and signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:  # SIG_IGN: nohup
        signal.signal(signal.SIGHUP, lambda signum, frame: sys.exit(128 + signum))  # SystemExit: finally runs
    workers = [mp.get_context(method).Process(target=worker, args=(r, seconds)) for r in range(2)]
    try:
        for w in workers:
            w.start()
        if "hangup" in sys.argv:  # what a closed terminal sends the launcher
            signal.raise_signal(signal.SIGHUP)
        for w in workers:
            w.join(timeout=seconds + 60)
    finally:
        for w in workers:
            if w.pid is not None and w.exitcode is None:  # started, still running
                w.terminate()
                w.join(timeout=5)
        print(f"{method}: exit codes {[w.exitcode for w in workers]} (negative: stopped by that signal)")
    sys.exit(any(w.exitcode != 0 for w in workers))
