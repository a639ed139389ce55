"""From API request bodies to engine requests (and the checks that need the loaded model)."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from app.engine import types as engine
from app.engine.constraints import grammar_for
from app.engine.media import NO_PROJECTOR
from app.engine.types import BadRequestError, ChatMessage, LoadedModel, SamplingParams
from app.server import schemas
from app.server.catalog import ModelMeta
from app.server.errors import APIError
from app.server.images import decode_images
from app.server.output import ChatOutput
from app.server.reasoning import opens_think
from app.server.toolcalls import GENERIC, ToolFormat, format_for, lazy_grammar
from app.server.toolcalls import render as tool_render
from app.server.tools import ToolMode, call_schema, template_supports_tools, tools_prompt

log = logging.getLogger(__name__)

# Any JSON object; whitespace is bounded so a small model cannot pad forever.
JSON_OBJECT_GBNF = r"""
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9]{1,4})? ws
ws     ::= | " " | "\n" [ \t]{0,20}
"""

COMPLETIONS_DEFAULT_MAX_TOKENS = 16  # OpenAI's default for /v1/completions

# A token is at most this many characters (Gemma 3's longest is 31), so a prompt longer than
# the context times this cannot fit. It is refused before the engine thread renders and
# tokenizes it: 30 MB of text held every answer (the app's chats too) for 20 s there, and
# 200,000 messages for over 3 minutes. Each message takes at least one token as well.
MAX_CHARS_PER_TOKEN = 256
# and an embedding input past EMBED_MAX_TOKENS (app/engine/llamacpp.py) tokens, the same way
EMBED_MAX_CHARS = 8192 * MAX_CHARS_PER_TOKEN


def _check_prompt_size(chars: int, messages: int, model: LoadedModel, param: str) -> None:
    n_ctx = model.n_ctx
    if messages <= n_ctx and chars <= n_ctx * MAX_CHARS_PER_TOKEN:
        return
    what = f"{messages:,} messages" if messages > n_ctx else f"{chars:,} characters"
    raise APIError(
        400,
        f"The prompt is {what}: more than a context of {n_ctx:,} tokens can hold. Shorten the "
        "conversation or load the model with a larger context.",
        param=param,
        code="context_length_exceeded",
    )


def _check_common(body: schemas.SamplingBody) -> None:
    """Checks shared by chat and completions that pydantic cannot make alone."""
    if body.n is not None and body.n > 1:
        raise APIError(
            400, "Only n=1 is supported: send one request per choice you need.", param="n"
        )
    if body.stream_options is not None and not body.stream:
        raise APIError(
            400,
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
            param="stream_options",
        )


def _check_vocabulary(body: schemas.SamplingBody, meta: ModelMeta) -> None:
    if body.logit_bias and meta.vocab_size:
        for key in body.logit_bias:
            if int(key) >= meta.vocab_size:
                raise APIError(
                    400,
                    f"Invalid 'logit_bias': token id {key} is out of range; this model's "
                    f"vocabulary has {meta.vocab_size} tokens (ids 0 to {meta.vocab_size - 1}).",
                    param="logit_bias",
                    code="invalid_value",
                )


def sampling(
    body: schemas.SamplingBody,
    *,
    max_tokens: int | None,
    grammar: str | None = None,
    json_schema: dict[str, Any] | None = None,
) -> SamplingParams:
    d = SamplingParams()
    mirostat = body.mirostat if body.mirostat is not None else body.mirostat_mode

    def pick(value: Any, default: Any) -> Any:
        return default if value is None else value

    return SamplingParams(
        temperature=pick(body.temperature, d.temperature),
        top_p=pick(body.top_p, d.top_p),
        top_k=pick(body.top_k, d.top_k),
        min_p=pick(body.min_p, d.min_p),
        typical_p=pick(body.typical_p, d.typical_p),
        repeat_penalty=pick(body.repeat_penalty, d.repeat_penalty),
        repeat_last_n=pick(body.repeat_last_n, d.repeat_last_n),
        presence_penalty=pick(body.presence_penalty, d.presence_penalty),
        frequency_penalty=pick(body.frequency_penalty, d.frequency_penalty),
        seed=body.seed,
        max_tokens=max_tokens,
        stop=body.stops(),
        mirostat_mode=pick(mirostat, d.mirostat_mode),
        mirostat_tau=pick(body.mirostat_tau, d.mirostat_tau),
        mirostat_eta=pick(body.mirostat_eta, d.mirostat_eta),
        logit_bias={int(k): float(v) for k, v in body.logit_bias.items()}
        if body.logit_bias
        else None,
        grammar=grammar if grammar is not None else body.grammar,
        json_schema=json_schema,
    )


# ---- chat -----------------------------------------------------------------------------------


@dataclass(slots=True)
class ChatPlan:
    """What the chat route submits, and how to read the answer."""

    request: engine.ChatRequest
    tool_mode: ToolMode = "none"
    tool_names: frozenset[str] = frozenset()
    reasoning_open: bool = False
    constrained: bool = False  # response_format or a forced call: no reasoning to split
    tool_format: ToolFormat = GENERIC  # how the model writes calls (app.server.toolcalls)
    tool_schemas: Mapping[str, Any] = field(default_factory=dict)  # name -> parameters
    parallel_calls: bool = True  # False: one call at most (``parallel_tool_calls: false``)


def chat_output(plan: ChatPlan) -> ChatOutput:
    """What reads the answer of ``plan``'s request (content, reasoning, tool calls): every
    protocol's adapter makes its own from here."""
    return ChatOutput(
        tool_mode=plan.tool_mode,
        tool_names=plan.tool_names,
        reasoning=not plan.constrained,
        reasoning_open=plan.reasoning_open,
        tool_format=plan.tool_format,
        tools=plan.tool_schemas or None,
        parallel_calls=plan.parallel_calls,
    )


