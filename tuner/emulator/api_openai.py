"""The OpenAI-compatible endpoints as SGLang serves them: /v1/chat/completions and /v1/completions,
streamed (SSE chunks, `stream_options.include_usage` / `continuous_usage_stats`, `data: [DONE]`) or not."""

from __future__ import annotations

import json
import time
import uuid
from typing import TYPE_CHECKING, Any

from aiohttp import web

from . import tokens
from .http_json import BadRequest, dumps, error_openai

if TYPE_CHECKING:
    from .server import EmulatorApp


async def chat_completions(app: EmulatorApp, request: web.Request) -> web.StreamResponse:
    return await _openai(app, request, chat=True)


async def completions(app: EmulatorApp, request: web.Request) -> web.StreamResponse:
    return await _openai(app, request, chat=False)


def _common(body: dict[str, Any]) -> tuple[int | None, float, float, bool, int | None, dict[str, Any]]:
    """The sampling fields both endpoints share: (max tokens, temperature, top_p, ignore_eos, seed, stream_options)."""
    max_new = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_new is not None:
        max_new = int(max_new)
    temperature = body.get("temperature")
    temperature = 1.0 if temperature is None else float(temperature)
    top_p = body.get("top_p")
    top_p = 1.0 if top_p is None else float(top_p)
    ignore_eos = bool(body.get("ignore_eos", False))
    seed = body.get("seed")
    opts = body.get("stream_options") or {}
    if not isinstance(opts, dict):
        raise BadRequest("stream_options must be an object")
    if body.get("n", 1) not in (1, None):
        raise BadRequest("The emulator supports n=1 only.")
    return max_new, temperature, top_p, ignore_eos, seed, opts


def _usage(prompt_tokens: int, completion: int) -> dict[str, Any]:
    """The `usage` object, with the fields SGLang fills in."""
    return {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion,
        "completion_tokens": completion,
        "prompt_tokens_details": None,
        "reasoning_tokens": 0,
    }


