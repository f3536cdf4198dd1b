"""SGLang's native /generate: text or input_ids (one or a batch), sampling_params, and streaming as
SGLang streams it (cumulative text in each `data:` frame, then `data: [DONE]`)."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import TYPE_CHECKING, Any

from aiohttp import web
from sglang_utils.sglang_releases import stream_text_incremental

from . import tokens
from .http_json import BadRequest, SchedulerRefusal, dumps, error_native, error_stream_native
from .request import Request

if TYPE_CHECKING:
    from .server import EmulatorApp


def meta_info(app: EmulatorApp, req: Request, prompt_tokens: int, completion: int, final: bool) -> dict[str, Any]:
    """A /generate result's `meta_info`: counts on every frame, finish reason, speculative
    acceptance (names per release: facts.spec_meta) and e2e latency on the final one."""
    finish: dict[str, Any] | None = None
    if final:
        if req.finish_reason == "stop":
            finish = {"type": "stop", "matched": app.p.eos_token_id}
        elif req.finish_reason == "abort":
            finish = {"type": "abort", "message": "Abort request"}
        else:
            finish = {"type": "length", "length": completion}
    meta: dict[str, Any] = {
        "id": req.rid,
        "finish_reason": finish,
        "prompt_tokens": prompt_tokens,
        "weight_version": app.cfg.values["weight_version"],
        "completion_tokens": completion,
        "cached_tokens": 0,
    }
    spec = app.sched.speculative
    if final:
        if spec and req.verify_ct > 0:
            # on the finished chunk only, as SGLang fills its speculative metrics `if state.finished`,
            # and only when a step verified drafts (tokenizer_manager.py: under `if
            # recv_obj.spec_verify_ct[i] > 0`, 0.5.9-0.5.23): an answer whose one token came from
            # the prefill carries no spec_verify_ct at all
            meta["spec_verify_ct"] = req.verify_ct
            # tokenizer_manager.py: proposed drafts = verify calls * (the launch's
            # speculative_num_draft_tokens - 1), also under adaptive speculation.
            drafts = req.verify_ct * (app.cfg.num_draft_tokens - 1)
            if drafts > 0:
                meta["spec_accept_rate"] = req.accepted_drafts / drafts
                meta["spec_accept_length"] = completion / req.verify_ct
                names = app.cfg.facts.spec_meta
                if names.startswith("correct"):
                    meta["spec_num_correct_drafts"] = req.accepted_drafts
                    meta["spec_num_proposed_drafts"] = drafts
                if names in ("drafts", "correct+aliases"):
                    meta["spec_accepted_drafts"] = req.accepted_drafts
                    meta["spec_proposed_drafts"] = drafts
                if names == "token_num":
                    meta["spec_accept_token_num"] = req.accepted_drafts
                    meta["spec_draft_token_num"] = drafts
            # as long as the most drafts a step accepted plus one, as SGLang grows it on demand
            # (0.5.9 and 0.5.23 schedule_batch.py: `extend([0] * ...)` only when a step needs the slot)
            hist = list(req.hist)
            while len(hist) > 1 and hist[-1] == 0:
                hist.pop()
            if app.cfg.facts.spec_meta.startswith("correct"):
                meta["spec_correct_drafts_histogram"] = hist
            if app.cfg.facts.spec_meta != "correct":
                meta["spec_accept_histogram"] = hist
        end = req.finished_at if req.finished_at >= 0 else asyncio.get_running_loop().time()
        meta["e2e_latency"] = max(0.0, end - req.arrival)
    return meta


class _BodyError(BadRequest):
    """A body SGLang's HTTP layer refuses before its generate_request runs (a field of the wrong
    type), or one the emulator does not play: a 400 however it asked to be answered."""


async def generate(app: EmulatorApp, request: web.Request) -> web.StreamResponse:
    """POST /generate: one prompt (streamed or not) or a batch (not streamed)."""
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return error_native("Invalid JSON body", 400)
    if not isinstance(body, dict):
        return error_native("Request body must be a JSON object", 400)
    text, ids = body.get("text"), body.get("input_ids")
    stream = bool(body.get("stream", False))

    def refuse(message: str) -> web.Response:
        """What SGLang's tokenizer raises (a ValueError): a 400, or a streamed request's error frame."""
        return error_stream_native(message) if stream else error_native(message, 400)

    if text is None and ids is None:
        return refuse("Either text or input_ids should be provided.")
    sp = body.get("sampling_params") or {}
    if isinstance(sp, list):
        sp = sp[0] if sp else {}
    prompts: list[tuple[int, int, list[Any]]] = []  # (token count, hash, tokens)
    try:
        if text is not None:
            items = text if isinstance(text, list) else [text]
            for t in items:
                if not isinstance(t, str):
                    raise _BodyError("text must be a string or a list of strings")
                prompts.append(tokens.text_prompt(t))
        else:
            items = ids if (isinstance(ids, list) and ids and isinstance(ids[0], list)) else [ids]
            for one in items:
                if not isinstance(one, list) or not all(isinstance(i, int) for i in one):
                    raise _BodyError("input_ids must be a list of integers or a list of lists")
                prompts.append(tokens.ids_prompt(one))
        if stream and len(prompts) > 1:
            raise _BodyError("The emulator streams single prompts only; send a batch without stream.")
        max_new = int(sp.get("max_new_tokens", 128))
        temperature = float(sp.get("temperature", 1.0))
        top_p = float(sp.get("top_p", 1.0))
        ignore_eos = bool(sp.get("ignore_eos", False))
        seed = sp.get("sampling_seed", sp.get("seed"))
        rid0 = body.get("rid")
        reqs = []
        for i, (n_in, h_prompt, prompt_toks) in enumerate(prompts):
            rid = (
                rid0
                if isinstance(rid0, str) and len(prompts) == 1
                else (rid0[i] if isinstance(rid0, list) and i < len(rid0) else uuid.uuid4().hex)
            )
            made = app.make_request(
                rid,
                max(1, n_in),
                max_new,
                temperature,
                ignore_eos,
                h_prompt,
                seed,
                top_p=top_p,
                prompt_tokens=prompt_toks,
                stream=stream,
            )
            reqs.append((made, min(n_in, made[0].input_tokens)))  # --allow-auto-truncate may cut it
    except (SchedulerRefusal, _BodyError) as e:
        return error_native(str(e), 400)
    except BadRequest as e:
        return refuse(str(e))
    except (TypeError, ValueError) as e:
        return error_native(f"Invalid sampling_params: {e}", 400)

    if not stream:
        # A batch reaches the scheduler as one message (tokenizer_manager.py `_send_batch_request`,
        # a BatchTokenizedGenerateReqInput), so its requests share one arrival: submitted a few
        # microseconds apart, the later one could miss the batch the first one opens.
        arrival = asyncio.get_running_loop().time()
        await asyncio.gather(*(app.run_to_end(r, arrival) for (r, _h), _n in reqs))
        out = []
        for (r, h), n_in in reqs:
            comp = 0 if r.user == 0 else r.generated
            out.append(
                {
                    "text": tokens.text_range(h, 0, comp, app.text_fault),
                    "output_ids": tokens.ids_range(h, 0, comp, app.text_fault),
                    "meta_info": meta_info(app, r, n_in, comp, True),
                }
            )
        batched = isinstance(text, list) or (text is None and isinstance(ids[0] if ids else None, list))
        return web.json_response(out if batched else out[0], dumps=dumps)

    (req, h), n_in = reqs[0]
    pieces: list[str] = []
    # Every chunk carries its ids with its text (tokenizer_manager.py `_handle_batch_output`): all so
    # far by default; only the chunk's own under --incremental-streaming-output (0.5.10+; 0.5.9's
    # --stream-output), its text then only its own too from 0.5.10, where 0.5.9 keeps the text whole
    # (plugins/module_utils/sglang_releases.py `stream_text_incremental`, which the gate reads by).
    ids_delta = bool(app.cfg.values.get("incremental_streaming_output") or app.cfg.values.get("stream_output"))
    text_delta = ids_delta and bool(stream_text_incremental(app.version))

    def on_tokens(sent: int, g: int, done: bool) -> list[bytes]:
        comp = 0 if req.user == 0 else g
        new = tokens.text_range(h, sent, comp, app.text_fault) if comp > sent else ""
        if new:
            pieces.append(new)
        frame = {
            "text": new if text_delta else "".join(pieces),
            "output_ids": tokens.ids_range(h, sent if ids_delta else 0, comp, app.text_fault),
            "meta_info": meta_info(app, req, n_in, comp, done),
            "index": 0,
        }
        frames = [b"data: " + dumps(frame).encode() + b"\n\n"]
        if done:
            frames.append(b"data: [DONE]\n\n")
        return frames

    return await app.stream(request, req, on_tokens)