def tool_format(template: str | None) -> ToolFormat:
    """The format a model with chat template ``template`` writes calls in."""
    return format_for(template)


def _lazy_tool_grammar(
    fmt: ToolFormat, functions: list[dict[str, Any]], many: bool
) -> tuple[str | None, tuple[str, ...]]:
    """The grammar that constrains ``auto`` calls once one opens. Tools whose schemas are too
    large for a grammar go without one (the calls are still read): that is no reason to
    refuse the request."""
    try:
        return lazy_grammar(fmt, functions, many)
    except BadRequestError as e:
        log.info("tool calls go without a grammar: %s", e.message)
        return None, ()


def tool_mode(body: schemas.ChatCompletionRequest) -> tuple[ToolMode, str | None]:
    choice = body.tool_choice
    if isinstance(choice, schemas.NamedToolChoice):
        names = {t.function.name for t in body.tools or []}
        if choice.function.name not in names:
            raise APIError(
                400,
                f"Invalid 'tool_choice': function '{choice.function.name}' is not in 'tools'.",
                param="tool_choice",
            )
        return "named", choice.function.name
    if choice is not None and not body.tools:
        raise APIError(
            400,
            "Invalid 'tool_choice': 'tool_choice' is only allowed when 'tools' are given.",
            param="tool_choice",
        )
    if not body.tools or choice == "none":
        return "none", None
    return ("required" if choice == "required" else "auto"), None


def check_chat(body: schemas.ChatCompletionRequest) -> None:
    """What can be refused before a model is resolved (and maybe loaded)."""
    _check_common(body)
    if body.logprobs:
        raise APIError(400, "logprobs are not supported by this server.", param="logprobs")
    tool_mode(body)
    _response_format(body.response_format)
    decode_images(body.messages)  # a bad image is refused before a model is loaded for it


Constraint = tuple[str | None, dict[str, Any] | None, str]  # GBNF, JSON schema, the param


def chat_constraint(body: schemas.ChatCompletionRequest) -> Constraint:
    """What constrains a chat answer: a forced call's schema, else the response format's
    grammar or schema, else the body's own ``grammar`` (each with the parameter it came from)."""
    mode, named = tool_mode(body)
    if mode in ("required", "named"):
        functions = [t.function.model_dump(exclude_none=True) for t in body.tools or []]
        chosen = [f for f in functions if named is None or f["name"] == named]
        return None, call_schema(chosen), "tools"
    grammar, schema = _response_format(body.response_format)
    if grammar is not None or schema is not None:
        return grammar, schema, "response_format"
    return body.grammar, None, "grammar"


