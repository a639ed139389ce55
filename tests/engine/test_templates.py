from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from jinja2 import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from app.engine.template_sandbox import TemplateLimits
from app.engine.templates import FALLBACK_STOP, ChatTemplate, ChatTemplateError
from app.engine.types import (
    BadRequestError,
    ChatMessage,
    ChatRequest,
    CompletionRequest,
    Failed,
    Finished,
    LoadParams,
    SamplingParams,
    content_text,
)
from app.engine.worker import EngineWorker
from tests.helpers.real_chat_templates import GEMMA_2, LLAMA_3_1, QWEN_2_5
from tests.helpers.sdist_templates import template
from tests.helpers.toolcall_families import TOOLS

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def test_model_template_renders_messages() -> None:
    t = ChatTemplate(CHATML)
    out = t.render([{"role": "user", "content": "Hi"}])
    assert out.text == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    assert not out.uses_fallback and out.stop == ()


def test_template_gets_bos_tools_and_helpers() -> None:
    src = "{{ bos_token }}{{ tools | tojson }}{{ strftime_now('%Y') | length }}"
    out = ChatTemplate(src, bos_token="<s>").render(
        [{"role": "user", "content": "x"}], tools=[{"a": "é"}]
    )
    assert out.text == '<s>[{"a": "é"}]4'


def test_fallback_transcript() -> None:
    out = ChatTemplate(None).render(
        [
            {"role": "system", "content": "Be kind."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello!"},
            {"role": "user", "content": "Bye"},
        ]
    )
    assert out.text == "Be kind.\n\nUser: Hi\nAssistant: Hello!\nUser: Bye\nAssistant:"
    assert out.uses_fallback and out.stop == FALLBACK_STOP


def test_the_fallback_reads_the_text_of_content_parts() -> None:
    """Content parts (as a provider's messages carry them) give their text parts, one per line."""
    parts: list[dict[str, Any]] = [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        {"type": "text", "text": "Answer briefly."},
    ]
    out = ChatTemplate(None).render([{"role": "user", "content": parts}])
    assert out.text == "User: What is this?\nAnswer briefly.\nAssistant:"
    assert content_text(parts) == "What is this?\nAnswer briefly."
    assert content_text(None) == "" and content_text("plain") == "plain"


@pytest.mark.parametrize(
    "evil",
    [
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "{{ messages.clear() }}",
        "{{ messages[0].update({}) }}",
        "{{ cycler.__init__.__globals__.os }}",
    ],
)
def test_templates_run_sandboxed(evil: str) -> None:
    with pytest.raises(BadRequestError):
        ChatTemplate(evil).render([{"role": "user", "content": "x"}])


def test_raise_exception_in_template_is_a_clear_error() -> None:
    t = ChatTemplate("{{ raise_exception('Only user and assistant roles are supported!') }}")
    with pytest.raises(BadRequestError, match="roles are supported"):
        t.render([{"role": "user", "content": "x"}])


def test_empty_messages_rejected() -> None:
    with pytest.raises(BadRequestError):
        ChatTemplate(None).render([])


# ---- real templates render exactly as in a plain sandbox --------------------------------

CHAT: list[ChatMessage] = [
    {"role": "user", "content": "Hi there"},
    {"role": "assistant", "content": "Hello! How can I help?"},
    {"role": "user", "content": "What is 2+2?"},
]


def _plain_sandbox_render(source: str, messages: list[ChatMessage], tools: Any) -> str:
    """What Ember rendered before templates had a budget (with today's date as llama.cpp
    gives it, which Llama 3.x reads)."""
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"]
    )
    env.filters["tojson"] = lambda v, indent=None: json.dumps(v, ensure_ascii=False, indent=indent)
    env.globals["raise_exception"] = lambda message: (_ for _ in ()).throw(TemplateError(message))
    text: str = env.from_string(source).render(
        messages=messages,
        add_generation_prompt=True,
        bos_token="<s>",
        eos_token="</s>",
        tools=tools,
        date_string=datetime.now().strftime("%d %b %Y"),
    )
    return text


