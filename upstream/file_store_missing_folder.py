"""init_process_group's timeout does not bound a file:// rendezvous whose folder does not exist.

`init_process_group("gloo", init_method="file:///<missing folder>/store", timeout=2 s)` does not
fail after 2 s: the FileStore that the file:// handler creates keeps the store's default timeout
(300 s), and opening its file with O_CREAT in a folder that does not exist fails with ENOENT, which
FileStore's File constructor retries (it retries ENOENT to wait for a file another rank creates,
pytorch/pytorch#13750; #48475 asked for a quick error and was closed: the wait is meant). After 300 s
the rank raises `torch.distributed.DistStoreError: No such file or directory`, a message without the
path. Seen with torch 2.15.0 (PyPI, on CPU), Python 3.11, Linux (301 s with `timeout=5 s`, measured
2026-12-02). Expected: the error within the timeout given to init_process_group, naming the path.

Run: python file_store_missing_folder.py [SECONDS]  (how long to wait for the error; default 15)
Prints the torch version, then a verdict line; exits 1 where the rank is still waiting after SECONDS,
0 where it raised in time.
"""

import multiprocessing
import shutil
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

TIMEOUT = timedelta(seconds=2)


def rank_main(url, errors):
    try:
        dist.init_process_group("gloo", init_method=url, rank=0, world_size=1, timeout=TIMEOUT)
        dist.destroy_process_group()
        errors.put("no error")
    except Exception as error:
        errors.put(f"{type(error).__name__}: {error}")


if __name__ == "__main__":
    wait = float(sys.argv[1]) if len(sys.argv) > 1 else 15.0
    print(f"torch {torch.__version__}, Python {sys.version.split()[0]}")
    parent = Path(tempfile.mkdtemp())
    url = (parent / "missing" / "store").as_uri()  # the folder "missing" is never made
    method = "fork" if sys.platform == "linux" else "spawn"  # fork: the rank does not import torch again
    context = multiprocessing.get_context(method)
    errors = context.Queue()
    rank = context.Process(target=rank_main, args=(url, errors))
    start = time.monotonic()
    rank.start()
    rank.join(wait)
    still_waiting = rank.is_alive()
    if still_waiting:
        rank.kill()
        rank.join(10)
    shutil.rmtree(parent)
    if still_waiting:
        print(f"AFFECTED: init_process_group({url}, timeout={TIMEOUT}) still waiting after {wait:.0f} s")
        sys.exit(1)
    print(f"raised after {time.monotonic() - start:.1f} s: {errors.get(timeout=10)}: not affected")