def check_constraint(constraint: Constraint) -> None:
    """Refuse a grammar or schema that is invalid or too large for llama.cpp (a 400 naming
    what and the limit), before a model is resolved or a job queued. Converting a schema can
    take milliseconds: call it off the event loop. The result is cached for the engine."""
    grammar, schema, param = constraint
    if not grammar and schema is None:
        return
    try:
        grammar_for(SamplingParams(grammar=grammar, json_schema=schema))
    except BadRequestError as e:
        raise APIError(400, e.message, param=param, code="invalid_value") from None


def plan_chat(body: schemas.ChatCompletionRequest, model: LoadedModel, meta: ModelMeta) -> ChatPlan:
    """The engine request for a body that passed :func:`check_chat`."""
    _check_vocabulary(body, meta)
    mode, _named = tool_mode(body)
    functions = [t.function.model_dump(exclude_none=True) for t in body.tools or []]
    tools_for_template = [t.model_dump(exclude_none=True) for t in body.tools or []]
    chars = sum(_message_chars(m) for m in body.messages) + len(json.dumps(tools_for_template))
    _check_prompt_size(chars, len(body.messages), model, "messages")
    grammar, schema, source = chat_constraint(body)
    if source == "grammar":
        grammar = None  # sampling() takes the body's own grammar itself
    template = model.chat_template
    native_tools = template_supports_tools(template)
    fmt = tool_format(template)
    messages = _chat_messages(body.messages, template, fmt)
    if mode != "none" and not native_tools:
        describe = fmt.tools_prompt or tools_prompt
        messages = _with_system(messages, describe(tools_for_template))
    images = decode_images(body.messages)
    if images and not model.vision:
        raise APIError(
            400,
            f"{NO_PROJECTOR} The model `{model.model_id}` was loaded without one.",
            param="messages",
            code="model_not_vision",
        )
    prediction = body.prediction.text() if body.prediction is not None else None
    if prediction is not None and len(prediction) > model.n_ctx * MAX_CHARS_PER_TOKEN:
        raise APIError(
            400,
            f"The prediction is {len(prediction):,} characters: more than an answer in a "
            f"context of {model.n_ctx:,} tokens can be. Send the text the answer should be "
            "close to, or leave `prediction` out.",
            param="prediction",
            code="context_length_exceeded",
        )
    max_tokens = body.max_completion_tokens or body.max_tokens
    params = sampling(body, max_tokens=max_tokens, grammar=grammar, json_schema=schema)
    if mode == "auto" and params.grammar is None and params.json_schema is None:
        lazy, triggers = _lazy_tool_grammar(fmt, functions, body.parallel_tool_calls is not False)
        if lazy is not None:
            params = replace(params, grammar=lazy, grammar_triggers=triggers)
    request = engine.ChatRequest(
        messages=messages,
        sampling=params,
        model=model.model_id,
        tools=tools_for_template if mode != "none" and native_tools else None,
        images=images,
        reasoning_effort=body.reasoning_effort,
        thinking_budget=body.thinking_budget_tokens,
        # the family's markers are often control tokens: rendered, so its reader sees them
        special_tokens=mode != "none" or fmt.own_reasoning,
        prediction=prediction or None,
    )
    return ChatPlan(
        request=request,
        tool_mode=mode,
        tool_names=frozenset(f["name"] for f in functions),
        reasoning_open=opens_think(template, body.reasoning_effort),
        constrained=grammar is not None or schema is not None,
        tool_format=fmt,
        tool_schemas={f["name"]: f.get("parameters") or {} for f in functions},
        parallel_calls=body.parallel_tool_calls is not False,
    )


def _response_format(
    rf: schemas.TextFormat | schemas.JsonObjectFormat | schemas.JsonSchemaFormat | None,
) -> tuple[str | None, dict[str, Any] | None]:
    if isinstance(rf, schemas.JsonObjectFormat):
        return JSON_OBJECT_GBNF, None
    if isinstance(rf, schemas.JsonSchemaFormat):
        schema = rf.json_schema.schema_
        if not schema:
            raise APIError(
                400,
                "Invalid 'response_format.json_schema.schema': a JSON schema is required.",
                param="response_format.json_schema.schema",
            )
        return None, schema
    return None, None


