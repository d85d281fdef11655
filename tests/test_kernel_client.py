"""tests.kernel_client: a wake-up that never comes costs one slice, not the whole timeout."""

from __future__ import annotations

import asyncio
import queue
import time

import pytest

from tests import kernel_client


class NeverWoken:
    """A channel whose poll is never woken: it looks for a message only when its timeout is over."""

    def __init__(self, arrives_after: float | None):
        self.arrives = None if arrives_after is None else time.monotonic() + arrives_after

    async def get_msg(self, timeout=None):
        await asyncio.sleep(timeout)
        if self.arrives is None or time.monotonic() < self.arrives:
            raise queue.Empty
        return {"msg_type": "execute_reply"}


def _timed(get_msg, channel, timeout):
    start = time.monotonic()
    try:
        result = asyncio.run(get_msg(channel, timeout=timeout))
    except queue.Empty:
        result = "Empty"
    return result, time.monotonic() - start


@pytest.mark.parametrize("wrapped", [True, False])
def test_a_message_missed_by_the_wake_up_is_found_within_a_slice(wrapped):
    get_msg = kernel_client.sliced(NeverWoken.get_msg, slice_s=0.1) if wrapped else NeverWoken.get_msg
    result, seconds = _timed(get_msg, NeverWoken(arrives_after=0.25), timeout=3)
    assert result == {"msg_type": "execute_reply"}
    if wrapped:
        assert seconds < 1.5
        assert get_msg.late == 1
    else:  # the unsliced poll returns it only at its timeout
        assert seconds >= 3


def test_nothing_arrives_then_empty_after_the_whole_timeout():
    get_msg = kernel_client.sliced(NeverWoken.get_msg, slice_s=0.1)
    result, seconds = _timed(get_msg, NeverWoken(arrives_after=None), timeout=0.55)
    assert result == "Empty"
    assert 0.55 <= seconds < 1.5


def test_no_timeout_waits_until_the_message_comes():
    get_msg = kernel_client.sliced(NeverWoken.get_msg, slice_s=0.1)
    result, seconds = _timed(get_msg, NeverWoken(arrives_after=0.5), timeout=None)
    assert result == {"msg_type": "execute_reply"}
    assert 0.5 <= seconds < 1.5


def test_installed_for_this_session_once():
    from jupyter_client.channels import AsyncZMQSocketChannel

    installed = AsyncZMQSocketChannel.get_msg
    assert installed.sliced  # conftest.py installed it
    kernel_client.poll_in_slices()
    assert AsyncZMQSocketChannel.get_msg is installed
