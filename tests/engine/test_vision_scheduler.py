"""Images through the engine's scheduler, with the real test model and a built projector.

The model is loaded with the tiny Gemma 3 projector of tests/helpers/projector.py (random
weights). What these tests prove: a chat carrying an image is admitted, its image encoded and
decoded as a batch of embeddings of its own between the text runs, and the answer generated,
alone or beside a text-only chat; usage counts the image's positions; the prefix cache reuses
a conversation's image on a follow-up and never matches a different image past its start; a
cancel around the (unabortable) encode leaves the KV cache consistent. What they cannot prove:
that the answer describes the image (the weights are noise).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine import scheduler as scheduler_module
from app.engine.image_bounds import inspect_image
from app.engine.media import MEDIA_MARKER, ImageItem, MediaPrompt, pseudo_token
from app.engine.types import (
    ChatMessage,
    ChatRequest,
    Event,
    Failed,
    Finished,
    LoadedModel,
    LoadParams,
    SamplingParams,
    Started,
)
from app.engine.worker import EngineWorker, Job
from tests.helpers.engine_checks import NO_END, assert_no_leak, model_of
from tests.helpers.images import png
from tests.helpers.projector import IMAGE_TOKENS, write_projector

GREEDY = SamplingParams(temperature=0.0, max_tokens=4, logit_bias=NO_END)
QUESTION = "What is in this picture?"


@pytest.fixture(scope="module")
def loaded(
    worker: EngineWorker, gemma_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> LoadedModel:
    mmproj = write_projector(tmp_path_factory.mktemp("mmproj") / "mmproj-test.gguf")
    params = LoadParams(n_ctx=4096, flash_attn=False, mmproj=str(mmproj))
    result: LoadedModel = worker.load(str(gemma_path), params).result(120)
    return result


def image_chat(image: bytes, *history: ChatMessage) -> ChatRequest:
    first: ChatMessage = {"role": "user", "content": f"{MEDIA_MARKER}{QUESTION}"}
    return ChatRequest(messages=[first, *history], sampling=GREEDY, images=(image,))


def finished(job: Job) -> Finished:
    final = job.wait(300)
    assert isinstance(final, Finished), final
    return final


def test_the_loaded_model_says_it_takes_images(loaded: LoadedModel) -> None:
    assert loaded.vision


def test_a_chat_with_an_image_is_answered_and_counts_the_images_positions(
    worker: EngineWorker, loaded: LoadedModel
) -> None:
    text_only = ChatRequest(
        messages=[{"role": "user", "content": QUESTION}], sampling=GREEDY, model=loaded.model_id
    )
    plain = finished(worker.submit(text_only))
    with_image = finished(worker.submit(image_chat(png(64, 48))))
    assert with_image.reason == "length" and with_image.result
    # the image's 4 positions, plus the text mtmd puts around it (<start_of_image> ...)
    assert with_image.usage.prompt_tokens >= plain.usage.prompt_tokens + IMAGE_TOKENS
    assert with_image.usage.completion_tokens == GREEDY.max_tokens
    assert_no_leak(worker, sliding_window=False)


def test_the_prompt_holds_one_pseudo_token_per_image_position(
    worker: EngineWorker, loaded: LoadedModel
) -> None:
    image = png(40, 40, 3)
    sha = inspect_image(image).sha256
    finished(worker.submit(image_chat(image)))
    scheduler = worker._state.schedulers[loaded.model_id]
    kept = [e.tokens for e in scheduler.cache.entries if pseudo_token(sha, 0) in e.tokens]
    assert kept, "the image's positions are cached under its own keys"
    tokens = kept[0]
    start = tokens.index(pseudo_token(sha, 0))
    assert tokens[start : start + IMAGE_TOKENS] == [pseudo_token(sha, k) for k in range(4)]
    assert all(t >= 0 for t in tokens[:start] + tokens[start + IMAGE_TOKENS :])
    # exactly one BOS: the rendered template's own is not doubled by mtmd
    model = model_of(worker)
    assert tokens[0] == model.bos and tokens[1] != model.bos


def test_a_chat_with_an_image_and_one_without_both_finish_together(
    worker: EngineWorker, loaded: LoadedModel
) -> None:
    alone = finished(worker.submit(image_chat(png(64, 48, 5))))
    for entry in worker._state.schedulers[loaded.model_id].cache.entries:
        model_of(worker).seq_rm(entry.seq)  # read both prompts afresh, together
        entry.tokens = []
    text = ChatRequest(
        messages=[{"role": "user", "content": "Name three colours."}], sampling=GREEDY
    )
    jobs = [worker.submit(image_chat(png(64, 48, 5))), worker.submit(text)]
    results = [finished(j) for j in jobs]
    assert all(r.reason in ("stop", "length") and r.usage.completion_tokens for r in results)
    # the same first token as alone (later ones may turn at a near-tie: the weights are noise
    # and batches sum in another order, see test_batching)
    assert results[0].result[:1] == alone.result[:1]
    assert results[0].usage.cached_tokens == 0
    assert results[0].usage.prompt_tokens == alone.usage.prompt_tokens
    assert_no_leak(worker, sliding_window=False)


def test_a_follow_up_reuses_the_image_and_a_different_image_stops_at_its_start(
    worker: EngineWorker, loaded: LoadedModel
) -> None:
    image = png(48, 48, 7)
    sha = inspect_image(image).sha256
    first = finished(worker.submit(image_chat(image)))
    scheduler = worker._state.schedulers[loaded.model_id]
    (tokens,) = [e.tokens for e in scheduler.cache.entries if pseudo_token(sha, 0) in e.tokens]
    image_end = tokens.index(pseudo_token(sha, 0)) + IMAGE_TOKENS
    start = image_end - IMAGE_TOKENS

    history: list[ChatMessage] = [
        {"role": "assistant", "content": first.result},
        {"role": "user", "content": "And the colours?"},
    ]
    follow = finished(worker.submit(image_chat(image, *history)))
    assert follow.usage.cached_tokens > image_end  # the image was not encoded again

    other = finished(worker.submit(image_chat(png(48, 48, 8), *history)))
    assert 0 < other.usage.cached_tokens <= start  # the text before it, never past its start
    assert_no_leak(worker, sliding_window=False)


def test_a_prefix_ending_inside_an_image_is_rounded_down_to_its_start() -> None:
    items = [ImageItem(5, 4, 1, "ab" * 32, True), ImageItem(12, 4, 3, "cd" * 32, True)]
    items_prompt = MediaPrompt(list(range(20)), items, None)  # type: ignore[arg-type]
    assert [items_prompt.round_down(n) for n in (5, 6, 8, 9, 10, 13, 16, 17)] == [
        5,
        5,
        5,
        9,
        10,
        12,
        16,
        17,
    ]
    assert items_prompt.text_run(0, 20) == 5 and items_prompt.text_run(9, 11) == 3
    assert items_prompt.text_run(16, 4) == 4


def test_a_cancel_while_the_image_is_encoded_is_clean(
    worker: EngineWorker, loaded: LoadedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Encoding cannot be aborted: a cancel that arrives during it ends the job right after,
    before the image is decoded, and nothing of it stays in the KV cache."""
    jobs: list[Job] = []
    encode = MediaPrompt.encode

    def encode_then_cancel(self: MediaPrompt, item: object) -> object:
        out = encode(self, item)  # type: ignore[arg-type]
        jobs[0].cancel()
        return out

    monkeypatch.setattr(MediaPrompt, "encode", encode_then_cancel)
    jobs.append(worker.submit(image_chat(png(32, 32, 9))))
    final = jobs[0].wait(300)
    assert final.reason == "cancelled"
    monkeypatch.undo()
    assert_no_leak(worker, sliding_window=False)

    # a cancel as the job starts ends it before its image is encoded
    started: list[Job] = []

    def cancel_on_start(event: Event) -> None:
        if isinstance(event, Started):
            started[0].cancel()

    started.append(worker.submit(image_chat(png(32, 32, 10)), cancel_on_start))
    assert started[0].wait(300).reason == "cancelled"
    assert_no_leak(worker, sliding_window=False)
    # and the model answers afterwards
    after = finished(worker.submit(image_chat(png(32, 32, 9))))
    assert after.reason == "length" and after.usage.completion_tokens == GREEDY.max_tokens