def _chat_messages(
    messages: list[schemas.Message], template: str | None, fmt: ToolFormat = GENERIC
) -> list[ChatMessage]:
    """The messages for the model's template (earlier calls shaped for it: see
    :func:`app.server.toolcalls.render.for_template`)."""
    out: list[ChatMessage] = []
    for m in messages:
        role = "system" if m.role == "developer" else "tool" if m.role == "function" else m.role
        msg: ChatMessage = {"role": role, "content": m.text()}
        if m.name:
            msg["name"] = m.name
        if m.tool_call_id:
            msg["tool_call_id"] = m.tool_call_id
        if m.tool_calls:
            msg["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.function.name, "arguments": c.function.arguments},
                }
                for c in m.tool_calls
            ]
        out.append(msg)
    return tool_render.for_template(out, template, fmt)


def _message_chars(message: schemas.Message) -> int:
    calls = message.tool_calls or []
    return len(message.text() or "") + sum(len(c.function.arguments) + 40 for c in calls)


def _with_system(messages: list[ChatMessage], text: str) -> list[ChatMessage]:
    if messages and messages[0].get("role") == "system":
        first: ChatMessage = {**messages[0]}
        first["content"] = f"{first.get('content') or ''}\n\n{text}".strip()
        return [first, *messages[1:]]
    return [{"role": "system", "content": text}, *messages]


# ---- completions and embeddings -------------------------------------------------------------


def check_completion(body: schemas.CompletionRequest) -> str:
    """What can be refused before a model is resolved; returns the prompt."""
    _check_common(body)
    if body.best_of is not None and body.best_of > 1:
        raise APIError(400, "Only best_of=1 is supported.", param="best_of")
    if body.logprobs:
        raise APIError(400, "logprobs are not supported by this server.", param="logprobs")
    prompt = body.prompt
    if isinstance(prompt, list):
        if len(prompt) != 1 or not isinstance(prompt[0], str):
            raise APIError(
                400,
                "Send one prompt as a string; token-id prompts and batches of prompts are not "
                "supported.",
                param="prompt",
            )
        prompt = prompt[0]
    return prompt


def completion_request(
    body: schemas.CompletionRequest, prompt: str, model: LoadedModel, meta: ModelMeta
) -> engine.CompletionRequest:
    """The engine request for a body that passed :func:`check_completion` (``prompt``)."""
    _check_vocabulary(body, meta)
    _check_prompt_size(len(prompt) + len(body.suffix or ""), 1, model, "prompt")
    if body.suffix is not None and not model.has_fim:
        raise APIError(
            400,
            f"The model `{model.model_id}` has no fill-in-the-middle tokens, so 'suffix' cannot "
            "be used with it. Use a code model trained for FIM (e.g. Qwen2.5-Coder).",
            param="suffix",
            code="fim_not_supported",
        )
    max_tokens = body.max_tokens or COMPLETIONS_DEFAULT_MAX_TOKENS
    return engine.CompletionRequest(
        prompt=prompt,
        sampling=sampling(body, max_tokens=max_tokens),
        model=model.model_id,
        suffix=body.suffix,
        echo=bool(body.echo),
    )


def embedding_inputs(body: schemas.EmbeddingRequest) -> list[str]:
    inputs = body.input
    texts = [inputs] if isinstance(inputs, str) else inputs
    if not texts:
        raise APIError(400, "Invalid 'input': empty array.", param="input", code="empty_array")
    if not all(isinstance(t, str) for t in texts):
        raise APIError(400, "Token-id inputs are not supported; send text.", param="input")
    strings = [str(t) for t in texts]
    if any(not t for t in strings):
        raise APIError(400, "Invalid 'input': an input is an empty string.", param="input")
    if len(strings) > 2048:
        raise APIError(400, "Invalid 'input': at most 2048 inputs.", param="input")
    for i, text in enumerate(strings):
        if len(text) > EMBED_MAX_CHARS:
            raise APIError(
                400,
                f"Input {i} is {len(text):,} characters: more than the 8,192 tokens an "
                "embedding covers. Split it into smaller pieces.",
                param="input",
                code="context_length_exceeded",
            )
    return strings