@pytest.mark.parametrize(
    ("source", "system", "tools"),
    [
        (QWEN_2_5, True, None),
        (QWEN_2_5, True, TOOLS),
        (LLAMA_3_1, True, None),
        (LLAMA_3_1, True, TOOLS),
        (GEMMA_2, False, None),  # Gemma 2 refuses a system message
    ],
    ids=["qwen2.5", "qwen2.5-tools", "llama3.1", "llama3.1-tools", "gemma2"],
)
def test_real_templates_render_exactly_as_before(source: str, system: bool, tools: Any) -> None:
    start: list[ChatMessage] = [{"role": "system", "content": "Be terse."}] if system else []
    messages = [*start, *CHAT]
    expected = _plain_sandbox_render(source, messages, tools)
    rendered = ChatTemplate(source, bos_token="<s>", eos_token="</s>").render(messages, tools=tools)
    assert rendered.text == expected
    assert "What is 2+2?" in rendered.text


def test_qwen_template_output() -> None:
    out = ChatTemplate(QWEN_2_5).render([{"role": "user", "content": "Hi"}])
    assert out.text == (
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
        "assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    )


def test_a_long_conversation_is_within_budget() -> None:
    """The budget grows with the input: 400 turns of 20,000 characters render."""
    messages: list[ChatMessage] = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"{i} " + "word " * 4000}
        for i in range(401)
    ]
    for source in (QWEN_2_5, LLAMA_3_1, GEMMA_2):
        text = ChatTemplate(source).render(messages).text
        assert text.count("word") == 401 * 4000


# ---- hostile templates are refused quickly, with an error that names the template ---------

USER: list[ChatMessage] = [{"role": "user", "content": "hi"}]
TOO_MUCH_WORK = "did too much work"


