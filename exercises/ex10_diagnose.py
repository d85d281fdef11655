"""Exercise 10 (notebook 10, the field guide): read the error message.

Write ``diagnose(message)``: given an error message as a user pastes it into a search box (one
line, or a whole traceback; ports, pids, ranks and timeouts vary from run to run), return the case
it belongs to, one of the keys of ``helpers.field_guide.CASES``:

- ``"uneven_inputs"``: a gloo receive timed out, or the peer closed the connection
  ([10 · Uneven inputs](../notebooks/10_field_guide.ipynb#a-ddp-job-hangs-at-the-end-of-an-epoch-uneven-inputs))
- ``"one_rank_collective"``: ranks that failed to pass a monitored barrier (DETAIL)
  ([10 · One rank only](../notebooks/10_field_guide.ipynb#a-collective-called-on-one-rank-only))
- ``"port_in_use"``: the rendezvous port is taken
  ([10 · Address in use](../notebooks/10_field_guide.ipynb#address-already-in-use-two-jobs-on-one-port))
- ``"local_rank_argument"``: the launcher's ``--local-rank`` was not recognised
  ([10 · Appendix F](../notebooks/10_field_guide.ipynb#appendix-f-unrecognized-arguments-local-rank-0))
- ``"oom_killed"``: a worker ended by SIGKILL
  ([10 · Appendix G](../notebooks/10_field_guide.ipynb#appendix-g-a-worker-killed-by-the-out-of-memory-killer))
- ``"unpicklable_worker"``: a child could not find the function, or started before bootstrapping
- ``"cuda_in_fork"``, ``"shm_full"``, ``"too_many_open_files"``: notebooks 04, 08 and 02
- ``"debugger_in_worker"``, ``"ddp_unused_parameters"``, ``"ddp_ready_twice"``,
  ``"signal_off_main_thread"``, ``"global_from_main_block"``, ``"lock_across_contexts"``: notebook 14
  ([14 · From the symptom to the case](../notebooks/14_field_guide_launches_and_ranks.ipynb#from-the-symptom-to-the-case))
- ``"worker_raised"``: any other exception raised in a worker and re-raised by ``mp.spawn``

Check with::

    from helpers.checkers import check_ex10; check_ex10()
"""

from __future__ import annotations


def diagnose(message: str) -> str:
    """Return the case (a key of ``helpers.field_guide.CASES``) that ``message`` belongs to."""
    raise NotImplementedError("exercise 10: write diagnose")
