"""The pinned LLM judge of ``hopforge eval --judge MODEL@URL``.

The judge is one model at one OpenAI-compatible endpoint, asked at temperature 0 through one prompt file,
``synth/teacher/prompts/bench_judge.jinja2``; the report records the model's name, the endpoint (scheme, host,
port and path only), the prompt file and its sha256, so two reports are comparable only when those agree
(BrowseComp-Plus measured GPT-4.1 about 6 points more lenient than a Qwen3-32B judge on the same answers).

The rule (page identity first, then token F1) grades every answer; the judge adds a second verdict beside it,
never in its place.  A judge call that fails (dead endpoint, HTTP error) or whose reply cannot be read (prose,
no ``correct`` boolean) is recorded per answer (``judge_error``) and counted; that answer's judge-side verdict
is then the rule's (``judge_correct`` stays null, ``judged`` is the rule's).  An empty answer is not sent.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from typing import Any

from synth.engine.errors import InputError
from synth.teacher.prompting import PROMPT_DIR
from synth.teacher.tasks import JUDGE, Task

log = logging.getLogger("hopforge")
PROMPT = "bench_judge.jinja2"
BENCH_JUDGE = Task("bench_judge", PROMPT, "json", parse=JUDGE.parse)
_SPEC = re.compile(r"^(?P<model>[^@\s]+(?:@[^@\s:/]+)*)@(?P<url>https?://\S+)$")


def parse_endpoint(spec: str, option: str) -> tuple[str, str]:
    """``MODEL@URL`` -> (model, base URL); the URL starts at the last ``@`` before ``http(s)://``."""
    m = _SPEC.match(spec.strip())
    if not m:
        raise InputError(f"{option} {spec.split('@')[0]!r}...: expected MODEL@URL, e.g. "
                         "Qwen/Qwen3-32B@http://localhost:8000/v1")
    return m.group("model"), m.group("url")


def prompt_sha256() -> str:
    """The sha256 of the judge's prompt file, as recorded in the report."""
    return hashlib.sha256((PROMPT_DIR / PROMPT).read_bytes()).hexdigest()


def endpoint_config(teacher_cfg: Any, update: dict[str, Any], option: str) -> Any:
    """``teacher_cfg`` with ``update``, validated again (a URL carrying ``user:password@`` is refused in one line
    that never repeats it)."""
    from pydantic import ValidationError

    try:
        return type(teacher_cfg).model_validate({**teacher_cfg.model_dump(), **update})
    except ValidationError as e:
        raise InputError(f"{option}: " + "; ".join(err["msg"] for err in e.errors())) from None


def judge_config(teacher_cfg: Any, model: str, url: str, key_env: str | None) -> Any:
    """The judge's teacher config: the run's teacher settings with the judge's endpoint and model, greedy,
    no call cache (a judge's verdict is part of the measurement), the key from ``key_env`` (default: the
    teacher's variable)."""
    update = {"backend": "openai", "model": model, "base_url": url, "temperature": 0.0, "max_tokens": 1024,
              "tool_protocol": "native"}
    if key_env:
        update["api_key_env"] = key_env
    return endpoint_config(teacher_cfg, update, "--judge")


@dataclass(slots=True)
class Verdict:
    """The judge's verdict on one answer: True/False, or None with why (``error``)."""

    correct: bool | None
    error: str | None = None


def judge_answers(teacher: Any, items: list[tuple[str, list[str], str | None]], progress: Any = None) -> list[Verdict]:
    """Judge ``(question, answers, prediction)`` triples through ``teacher.map``; a failure is a verdict of
    None with its reason (``failed: <reason>`` or ``unparsed: <reason>``), never an exception."""
    from synth.teacher.breaker import TeacherUnavailable
    from synth.teacher.client import TeacherError

    todo = [i for i, (_, _, pred) in enumerate(items) if pred is not None and pred.strip()]

    async def ask(i: int):
        question, answers, pred = items[i]
        hint = JUDGE.hint(answer=answers[0], aliases=tuple(answers[1:]), prediction=pred)
        return await teacher.chat(BENCH_JUDGE.format_input(question=question, answers=answers, prediction=pred),
                                  hint=hint)

    out = [Verdict(None, "no_answer") for _ in items]
    try:
        results = teacher.map(ask, todo, progress=progress) if todo else []
    except TeacherUnavailable as e:
        # The judge's endpoint is down as a whole: every answer keeps the rule's verdict, and each records why.
        log.warning("judge: %s; the rule's verdicts stand for these %d answers", e, len(todo))
        for i in todo:
            out[i] = Verdict(None, "failed: unavailable")
        return out
    for i, res in zip(todo, results):
        if isinstance(res, TeacherError):
            out[i] = Verdict(None, f"failed: {res.reason}")
            continue
        parsed = BENCH_JUDGE.format_output(res)
        out[i] = Verdict(parsed.value) if parsed.reason is None else Verdict(None, f"unparsed: {parsed.reason}")
    return out


__all__ = ["BENCH_JUDGE", "PROMPT", "Verdict", "endpoint_config", "judge_answers", "judge_config", "parse_endpoint", "prompt_sha256"]