@pytest.mark.parametrize(
    ("source", "what"),
    [
        # loop steps
        (
            "{% for i in range(99999) %}{% for j in range(99999) %}x{% endfor %}{% endfor %}",
            "loop steps",
        ),
        (
            "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}",
            "loop steps",
        ),
        ("{% for i in range(10**9) %}{% endfor %}", "a range of over"),
        ("{% for x in [1, 2] recursive %}{{ loop([1, 2]) }}{% endfor %}", "nested over"),
        # calls: runaway and exponential recursion, cycler and namespace in loops
        ("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "nested over"),
        (
            "{% macro f(n) %}{% if n %}{{ f(n-1) }}{{ f(n-1) }}{% endif %}{% endmacro %}"
            "{{ f(40) }}",
            "loop steps",
        ),
        (
            "{% set c = cycler(1, 2) %}{% for i in range(99999) %}{% for j in range(99999) %}"
            "{% set _ = c.next() %}{% endfor %}{% endfor %}",
            "loop steps",
        ),
        (
            "{% set ns = namespace(s='ab') %}{% for i in range(60) %}{% set ns.s = ns.s ~ ns.s %}"
            "{% endfor %}{{ ns.s | length }}",
            "a text of over",
        ),
        (
            "{% set ns = namespace(s='ab') %}{% for i in range(60) %}{% set ns.s = ns.s + ns.s %}"
            "{% endfor %}",
            "a text of over",
        ),
        (
            "{% set ns = namespace(x=3) %}{% for i in range(40) %}{% set ns.x = ns.x * ns.x %}"
            "{% endfor %}",
            "a number of over",
        ),
        # sizes built by operators, filters and methods
        ("{{ 'a' * 400000000 }}", "a text of over"),
        ("{% set n = 400000000 %}{{ ('a' * n) | length }}", "a text of over"),
        ("{{ ([1] * 1000000000) | length }}", "a list of over"),
        ("{{ 2 ** 10000000000 }}", "a number of over"),
        ("{{ range(100000) | join('b' * 100000) }}", "a text of over"),
        ("{{ (['x' * 1000000] * 50000) | join }}", "a text of over"),
        ("{{ 'a' | center(1000000000) }}", "a text of over"),
        ("{{ 'a'.ljust(1000000000) }}", "a text of over"),
        ("{{ 'a\nb' | indent(1000000000) }}", "a text of over"),
        ("{{ ('a' * 100000).replace('a', 'b' * 100000) }}", "a text of over"),
        ("{{ ('a' * 100000) | replace('a', 'b' * 100000) }}", "a text of over"),
        ("{{ '{:>1000000000}'.format(1) }}", "a text of over"),
        ("{{ '{:>{w}}'.format(1, w=1000000000) }}", "a text of over"),
        ("{{ ('{0}' * 1000).format('x' * 1000000) }}", "a text of over"),
        ("{{ '%1000000000d' % 1 }}", "a text of over"),
        ("{{ '%1000000000d' | format(1) }}", "a text of over"),
        ("{{ [1] | batch(1000000000, 0) | list | length }}", "a list of over"),
        ("{{ ([[1] * 100000] * 100000) | sum(start=[]) | length }}", "a list of over"),
        ("{{ messages | tojson(indent=1000000000) }}", "indent of"),
        # output that a macro or a {% set %} block buffers before anything sees it
        (
            "{% set big = 'x' * 1000000 %}{% macro m() %}{% for i in range(99999) %}{{ big }}"
            "{% endfor %}{% endmacro %}{{ m() | length }}",
            "characters of output",
        ),
        (
            "{% set ns = namespace(s='ab') %}{% for i in range(60) %}"
            "{% set t %}{{ ns.s }}{{ ns.s }}{% endset %}{% set ns.s = t %}{% endfor %}",
            "characters of output",
        ),
    ],
)
def test_hostile_template_is_stopped_with_a_clear_error(source: str, what: str) -> None:
    # The budget each case names stops it, not the 1 s clock a busy machine can reach first
    # (test_wall_time_is_bounded covers the clock).
    limits = TemplateLimits(seconds=600)
    template = ChatTemplate(source, name="evil.gguf", limits=limits)
    with pytest.raises(ChatTemplateError, match=TOO_MUCH_WORK) as caught:
        template.render(USER)
    message = str(caught.value)
    assert message.startswith("The chat template of evil.gguf did too much work (")
    assert what in message
    assert isinstance(caught.value, BadRequestError)


def test_wall_time_is_bounded() -> None:
    """Few steps, each slow: the time budget stops it."""
    slow = "{% for i in range(90000) %}{% set _ = (range(20000) | join) | length %}{% endfor %}"
    with pytest.raises(ChatTemplateError, match=r"did too much work \(over 0.2 s\)"):
        ChatTemplate(slow, limits=TemplateLimits(seconds=0.2)).render(USER)


@pytest.mark.parametrize(
    ("source", "what"),
    [
        ("{% include 'other.j2' %}", "it loads another template ('other.j2')"),
        ("{% import 'macros.j2' as m %}", "it loads another template ('macros.j2')"),
        ("{% from 'macros.j2' import m %}", "it loads another template ('macros.j2')"),
        ("{% extends 'base.j2' %}", "it loads another template ('base.j2')"),
        ("{% include 'other.j2' ignore missing %}", "it loads another template ('other.j2')"),
    ],
)
def test_loading_another_template_is_refused(source: str, what: str) -> None:
    with pytest.raises(ChatTemplateError, match="cannot be used") as caught:
        ChatTemplate(source, name="evil.gguf").render(USER)
    assert what in str(caught.value)


@pytest.mark.parametrize(
    ("source", "error"),
    [
        ("{{ 1 / 0 }}", "ZeroDivisionError"),
        ("{{ 1 // 0 }}", "ZeroDivisionError"),
        ("{{ 2.0 ** 100000 }}", "OverflowError"),
        ("{{ 1 + 'a' }}", "TypeError"),
        ("{{ '%d' % 'a' }}", "TypeError"),
        ("{{ 'a'.split('') }}", "ValueError"),
    ],
)
def test_a_template_bug_is_a_bad_request_naming_the_template(source: str, error: str) -> None:
    with pytest.raises(ChatTemplateError) as caught:
        ChatTemplate(source, name="buggy.gguf").render(USER)
    assert str(caught.value).startswith(
        f"The chat template of buggy.gguf failed on these messages: {error}"
    )


def test_deeply_nested_input_is_a_bad_request() -> None:
    deep: Any = "x"
    for _ in range(5000):
        deep = [deep]
    messages: list[ChatMessage] = [{"role": "user", "content": "hi", "extra": deep}]  # type: ignore[typeddict-unknown-key]
    with pytest.raises(ChatTemplateError, match="RecursionError"):
        ChatTemplate("{{ messages | tojson }}").render(messages)


def test_a_template_that_does_not_compile_fails_each_render_not_the_load() -> None:
    for source in ("{% for %}", "{{ " + "(" * 5000 + "1" + ")" * 5000 + " }}", "x" * 100_001):
        template = ChatTemplate(source, name="broken.gguf")  # the model still loads
        assert not template.uses_fallback
        with pytest.raises(ChatTemplateError, match=r"^The chat template of broken\.gguf"):
            template.render(USER)


def test_rendering_goes_on_after_a_stopped_template() -> None:
    hostile = ChatTemplate(
        "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}"
    )
    good = ChatTemplate(QWEN_2_5)
    for _ in range(3):  # each render has a fresh budget: the refusals do not add up
        with pytest.raises(ChatTemplateError):
            hostile.render(USER)
        assert "<|im_start|>user\nhi<|im_end|>" in good.render(USER).text


@pytest.mark.slow
def test_the_engine_refuses_a_hostile_template_and_keeps_serving(gemma_path: Path) -> None:
    """The real engine with a model whose template loops 10^10 times: each chat request fails
    with the error (a 400 on the API), and the engine answers the next request."""
    hostile = "{% for i in range(99999) %}{% for j in range(99999) %}x{% endfor %}{% endfor %}"
    worker = EngineWorker()
    try:
        worker.load(str(gemma_path), LoadParams(n_ctx=512, chat_template=hostile)).result(120)
        greedy = SamplingParams(temperature=0, max_tokens=4)
        for _ in range(2):
            final = worker.submit(ChatRequest(list(USER), greedy)).wait(60)
            assert isinstance(final, Failed)
            assert isinstance(final.error, BadRequestError)
            assert TOO_MUCH_WORK in str(final.error)
        answer = worker.submit(CompletionRequest("The capital of France is", greedy)).wait(60)
        assert isinstance(answer, Finished) and answer.usage.completion_tokens > 0
    finally:
        worker.shutdown()


def test_hugging_faces_generation_tag_renders_its_body() -> None:
    source = (
        "{% for m in messages %}<{{ m.role }}>"
        "{% if m.role == 'assistant' %}{% generation %}{{ m.content }}{% endgeneration %}"
        "{% else %}{{ m.content }}{% endif %}</{{ m.role }}>{% endfor %}"
    )
    rendered = ChatTemplate(source).render(
        [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}],
        add_generation_prompt=False,
    )
    assert rendered.text == "<user>Hi</user><assistant>Hello</assistant>"