def test_a_bad_image_fails_the_job_with_a_clear_error(
    worker: EngineWorker, loaded: LoadedModel
) -> None:
    final = worker.submit(image_chat(b"GIF89a" + bytes(100))).wait(300)
    assert isinstance(final, Failed)
    assert "not a PNG or JPEG" in final.error.message
    two_markers = ChatRequest(
        messages=[{"role": "user", "content": f"{MEDIA_MARKER}{MEDIA_MARKER}hi"}],
        sampling=GREEDY,
        images=(png(16, 16),),
    )
    final = worker.submit(two_markers).wait(300)
    assert isinstance(final, Failed) and "2 image marker" in final.error.message
    assert_no_leak(worker, sliding_window=False)


def test_a_cancel_mid_prompt_after_the_image_spares_the_chat_beside_it(
    worker: EngineWorker, loaded: LoadedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An image chat cancelled after its image was decoded, while the long text after it is
    still being read in chunks, ends cleanly; a text chat generating beside it finishes as it
    would alone (its first token: later ones may turn at a near-tie, see above)."""
    sampling = SamplingParams(temperature=0.0, max_tokens=8, logit_bias=NO_END)
    text = ChatRequest(
        messages=[{"role": "user", "content": "Name three colours."}], sampling=sampling
    )
    alone = finished(worker.submit(text))
    long_text = " ".join(f"word{i}" for i in range(900))  # several prefill chunks after the image
    image_job: list[Job] = []
    decoded: list[int] = []
    real_decode = scheduler_module.decode_image

    def decode_then_cancel(*args: object, **kwargs: object) -> tuple[int, int]:
        out = real_decode(*args, **kwargs)  # type: ignore[arg-type]
        decoded.append(out[0])
        image_job[0].cancel()
        return out

    monkeypatch.setattr(scheduler_module, "decode_image", decode_then_cancel)
    other = worker.submit(text)
    image_job.append(
        worker.submit(
            ChatRequest(
                messages=[{"role": "user", "content": f"{MEDIA_MARKER}{long_text}"}],
                sampling=sampling,
                images=(png(32, 32, 11),),
            )
        )
    )
    assert image_job[0].wait(300).reason == "cancelled"
    beside = finished(other)
    assert decoded == [0]  # the image itself was decoded before the cancel
    assert beside.reason in ("stop", "length") and beside.usage.completion_tokens
    assert beside.result[:1] == alone.result[:1], (alone, beside)
    monkeypatch.undo()
    assert_no_leak(worker, sliding_window=False)
