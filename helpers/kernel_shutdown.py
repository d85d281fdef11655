"""An IPython extension: a kernel asked to shut down exits through Python's normal exit, at once.

ipykernel answers a shutdown request on its control thread. It sets ``shell.exit_now``, whose
observer stops the main event loop 0.1 s later with ``io_loop.call_later``, and it then terminates
the kernel's children, backing off for up to 14 s before SIGKILL. ``call_later`` is not thread-safe
(asyncio's debug mode reports this very call: LiberTEM/LiberTEM#1601), so the main loop, asleep in
``epoll``, never sees the timer: the kernel stays until every child has gone. Multiprocessing's
resource tracker, started by the first spawn or forkserver child, ignores SIGTERM, so after a spawn
demo jupyter_client SIGTERMs the kernel 2.5 s into its shutdown; it dies without running its exit
handlers, and multiprocessing's temporary folder (``pymp-*``), where the kernel made one (a
forkserver's socket, or the listener that passes a tensor's file descriptor through a queue), stays
behind.

This extension wakes the main loop with ``add_callback``, which is thread-safe, when ``exit_now`` is
set: the kernel then stops 0.1 s later, as ipykernel intends, and exits normally (exit handlers run,
the resource tracker sees its pipe close and exits). That exit itself takes time: a kernel that had
imported torch and started a spawn child took 1.3 to 3.0 s at a load average of 9 on 2 cores, so
jupyter_client's SIGTERM, 2.5 s after the request, could still cut it short. The same callback, on
the main thread (where Python sets signal handlers), makes the kernel ignore SIGTERM from then on:
it is leaving already, and jupyter_client's SIGKILL at 5 s (``shutdown_wait_time``) still bounds the
shutdown. The set-up loads it into every kernel of ``.venv``
(``jupyter-config/ipython/ipython_kernel_config.json``, installed in ``.venv/etc/ipython``).
"""

from __future__ import annotations

import signal

__all__: list[str] = []


def load_ipython_extension(ipython) -> None:
    """IPython calls this when the kernel starts (``IPKernelApp.extensions``); a terminal IPython,
    which has no kernel, is left as it is."""
    kernel = getattr(ipython, "kernel", None)
    if kernel is None:
        return

    def on_exit_requested(change) -> None:  # wake the main loop; from then on, ignore SIGTERM
        if change["new"] and getattr(kernel, "io_loop", None) is not None:
            kernel.io_loop.add_callback(signal.signal, signal.SIGTERM, signal.SIG_IGN)

    ipython.observe(on_exit_requested, names="exit_now")