def test_a_template_may_append_to_its_own_lists_and_nothing_else_changes() -> None:
    """Kimi K2's templates collect ids with ``ns.ids.append(...)``: allowed, counted, and
    never a way to change the caller's messages or tools."""
    collects = ChatTemplate(
        "{%- set ns = namespace(ids=[]) -%}"
        "{%- for m in messages %}{% set _ = ns.ids.append(m.role) %}{% endfor -%}"
        "{%- set _ = messages[0].parts.append('x') -%}"
        "{%- set _ = tools[0].tags.append('y') -%}"
        "{{ ns.ids | join(',') }}|{{ messages[0].parts | length }}"
    )
    messages: list[Any] = [{"role": "user", "content": "Hi", "parts": []}]
    tools: list[dict[str, Any]] = [{"type": "function", "tags": []}]
    assert collects.render(messages, tools=tools).text == "user|1"
    assert messages[0]["parts"] == [] and tools[0]["tags"] == []  # copies were rendered
    # other mutations stay refused, and appending forever runs out of budget
    with pytest.raises(ChatTemplateError):
        ChatTemplate("{% set _ = messages.sort() %}").render([{"role": "user", "content": "Hi"}])
    forever = ChatTemplate(
        "{%- set ns = namespace(xs=[]) -%}"
        "{%- for i in range(10**9) %}{% set _ = ns.xs.append(i) %}{% endfor -%}"
    )
    with pytest.raises(ChatTemplateError, match="did too much work"):
        forever.render([{"role": "user", "content": "Hi"}])


def test_firefunction_and_llama_3_get_the_variables_llama_cpp_gives_them() -> None:
    """FireFunction v2 adds ``functions`` (the tools as JSON) and ``datetime`` to every
    prompt and fails without them; Llama 3.x says "26 Jul 2024" unless given ``date_string``.
    Both are given today's date as llama.cpp gives it."""
    tools = [
        {
            "type": "function",
            "function": {"name": "get_weather", "parameters": {"type": "object"}},
        }
    ]
    messages: list[Any] = [{"role": "user", "content": "Weather?"}]
    fire = ChatTemplate(template("fireworks-ai-llama-3-firefunction-v2"), "<s>")
    text = fire.render(messages, tools=tools).text
    assert '"name": "get_weather"' in text.split("Weather?")[0]
    assert f"Today is {datetime.now().strftime('%b %d %Y')}." in text
    assert "Weather?" in fire.render(messages).text  # no tools: an empty list, still a chat

    llama = ChatTemplate(template("meta-llama-Llama-3.1-8B-Instruct"), "<s>")
    assert f"Today Date: {datetime.now().strftime('%d %b %Y')}" in llama.render(messages).text
