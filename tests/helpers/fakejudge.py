"""A scripted judge backend for the teacher: verdicts by prediction, failures on demand."""

from __future__ import annotations

import json

from synth.teacher.client import BackendError, ChatResponse
from synth.teacher.types import BaseChatModel


class FakeJudge(BaseChatModel):
    """Says ``correct`` for the predictions in ``yes``; fails for those in ``fail``; garbles ``garble``."""

    name = "fake-judge"

    def __init__(self, yes=(), fail=(), garble=()):
        self.yes, self.fail, self.garble = set(yes), set(fail), set(garble)
        self.seen: list[dict] = []

    async def chat(self, messages, tools=None, *, sample_index=0, task=None):
        from synth.teacher.tasks import current_hint

        hint = current_hint()  # a scripted backend reads the call's hint (a real one is handed the task alone)
        self.seen.append(hint)
        pred = hint.prediction
        if pred in self.fail:
            raise BackendError("http_400", "bad request", retryable=False)
        text = "no idea" if pred in self.garble else json.dumps({"correct": pred in self.yes, "reason": "test"})
        return ChatResponse({"role": "assistant", "content": text}, {"prompt_tokens": 10, "completion_tokens": 5})


__all__ = ["FakeJudge"]
