"""``torchrun ... -m helpers.multinode``: one worker of notebook 09 (``helpers.multinode.worker.main``).

The worker's functions come from ``helpers.multinode.worker``, not from this ``__main__``.
"""

from helpers.multinode.worker import main

main()