async def _openai(app: EmulatorApp, request: web.Request, chat: bool) -> web.StreamResponse:
    """One chat or text completion: the prompt's tokens and hash, then one response or SSE chunks."""
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return error_openai("Invalid JSON body")
    if not isinstance(body, dict):
        return error_openai("Request body must be a JSON object")
    try:
        if chat:
            rendered, n_in = tokens.render_chat(body.get("messages"))
            h_prompt = tokens.prompt_hash(rendered)
            prompt_toks: list[Any] = rendered.split()
        else:
            prompt = body.get("prompt")
            if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
                prompt = prompt[0]
            if isinstance(prompt, str):
                n_in, h_prompt, prompt_toks = tokens.text_prompt(prompt)
            elif isinstance(prompt, list) and prompt and all(isinstance(i, int) for i in prompt):
                n_in, h_prompt, prompt_toks = tokens.ids_prompt(prompt)
            else:
                raise BadRequest("prompt must be a string or a list of token ids (batches are not emulated)")
        max_new, temperature, top_p, ignore_eos, seed, opts = _common(body)
        rid = uuid.uuid4().hex
        req, h = app.make_request(
            rid,
            max(1, n_in),
            max_new,
            temperature,
            ignore_eos,
            h_prompt,
            seed,
            top_p=top_p,
            prompt_tokens=prompt_toks,
            stream=bool(body.get("stream")),
        )
        n_in = min(n_in, req.input_tokens)  # --allow-auto-truncate may cut it
    except BadRequest as e:
        return error_openai(str(e))
    except (TypeError, ValueError) as e:
        return error_openai(f"Invalid request: {e}")
    created = int(time.time())
    model_name = body.get("model") or app.served_name
    zero = req.user == 0

    if not body.get("stream"):
        await app.run_to_end(req)
        comp = 0 if zero else req.generated
        text = tokens.text_range(h, 0, comp, app.text_fault)
        finish = "stop" if req.finish_reason == "stop" else "length"
        matched = app.p.eos_token_id if finish == "stop" else None
        if chat:
            choice = {
                "index": 0,
                "message": {"role": "assistant", "content": text, "reasoning_content": None, "tool_calls": None},
                "logprobs": None,
                "finish_reason": finish,
                "matched_stop": matched,
            }
            obj = "chat.completion"
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish, "matched_stop": matched}
            obj = "text_completion"
        out = {
            "id": rid,
            "object": obj,
            "created": created,
            "model": model_name,
            "choices": [choice],
            "usage": _usage(n_in, comp),
            "metadata": {"weight_version": app.cfg.values["weight_version"]},
        }
        return web.json_response(out, dumps=dumps)

    include_usage = bool(opts.get("include_usage"))
    continuous = bool(opts.get("continuous_usage_stats"))
    obj = "chat.completion.chunk" if chat else "text_completion"

    def frame(choice: dict[str, Any] | None, usage: dict[str, Any] | None) -> bytes:
        d = {
            "id": rid,
            "object": obj,
            "created": created,
            "model": model_name,
            "choices": [choice] if choice is not None else [],
            "usage": usage,
        }
        return b"data: " + dumps(d).encode() + b"\n\n"

    # The chat stream's role chunk comes with the first output, not before the prefill: SGLang
    # sends it when the first result of generate_request arrives (0.5.9
    # entrypoints/openai/serving_chat.py _generate_chat_stream: `if is_firsts.get(index, True):
    # ... DeltaMessage(role="assistant", content="")`), so a client that times the first chunk
    # (GuideLLM, AIPerf) reads the time to the first token.
    role_sent = not chat

    def on_tokens(sent: int, g: int, done: bool) -> list[bytes]:
        nonlocal role_sent
        comp = 0 if zero else g
        frames = []
        if not role_sent:
            role_sent = True
            # no usage on it, even with continuous_usage_stats (0.5.9 serving_chat.py builds the
            # role chunk without one; 0.5.21/0.5.23 the same)
            # `reasoning_content` always there, null or text: the OpenAI SDK reads it as an attribute
            # (0.5.12 serving_chat.py: "always serialized as null or a string")
            role = {"role": "assistant", "content": "", "reasoning_content": None}
            frames.append(
                frame({"index": 0, "delta": role, "logprobs": None, "finish_reason": None, "matched_stop": None}, None)
            )
        finish = matched = None
        if done:
            finish = "stop" if req.finish_reason == "stop" else "length"
            matched = app.p.eos_token_id if finish == "stop" else None
        if comp > sent:
            piece = tokens.text_range(h, sent, comp, app.text_fault)
            if chat:
                choice = {
                    "index": 0,
                    "delta": {"content": piece, "reasoning_content": None},
                    "logprobs": None,
                    "finish_reason": None,
                    "matched_stop": None,
                }
            else:
                # a completion's last text carries its finish reason (0.5.9 serving_completions.py:
                # one chunk per output, `finish_reason=finish_reason["type"] if finish_reason else None`)
                choice = {"index": 0, "text": piece, "logprobs": None, "finish_reason": finish, "matched_stop": matched}
            frames.append(frame(choice, _usage(n_in, comp) if continuous else None))
        if done:
            if chat:
                # the chat stream's finish chunk of its own, with no usage (0.5.9 serving_chat.py
                # `usage=None`; 0.5.21/0.5.23 build_sse_content without one)
                frames.append(
                    frame(
                        {
                            "index": 0,
                            "delta": {"reasoning_content": None},
                            "logprobs": None,
                            "finish_reason": finish,
                            "matched_stop": matched,
                        },
                        None,
                    )
                )
            elif comp <= sent:
                # no new text at the end: the finish reason on an empty text, as SGLang's last output
                choice = {"index": 0, "text": "", "logprobs": None, "finish_reason": finish, "matched_stop": matched}
                frames.append(frame(choice, _usage(n_in, comp) if continuous else None))
            if include_usage:
                frames.append(frame(None, _usage(n_in, comp)))
            frames.append(b"data: [DONE]\n\n")
        return frames

    return await app.stream(request, req, on_tokens)
