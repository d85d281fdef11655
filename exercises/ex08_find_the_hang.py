"""Exercise 08 (debugging): find where a stuck job waits, from its stack dump.

A job of yours is stuck. It registered ``faulthandler.register(signal.SIGUSR1, all_threads=True)``
([08 · Where is it stuck?](../notebooks/08_debugging_and_pitfalls.ipynb#where-is-it-stuck-a-stack-dump-on-demand)),
so ``kill -USR1 PID`` made it write the stacks of all its threads, the
most recent call first, for example::

    Thread 0x00007f3a9c5fe6c0 (most recent call first):
      File "/usr/lib/python3.11/threading.py", line 320 in wait
      File "/usr/lib/python3.11/multiprocessing/queues.py", line 231 in _feed
      ...
    Current thread 0x00007f3aa0c4f740 (most recent call first):
      File "/usr/lib/python3.11/multiprocessing/connection.py", line 395 in _recv
      File "/usr/lib/python3.11/multiprocessing/queues.py", line 103 in get
      File "/home/you/job.py", line 21 in collect
      File "/home/you/job.py", line 29 in <module>

Write ``where_it_waits(dump, my_file)``: return ``(function, line)`` of the call in your own code
(frames whose file is ``my_file``) where the job waits, here ``("collect", 21)``: that is the line
to read and fix. The frames above it are Python's library, waiting on your behalf.

The checker gets three real jobs stuck (a ``get`` nobody answers, a ``join`` before the queue is
drained, a lock taken twice), dumps their stacks with SIGUSR1 and hands each dump to your function.
Check with::

    from helpers.checkers import check_ex08; check_ex08()
"""

from __future__ import annotations


def where_it_waits(dump: str, my_file: str) -> tuple[str, int]:
    """The (function name, line number) in ``my_file`` where the dumped process waits."""
    raise NotImplementedError("exercise 08: write where_it_waits")
