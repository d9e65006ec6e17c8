"""Issue 54, point 4: "make a host batch whenever two episodes' calls are due together". The model host's batcher
(evaluator/policies/model_server.py) run on its own event loop with a model that takes 60 ms a forward pass: a call
due within one pass of another shares it, whatever --max-wait-ms says; a call that comes later does not wait for it."""

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import numpy as np

from evaluator.policies.model_server import Batcher

PASS_S = 0.06


class SlowModel:
    """Each forward pass takes PASS_S, whatever its batch; it answers one (1, 4) chunk per call."""

    def __init__(self):
        self.batches: list[int] = []

    def infer(self, batch):
        self.batches.append(len(batch))
        time.sleep(PASS_S)
        return [np.zeros((1, 4)) for _ in batch]


def episode():
    return SimpleNamespace(state={})


async def two_calls(batcher: Batcher, apart_s: float) -> tuple[dict, dict]:
    first = asyncio.create_task(batcher.call(episode(), {}))
    await asyncio.sleep(apart_s)
    second = asyncio.create_task(batcher.call(episode(), {}))
    return await first, await second


def run(apart_s: float, max_batch: int = 8) -> tuple[SlowModel, dict, dict]:
    async def scenario():
        model = SlowModel()
        batcher = Batcher(model, max_batch=max_batch, max_wait_ms=2.0)
        batcher.open_episodes = 2  # two episodes connected
        running = asyncio.create_task(batcher.run())
        await asyncio.wait_for(batcher.call(episode(), {}), 5)  # a first pass: the host learns how long one takes
        replies = await asyncio.wait_for(two_calls(batcher, apart_s), 5)
        running.cancel()
        return model, *replies

    # On a thread of its own: a browser test's Playwright may hold an event loop in the test thread.
    with ThreadPoolExecutor(1) as thread:
        return thread.submit(asyncio.run, scenario()).result()


def test_a_call_due_within_one_forward_pass_of_another_shares_it_despite_a_two_millisecond_window():
    model, first, second = run(apart_s=PASS_S / 3)
    assert model.batches[1:] == [2]
    assert first["server_timing"]["batch_size"] == second["server_timing"]["batch_size"] == 2


def test_a_call_due_later_than_one_forward_pass_is_not_waited_for():
    model, first, second = run(apart_s=PASS_S * 3)
    assert model.batches[1:] == [1, 1]
    assert first["server_timing"]["wait_ms"] < PASS_S * 1000 * 2  # the first waited one pass at most


def test_with_batching_off_no_call_waits_for_another():
    model, first, second = run(apart_s=PASS_S / 3, max_batch=1)
    assert model.batches[1:] == [1, 1]
    assert first["server_timing"]["wait_ms"] < 20
