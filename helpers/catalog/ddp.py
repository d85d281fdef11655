"""Catalog entries: DistributedDataParallel, Join, ZeroRedundancyOptimizer, FSDP2 and distributed checkpoints.

Data for :mod:`helpers.catalog` (its docstring says what each field means).
"""

from __future__ import annotations

from helpers.catalog import Entry

ENTRIES: tuple[Entry, ...] = (
    Entry(
        id="ddp_unused_parameters",
        message=(
            "RuntimeError: Expected to have finished reduction in the prior iteration before starting a "
            "new one. This error indicates that your module has parameters that were not used in producing "
            "loss."
        ),
        cause=(
            "DDP: a parameter got no gradient in the last step: forward never used it, or used it for an "
            "output the loss ignores (an auxiliary head); remove it, or `find_unused_parameters=True` / "
            "`static_graph=True` (only if the same parameters go unused every step). The first step raised "
            "nothing and left its gradients un-averaged (torch 2.15.0)"
        ),
        fix="",
        teaches=(
            "14_field_guide_launches_and_ranks.ipynb#ddp-expected-to-have-finished-reduction-in-the-prior-iteration"
        ),
        case="ddp_unused_parameters",
    ),
    Entry(
        id="ddp_unused_parameters_static_graph",
        message=(
            "RuntimeError: Expected to have finished reduction in the prior iteration before starting a "
            "new one. This error indicates that your training graph has changed in this iteration"
        ),
        cause=(
            "DDP with `static_graph=True`: a parameter used in one step went unused in a later one (a "
            "branch); `static_graph` is the cause here, not the fix: `find_unused_parameters=True` instead"
        ),
        fix="",
        teaches=(
            "14_field_guide_launches_and_ranks.ipynb#ddp-expected-to-have-finished-reduction-in-the-prior-iteration"
        ),
        case="ddp_unused_parameters",
    ),
    Entry(
        id="ddp_ready_twice",
        message="RuntimeError: Expected to mark a variable ready only once.",
        cause=(
            "DDP: a parameter's gradient hook fired twice in one step (the same layer under two reentrant "
            "`checkpoint`s with `find_unused_parameters=True`): `use_reentrant=False` or "
            "`static_graph=True`. Without `find_unused_parameters` the same model runs with no error and "
            "wrong, per-rank gradients (torch 2.15.0; unsupported, per DDP's docstring)"
        ),
        fix="",
        teaches="14_field_guide_launches_and_ranks.ipynb#appendix-b-more-ddp-errors-that-are-not-hangs",
        case="ddp_ready_twice",
    ),
)
