from __future__ import annotations

import pytest

from app.engine.templates import FALLBACK_STOP, ChatTemplate
from app.engine.types import BadRequestError

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


@pytest.mark.parametrize(
    "evil",
    [
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "{{ messages.append(1) }}",
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
