"""Configuration of the teacher LLM: which endpoint, how to sample, how hard to push it.

Sampling fields (``model``, ``temperature``, ``top_p``, ``max_tokens``, ``extra_body``)
change what the teacher writes, so they enter the content keys of every stage that
calls it.  Everything about *how* calls are made (endpoint URL, concurrency, rate
limits, timeouts, retries, prices) is marked ``operational``: moving from one vLLM
host to another, or raising concurrency, must not invalidate finished stages.

The API key is never a config value.  ``api_key_env`` names the environment
variable that holds it, so configs and reports written to disk cannot leak it.
"""

from __future__ import annotations

from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from synth.engine.config import Section, operational


class Price(BaseModel):
    """US dollars per million tokens, for cost accounting only."""

    model_config = ConfigDict(extra="forbid")

    prompt: float = Field(..., ge=0, description="Price of one million prompt (input) tokens.")
    completion: float = Field(..., ge=0, description="Price of one million completion (output) tokens.")

    def usd(self, prompt_tokens: float, completion_tokens: float) -> float:
        """What ``prompt_tokens`` and ``completion_tokens`` cost, in USD (6 decimals)."""
        return round((prompt_tokens * self.prompt + completion_tokens * self.completion) / 1e6, 6)


class TeacherConfig(Section):
    """The teacher LLM: an offline oracle, or any OpenAI-compatible chat-completions endpoint."""

    backend: Literal["oracle", "openai", "hf"] = Field(
        "oracle",
        description="`oracle`: the offline scripted teacher (no network, for demos and tests); "
        "`openai`: any OpenAI-compatible chat-completions server (OpenAI, vLLM, SGLang, llama.cpp, Ollama); "
        "`hf`: a local transformers checkpoint (`model` is its folder), used to evaluate students.",
    )
    base_url: str | None = operational(
        "Endpoint root, e.g. `http://localhost:8000/v1` for vLLM. None: the openai client's default "
        "(`OPENAI_BASE_URL`, else api.openai.com).",
        None,
    )
    model: str = Field("oracle-v1", min_length=1, description="Model name sent with every request.")
    api_key_env: str = operational(
        "Name of the environment variable holding the API key; the key itself is never stored in a config. "
        "A local server without auth still needs the variable set to any non-empty placeholder (e.g. `EMPTY`).",
        "OPENAI_API_KEY",
        min_length=1,
    )
    temperature: float = Field(0.7, ge=0, le=2, description="Sampling temperature.")
    top_p: float | None = Field(None, gt=0, le=1, description="Nucleus sampling mass; None: server default.")
    max_tokens: int = Field(2048, ge=1, description="Most completion tokens per call.")
    concurrency: int = operational("Most requests in flight at once.", 16, ge=1, le=4096)
    rpm: int | None = operational("Requests per minute limit; None: unlimited.", None, ge=1)
    tpm: int | None = operational(
        "Tokens per minute limit, charged per request as an estimate of prompt tokens (characters / 4) "
        "plus max_tokens; None: unlimited.",
        None,
        ge=1,
    )
    timeout_s: float = operational("Seconds before one request is abandoned (reason `timeout`).", 120.0, gt=0)
    max_retries: int = operational(
        "Retries of a request after a 429, a 5xx, a timeout, a dropped connection or a malformed body.", 5, ge=0
    )
    backoff_base_s: float = operational(
        "Backoff before retry i is uniform in [0, min(backoff_max_s, backoff_base_s * 2**i)] (full jitter); "
        "a Retry-After header raises it.",
        1.0,
        ge=0,
    )
    backoff_max_s: float = operational("Cap on one backoff (a longer Retry-After is still honoured).", 60.0, ge=0)
    abort_after: int = operational(
        "Consecutive failed attempts of the endpoint itself (rejected key, unknown model, nothing listening, "
        "5xx or timeouts) after which the stage stops instead of dropping items; finished shards are kept.",
        3, ge=1)
    abort_grace_s: float = operational(
        "A failing endpoint that answered within this many seconds is given time to recover before the stage "
        "stops (a restart mid-run); one that never answered stops the stage at once.", 60.0, ge=0)
    price_per_mtok: Price | None = operational(
        "Prices per million tokens `{prompt: ..., completion: ...}`; when set, reports include cost in USD.", None
    )
    tool_protocol: Literal["auto", "native", "hermes", "llama3", "mistral", "react"] = Field(
        "native",
        description="How tool calls travel (`openai` backend). `native`: tools sent as `tools`, calls read from "
        "`tool_calls` (vLLM with `--enable-auto-tool-choice --tool-call-parser ...`, llama.cpp with `--jinja`, OpenAI). "
        "`hermes` (Hermes/Qwen `<tool_call>`), `llama3` (Llama 3.x JSON or `<|python_tag|>`), `mistral` "
        "(`[TOOL_CALLS]`), `react` (`Action:` / `Action Input:`): hopforge writes the tool schemas into the "
        "system prompt and parses the calls from the text, for servers that ignore or reject tools. `auto`: probe "
        "the endpoint once with a tiny tool-call request and use what it does.",
    )
    structured_output: Literal["off", "on", "auto"] = Field(
        "off",
        description="Send JSON tasks (questions, judge...) with `response_format` (a JSON schema when the task "
        "names required keys, else `json_object`). `auto`: only where a probe shows the endpoint accepts it.",
    )
    extra_body: dict[str, Any] = Field(
        default_factory=dict,
        description="Extra JSON fields sent with every request (e.g. vLLM `top_k`, `repetition_penalty`, "
        "`chat_template_kwargs`); part of the cache key.",
    )

    @field_validator("base_url")
    @classmethod
    def _no_credentials_in_url(cls, v: str | None) -> str | None:
        # A URL with user:password@ would put a secret into configs and reports written to disk.
        if v is not None and urlsplit(v).password is not None:
            raise ValueError("base_url must not carry credentials; put the key in the variable named by api_key_env")
        return v

    def display_url(self) -> str:
        """The endpoint for logs: scheme, host and path only (no query string, which could hold a token)."""
        if not self.base_url:
            return "<openai default>"
        p = urlsplit(self.base_url)
        return urlunsplit((p.scheme, p.hostname or "", p.path, "", "")) if p.port is None else \
            urlunsplit((p.scheme, f"{p.hostname}:{p.port}", p.path, "", ""))
