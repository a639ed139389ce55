"""The scheduler's invariants, with the scripted model (tests/helpers/scripted_model.py), which
checks every batch as llama.cpp would: every job gets exactly one final event, cancelling one
never breaks the others, answers run together, prompts are read in chunks, and the "KV cache"
holds only what the prefix cache says it keeps. The same properties on the real model are in
test_batching.py."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.engine.prefix_cache import RamTier, SavedSeq
from app.engine.types import (
    ChatRequest,
    CompletionRequest,
    Delta,
    Event,
    Failed,
    Finished,
    LoadParams,
    SamplingParams,
    Started,
)
from app.engine.worker import EngineWorker, Job
from tests.helpers.scripted_model import (
    ScriptedModel,
    assert_cache_consistent,
    worker_with,
)

GREEDY = SamplingParams(temperature=0.0)


@pytest.fixture
def scripted() -> Iterator[tuple[EngineWorker, ScriptedModel]]:
    worker, model = worker_with()
    yield worker, model
    worker.shutdown()


def collect(job: Job) -> list[Event]:
    return list(job.events(timeout=30))


def test_answers_are_decoded_together(scripted: tuple[EngineWorker, ScriptedModel]) -> None:
    worker, model = scripted
    jobs = [
        worker.submit(CompletionRequest(f"prompt {i} " * 3, SamplingParams(max_tokens=20)))
        for i in range(4)
    ]
    finals = [j.wait(30) for j in jobs]
    assert all(isinstance(f, Finished) and f.reason == "length" for f in finals)
    assert all(f.usage.completion_tokens == 20 for f in finals)
    assert model.most_at_once == 4  # four outputs in one decode
    assert model.decodes < 4 * 21  # not one after another
    assert_cache_consistent(worker, model)


def test_a_long_prompt_is_read_in_chunks_while_others_stream(
    scripted: tuple[EngineWorker, ScriptedModel],
) -> None:
    worker, model = scripted
    at_delta: list[int] = []  # the decode count when each of the stream's tokens came
    long_jobs: list[Job] = []

    def sink(e: Event) -> None:  # on the worker thread, between steps
        if isinstance(e, Delta):
            at_delta.append(model.decodes)
            if len(at_delta) == 3:  # the stream is running: a 1,000-token prompt arrives
                request = CompletionRequest("x" * 4 * 1000, SamplingParams(max_tokens=2))
                long_jobs.append(worker.submit(request))

    streaming = worker.submit(CompletionRequest("short", SamplingParams(max_tokens=60)), sink)
    assert isinstance(streaming.wait(30), Finished)
    assert isinstance(long_jobs[0].wait(30), Finished)
    # The long prompt was read in batches of at most n_batch = 64 tokens, and the stream got
    # a token from every decode meanwhile: it never waited for the whole prompt.
    assert at_delta == list(range(at_delta[0], at_delta[0] + 60))
    assert max(model.batch_sizes) == 64 and sum(model.batch_sizes) >= 1000 + 60
    assert_cache_consistent(worker, model)


def test_cancelling_one_answer_leaves_the_others_whole(
    scripted: tuple[EngineWorker, ScriptedModel],
) -> None:
    worker, model = scripted
    seen: list[int] = []
    jobs: list[Job] = []

    def sink(e: Event) -> None:  # the middle job cancels itself at its fifth token
        if isinstance(e, Delta):
            seen.append(1)
            if len(seen) == 5:
                jobs[1].cancel()

    for i in range(3):
        request = CompletionRequest(f"p{i}", SamplingParams(max_tokens=40))
        jobs.append(worker.submit(request, sink if i == 1 else None))
    finals = [j.wait(30) for j in jobs]
    assert [f.reason for f in finals] == ["length", "cancelled", "length"]
    assert finals[0].usage.completion_tokens == finals[2].usage.completion_tokens == 40
    assert finals[1].usage.completion_tokens == 5
    assert [len(collect(j)) for j in (jobs[0], jobs[2])] == [42, 42]  # Started, 40, Finished
    assert_cache_consistent(worker, model)


def test_more_jobs_than_slots_wait_for_a_free_slot(
    scripted: tuple[EngineWorker, ScriptedModel],
) -> None:
    worker, model = scripted
    jobs = [
        worker.submit(CompletionRequest(f"p{i}", SamplingParams(max_tokens=5))) for i in range(10)
    ]
    assert all(isinstance(j.wait(30), Finished) for j in jobs)
    assert model.most_at_once <= 4
    assert_cache_consistent(worker, model)


def test_a_follow_up_reuses_the_cached_prefix_of_any_earlier_request(
    scripted: tuple[EngineWorker, ScriptedModel],
) -> None:
    worker, model = scripted
    chat_a = "a" * 4 * 300
    chat_b = "b" * 4 * 300
    first = worker.submit(CompletionRequest(chat_a, SamplingParams(max_tokens=3))).wait(30)
    worker.submit(CompletionRequest(chat_b, SamplingParams(max_tokens=3))).wait(30)
    again = worker.submit(CompletionRequest(chat_a + "more", SamplingParams(max_tokens=3)))
    final = again.wait(30)
    assert first.usage.cached_tokens == 0
    assert final.usage.cached_tokens == 300  # all of chat A's prompt, although B came between
    assert_cache_consistent(worker, model)


def test_a_full_cache_evicts_idle_conversations_first() -> None:
    worker, model = worker_with(
        kv_cells=600, params=LoadParams(n_ctx=1024, n_parallel=2, n_batch=64)
    )
    try:
        for i in range(6):  # six 250-token conversations, 600 cells
            prompt = chr(ord("a") + i) * 4 * 250
            final = worker.submit(CompletionRequest(prompt, SamplingParams(max_tokens=2))).wait(30)
            assert isinstance(final, Finished) and final.reason == "length", final
        assert model.cells_used() <= 600
        assert_cache_consistent(worker, model)
    finally:
        worker.shutdown()


def test_when_running_answers_fill_the_cache_the_newest_one_pauses_and_resumes() -> None:
    worker, model = worker_with(
        kv_cells=300, params=LoadParams(n_ctx=1024, n_parallel=2, n_batch=64)
    )
    order: list[str] = []

    def sink_for(name: str) -> Callable[[Event], None]:
        def sink(e: Event) -> None:
            if isinstance(e, Finished | Failed):
                order.append(name)

        return sink

    try:
        a = worker.submit(
            CompletionRequest("a" * 4 * 100, SamplingParams(max_tokens=150)), sink_for("a")
        )
        b = worker.submit(
            CompletionRequest("b" * 4 * 100, SamplingParams(max_tokens=150)), sink_for("b")
        )
        fa, fb = a.wait(30), b.wait(30)
        # both fit for a while; then the newest pauses (its cells freed), the other finishes,
        # and the paused one reads what it held again and writes the rest of its answer
        assert (fa.reason, fb.reason) == ("length", "length")
        assert fa.usage.completion_tokens == fb.usage.completion_tokens == 150
        assert isinstance(fa, Finished) and isinstance(fb, Finished)
        assert fa.result == fb.result == "word " * 150
        assert order == ["a", "b"]
        assert model.cells_used() <= 300
        assert_cache_consistent(worker, model)
    finally:
        worker.shutdown()


def test_an_answer_alone_that_fills_the_cache_stops_as_too_long() -> None:
    worker, model = worker_with(
        kv_cells=200, params=LoadParams(n_ctx=1024, n_parallel=2, n_batch=64)
    )
    try:
        final = worker.submit(
            CompletionRequest("a" * 4 * 100, SamplingParams(max_tokens=150))
        ).wait(30)
        assert isinstance(final, Finished) and final.reason == "length"
        assert 0 < final.usage.completion_tokens < 150
        assert_cache_consistent(worker, model)
    finally:
        worker.shutdown()


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.tuples(
            st.integers(min_value=1, max_value=200),  # prompt length (tokens)
            st.integers(min_value=1, max_value=30),  # max_tokens
            st.sampled_from(["run", "cancel_queued", "cancel_running", "eog"]),
            st.integers(min_value=0, max_value=3),  # which shared prefix
        ),
        min_size=1,
        max_size=12,
    ),
    st.integers(min_value=1, max_value=4),
)
def test_mixed_jobs_each_get_one_final_event_and_leak_no_cache(
    plan: list[tuple[int, int, str, int]], parallel: int
) -> None:
    worker, model = worker_with(
        kv_cells=900, params=LoadParams(n_ctx=2048, n_parallel=parallel, n_batch=32)
    )
    try:
        finals: dict[str, list[Event]] = {}
        jobs: list[tuple[Job, str]] = []
        for length, max_tokens, action, prefix in plan:
            prompt = ("abcd"[prefix] * 4 * 50 + "z" * 4 * length)[: 4 * (50 + length)]
            sampling = SamplingParams(max_tokens=max_tokens)
            events: list[Event] = []
            lock = threading.Lock()

            def sink(e: Event, events: list[Event] = events, lock: threading.Lock = lock) -> None:
                with lock:
                    events.append(e)

            job = worker.submit(CompletionRequest(prompt, sampling), sink)
            finals[job.id] = events
            jobs.append((job, action))
            if action == "cancel_queued":
                job.cancel()
        for job, action in jobs:
            if action == "cancel_running":
                job.cancel()
        for job, _ in jobs:
            job.wait(30)
        for job, action in jobs:
            events = finals[job.id]
            last = [e for e in events if isinstance(e, Finished | Failed)]
            assert len(last) == 1 and events[-1] is last[0], (action, events[-3:])
            if action == "run":
                assert isinstance(last[0], Finished) and last[0].reason in ("length", "stop")
        assert_cache_consistent(worker, model)
    finally:
        worker.shutdown()


def test_the_apps_chat_goes_ahead_of_waiting_api_requests() -> None:
    worker, _model = worker_with(params=LoadParams(n_ctx=4096, n_parallel=1, n_batch=64))
    order: list[str] = []
    lock = threading.Lock()
    gate = threading.Event()
    holding = threading.Event()

    def sink_for(name: str) -> Callable[[Event], None]:
        def sink(e: Event) -> None:
            if isinstance(e, Started):
                with lock:
                    order.append(name)
                if name == "running":
                    holding.set()
                    gate.wait(10)  # holds the only slot until every job is queued

        return sink

    try:
        jobs = [worker.submit(CompletionRequest("api", SamplingParams(max_tokens=2)),
                              sink_for("running"))]  # fmt: skip
        assert holding.wait(10)
        for name in ("api-1", "api-2"):
            request = CompletionRequest(name, SamplingParams(max_tokens=2))
            jobs.append(worker.submit(request, sink_for(name)))
        chat = ChatRequest([{"role": "user", "content": "hi"}], SamplingParams(max_tokens=2))
        chat.priority = 1
        jobs.append(worker.submit(chat, sink_for("app")))
        gate.set()
        assert all(isinstance(j.wait(30), Finished) for j in jobs)
        assert order == ["running", "app", "api-1", "api-2"]
    finally:
        worker.shutdown()


@pytest.mark.parametrize("ram_mb", [0, 64])
def test_a_conversation_evicted_from_the_context_comes_back_from_ram(ram_mb: int) -> None:
    worker, model = worker_with(
        params=LoadParams(n_ctx=8192, n_parallel=1, n_batch=64, cache_ram_mb=ram_mb)
    )
    try:
        # more conversations than the context has sequences: the first one is evicted
        chats = [chr(ord("a") + i) * 4 * 200 for i in range(model.n_seq + 2)]
        for chat in chats:
            worker.submit(CompletionRequest(chat, SamplingParams(max_tokens=2))).wait(30)
        cache = worker._state.schedulers[model.model_id].cache
        assert all(e.tokens[:1] != chats[0][:1] for e in cache.entries)  # not in the context
        final = worker.submit(CompletionRequest(chats[0] + "more", SamplingParams(max_tokens=2)))
        usage = final.wait(30).usage
        if ram_mb:
            assert usage.cached_tokens == 200 and cache.restored == 1
            assert cache.ram is not None and cache.ram.used <= cache.ram.budget
        else:
            assert usage.cached_tokens == 0 and cache.ram is None
        assert_cache_consistent(worker, model)
    finally:
        worker.shutdown()


def test_the_ram_tier_drops_the_least_recently_used_past_its_budget() -> None:
    ram = RamTier(budget=250)
    for i, tokens in enumerate(([1] * 80, [2] * 80, [3] * 80)):
        ram.add(SavedSeq(tokens, bytes(100), 0, last_used=i))
    assert [s.tokens[0] for s in ram.saved] == [2, 3] and ram.used == 200
    saved, n = ram.best([3] * 90, limit=89)
    assert saved is ram.saved[1] and n == 80
    ram.add(SavedSeq([4] * 80, bytes(300), 0, last_used=9))  # bigger than the budget: not kept
    assert ram.used == 200


@pytest.mark.parametrize("room", [True, False])
def test_a_restore_from_ram_that_finds_no_room_leaves_the_cache_consistent(room: bool) -> None:
    worker, model = worker_with(params=LoadParams(n_ctx=8192, n_parallel=1, n_batch=64))
    try:
        chats = [chr(ord("a") + i) * 4 * 200 for i in range(model.n_seq + 2)]
        for chat in chats:
            worker.submit(CompletionRequest(chat, SamplingParams(max_tokens=2))).wait(30)
        if not room:  # as llama_state_seq_set_data answers when the KV cache is full
            model.seq_restore = lambda seq, data: False  # type: ignore[method-assign]
        final = worker.submit(CompletionRequest(chats[0] + "more", SamplingParams(max_tokens=2)))
        assert final.wait(30).usage.cached_tokens == (200 if room else 0)
        assert_cache_consistent(worker, model)
    finally:
        worker.shutdown()
