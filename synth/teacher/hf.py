"""A local ``transformers`` backend of :class:`~synth.teacher.types.ChatModel` (``teacher.backend: hf``).

It loads a checkpoint folder (``teacher.model``: e.g. the student ``DIR/student``), renders each
request with the checkpoint's chat template and the tools, generates (greedy at temperature 0,
else sampled with a seed derived from ``sample_index``) until the template's end-of-turn token, and
parses the tool calls in the format the student's family writes them (``<tool_call>`` blocks for
Qwen and Gemma, Llama 3 JSON, Mistral ``[TOOL_CALLS]``) into OpenAI ``tool_calls`` with
``arguments`` as a JSON string.  Tool-call text that does not parse is returned as plain content,
so the harness counts it as a format error.

Generation runs in a worker thread (``asyncio.to_thread``), one at a time per model, so the
event loop keeps serving other rollouts' tool calls.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from pathlib import Path
from typing import Any

from synth.teacher.types import BackendError, BaseChatModel, ChatResponse, normalise_message

_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


def parse_tool_calls(text: str, id_prefix: str = "call") -> dict[str, Any]:
    """An OpenAI assistant message from generated text: ``content`` plus parsed ``tool_calls``.

    Every ``<tool_call>`` block must hold a JSON object with a string ``name`` and an object (or a
    JSON-object string) ``arguments``; an unclosed block or any bad one leaves the whole text as
    content with no tool calls.
    """
    blocks = list(_TOOL_CALL.finditer(text))
    if text.count("<tool_call>") != len(blocks) or text.count("</tool_call>") != len(blocks):
        return {"role": "assistant", "content": text}
    calls = []
    for i, m in enumerate(blocks):
        try:
            obj = json.loads(m.group(1))
        except json.JSONDecodeError:
            return {"role": "assistant", "content": text}
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or not obj["name"]:
            return {"role": "assistant", "content": text}
        args = obj.get("arguments", {})
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                return {"role": "assistant", "content": text}
        if not isinstance(args, dict):
            return {"role": "assistant", "content": text}
        calls.append({"id": f"{id_prefix}_{i}", "type": "function",
                      "function": {"name": obj["name"], "arguments": json.dumps(args, ensure_ascii=False)}})
    content = _TOOL_CALL.sub("", text).strip() if calls else text
    msg: dict[str, Any] = {"role": "assistant", "content": content or None}
    if calls:
        msg["tool_calls"] = calls
    return msg


# Tokens that end an assistant turn in the common families (ChatML, Llama 3, Gemma); the template's own
# end-of-turn token and the eos are added per tokenizer.
_TURN_ENDS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|eom_id|>", "<end_of_turn>")
# Special tokens that carry tool calls (Llama 3's built-in tool call, Mistral's call list): kept for parsing.
_CALL_MARKERS = ("<|python_tag|>", "[TOOL_CALLS]")


def stop_token_ids(tokenizer) -> list[int]:
    """The ids generation stops at: the eos, the chat template's end-of-turn token, and the common turn ends."""
    from synth.tokenizer.turns import end_of_turn

    names = list(_TURN_ENDS)
    try:
        eot = end_of_turn(tokenizer, getattr(tokenizer, "chat_template", None))
    except Exception:  # a template that cannot render the probe: the common turn ends and the eos still stop it
        eot = None
    if eot:
        names.append(eot)
    stop = {tokenizer.eos_token_id}
    for t in names:
        tid = tokenizer.convert_tokens_to_ids(t)
        if isinstance(tid, int) and tid != tokenizer.unk_token_id:
            stop.add(tid)
    return sorted(i for i in stop if i is not None)


def read_generated(tokenizer, new: list[int], stop_ids: list[int], tools: list[dict] | None,
                   n_assistant: int) -> tuple[dict[str, Any], str]:
    """``(assistant message, finish_reason)`` from the generated ids of one turn.

    The tool calls are read in whichever format the student's family writes them: Hermes / Qwen
    ``<tool_call>`` blocks, Llama 3 JSON (or ``<|python_tag|>``), Mistral ``[TOOL_CALLS] [...]``
    (the shipped templates' formats, :mod:`synth.teacher.protocols`).  Special tokens are decoded
    so that call markers survive, then removed from the content.
    """
    finish = "stop" if new and new[-1] in stop_ids else "length"
    body = new[:-1] if finish == "stop" else new
    text = tokenizer.decode(body, skip_special_tokens=False)
    for t in tokenizer.all_special_tokens:
        if t not in _CALL_MARKERS:
            text = text.replace(t, "")
    msg = parse_tool_calls(text, id_prefix=f"call_{n_assistant}")
    if not msg.get("tool_calls") and tools:
        from synth.teacher import protocols

        found = protocols.detect(text, tools)
        if found is not None:
            content, calls = protocols.parse_calls(found, text, tools)
            msg = {"role": "assistant", "content": content or None,
                   "tool_calls": protocols.to_openai_calls(calls, n_assistant)}
    content = msg.get("content")
    if isinstance(content, str):
        for t in _CALL_MARKERS:
            content = content.replace(t, "")
        msg["content"] = content.strip() or None
    msg = normalise_message(msg)
    if msg.get("tool_calls"):
        finish = "tool_calls"
    return msg, finish


