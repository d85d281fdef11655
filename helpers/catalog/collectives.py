"""Catalog entries: Collectives and process groups: gloo, NCCL, timeouts, mismatched calls, the watchdog.

Data for :mod:`helpers.catalog` (its docstring says what each field means).
"""

from __future__ import annotations

from helpers.catalog import Entry

ENTRIES: tuple[Entry, ...] = (
    Entry(
        id="gloo_recv_timeout",
        message="Timed out waiting 5000ms for recv operation to complete",
        cause="a gloo collective waited past the group's timeout: a rank is elsewhere (uneven inputs?)",
        fix="",
        teaches="10_field_guide.ipynb#a-ddp-job-hangs-at-the-end-of-an-epoch-uneven-inputs",
        case="uneven_inputs",
    ),
    Entry(
        id="gloo_connection_closed",
        message="Connection closed by peer [127.0.0.1]:9141",
        cause=(
            "the other rank left (finished or crashed) while this one still communicates (torch 2.15 goes "
            'on "This is typically caused by a remote worker crashing."; 2.11 does not); the same case can '
            "print `Read error [127.0.0.1]:9141: Connection reset by peer` instead"
        ),
        fix="",
        teaches="10_field_guide.ipynb#a-ddp-job-hangs-at-the-end-of-an-epoch-uneven-inputs",
        case="uneven_inputs",
    ),
    Entry(
        id="monitored_barrier_failed",
        message="RuntimeError: [Rank 0]: Ranks 1 failed to pass monitoredBarrier in 4000 ms",
        cause=(
            "with TORCH_DISTRIBUTED_DEBUG=DETAIL: names the ranks that never reached the collective. Use "
            "DETAIL on a reproduction without DDP: with torch 2.15.0 and 2.13.0, a DDP model on gloo can "
            "crash under DETAIL (SIGSEGV; not in every environment)"
        ),
        fix="",
        teaches="10_field_guide.ipynb#a-collective-called-on-one-rank-only",
        case="one_rank_collective",
    ),
    Entry(
        id="no_nccl_built_in",
        message="RuntimeError: Distributed package doesn't have NCCL built in",
        cause='`backend="nccl"` on a build without NCCL (Windows, macOS, CPU-only builds): use gloo there',
        fix="",
        teaches="13_field_guide_workers_and_machine.ipynb#windows-and-macos-what-this-torch-has",
        case="other_platform",
    ),
    Entry(
        id="gloo_connect_full_mesh",
        message="RuntimeError: Gloo connectFullMesh failed with",
        cause=(
            "(then `timed out connecting: SO_ERROR: Connection refused`, `No route to host` or `Connect "
            "timeout`) a rank announced an address the others cannot reach: a hostname that resolves to "
            "127.x or a private address, the wrong interface. Set `GLOO_SOCKET_IFNAME` to the interface "
            "the nodes share and `MASTER_ADDR` to an address all reach (torch 2.15.0's text)"
        ),
        fix="",
        teaches="09_multi_node.ipynb#appendix-real-networks",
        case="gloo_peer_unreachable",
    ),
)