def _for_template(messages: list[dict]) -> list[dict]:
    """Messages with tool-call ``arguments`` as dicts, which every template renders (``tojson``)."""
    out = []
    for m in messages:
        m = {k: v for k, v in m.items() if v is not None}
        if m.get("tool_calls"):
            calls = []
            for tc in m["tool_calls"]:
                fn = dict(tc.get("function") or {})
                if isinstance(fn.get("arguments"), str):
                    try:
                        fn["arguments"] = json.loads(fn["arguments"])
                    except json.JSONDecodeError:
                        pass  # shown as written: the model's own malformed call
                calls.append({**tc, "function": fn})
            m["tool_calls"] = calls
        out.append(m)
    return out


class HFChatModel(BaseChatModel):
    """A checkpoint served in-process with ``transformers``' ``generate``."""

    def __init__(self, path: str | Path, *, temperature: float = 0.0, top_p: float | None = None,
                 max_new_tokens: int = 1024, seed: int = 0, device: str | None = None, dtype: str = "auto",
                 name: str | None = None):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.path = str(path)
        self.name = name or f"hf:{Path(self.path).name}"
        self.temperature, self.top_p, self.max_new_tokens, self.seed = temperature, top_p, max_new_tokens, seed
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.tokenizer = AutoTokenizer.from_pretrained(self.path)
        torch_dtype = dtype if dtype == "auto" else getattr(torch, dtype)
        self.model = AutoModelForCausalLM.from_pretrained(self.path, dtype=torch_dtype).to(self.device).eval()
        self.stop_ids = stop_token_ids(self.tokenizer)
        self._lock = threading.Lock()

    async def chat(self, messages: list[dict], tools: list[dict] | None = None, *, sample_index: int = 0,
                   task: Any = None) -> ChatResponse:
        """Generate one assistant turn (in a worker thread)."""
        return await asyncio.to_thread(self._chat, messages, tools, sample_index)

    def _chat(self, messages: list[dict], tools: list[dict] | None, sample_index: int) -> ChatResponse:
        import torch

        t0 = time.monotonic()
        try:
            prompt = self.tokenizer.apply_chat_template(_for_template(messages), tools=tools or None,
                                                        add_generation_prompt=True, tokenize=False)
        except Exception as e:  # a template that cannot render this conversation: not retryable
            raise BackendError("bad_request", f"chat template failed: {e}", retryable=False) from None
        enc = self.tokenizer(prompt, add_special_tokens=False, return_tensors="pt").to(self.device)
        sample = self.temperature > 0
        kw: dict[str, Any] = {"max_new_tokens": self.max_new_tokens, "do_sample": sample,
                              "eos_token_id": self.stop_ids,
                              "pad_token_id": self.tokenizer.pad_token_id or self.stop_ids[0]}
        if sample:
            kw["temperature"] = self.temperature
            if self.top_p is not None:
                kw["top_p"] = self.top_p
        else:
            kw.update(temperature=None, top_p=None, top_k=None)
        with self._lock, torch.no_grad():
            if sample:
                torch.manual_seed(self.seed * 1_000_003 + sample_index)
            out = self.model.generate(**enc, **kw)
        new = out[0, enc["input_ids"].shape[1]:].tolist()
        n_assistant = sum(1 for m in messages if m.get("role") == "assistant")
        msg, finish = read_generated(self.tokenizer, new, self.stop_ids, tools, n_assistant)
        usage = {"prompt_tokens": int(enc["input_ids"].shape[1]), "completion_tokens": len(new)}
        return ChatResponse(msg, usage, finish, self.name, latency_s=time.monotonic() - t0)

    async def aclose(self) -> None:
        """Nothing to release (the model stays loaded for the next loop)."""


def make_hf(cfg: Any, **kw: Any) -> HFChatModel:
    """The backend factory for ``teacher.backend: hf``: ``teacher.model`` is the checkpoint folder.

    ``temperature``, ``top_p`` and ``max_tokens`` come from the teacher config; ``seed``, ``device``,
    ``dtype`` and ``name`` may be passed as keywords (others, meant for other backends, are ignored).
    """
    own = {k: kw[k] for k in ("seed", "device", "dtype", "name") if k in kw}
    return HFChatModel(cfg.model, temperature=cfg.temperature, top_p=cfg.top_p, max_new_tokens=cfg.max_tokens, **own)


__all__ = ["HFChatModel", "make_hf", "parse_tool_calls", "read_generated", "stop_token_ids"]
