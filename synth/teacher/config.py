"""Configuration of the teacher LLM: which endpoint, how to sample, how hard to push it.

Sampling fields (``model``, ``temperature``, ``top_p``, ``max_tokens``, ``extra_body``)
change what the teacher writes, so they enter the content keys of every stage that
calls it.  Everything about *how* calls are made (endpoint URL, concurrency, rate
limits, timeouts, retries, prices) is marked ``operational``: moving from one vLLM
host to another, or raising concurrency, must not invalidate finished stages.

The API key is never a config value.  ``api_key_env`` names the environment
variable that holds it, so configs and reports written to disk cannot leak it; nor is a URL's
userinfo (``user:password@``) or query string ever repeated in a message.
"""

from __future__ import annotations

from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from synth.engine.config import ConfigError, Section, operational


class Price(BaseModel):
    """US dollars per million tokens, for cost accounting only."""

    model_config = ConfigDict(extra="forbid")

    prompt: float = Field(..., ge=0, description="Price of one million prompt (input) tokens.")
    completion: float = Field(..., ge=0, description="Price of one million completion (output) tokens.")
    cached_prompt: float | None = Field(
        None, ge=0,
        description="Price of one million prompt tokens the server says it served from its own prefix cache "
        "(`usage.prompt_tokens_details.cached_tokens`, as vLLM and the OpenAI API report it). None: they are "
        "priced as ordinary prompt tokens.")

    def usd(self, prompt_tokens: float, completion_tokens: float, server_cached_prompt_tokens: float = 0) -> float:
        """What the tokens cost, in USD (6 decimals).  ``server_cached_prompt_tokens`` are the part of
        ``prompt_tokens`` the server served from its prefix cache: priced at ``cached_prompt`` when it is set,
        else as ordinary prompt tokens (a figure past ``prompt_tokens`` is read as all of them)."""
        cached = min(max(server_cached_prompt_tokens, 0), prompt_tokens) if self.cached_prompt is not None else 0
        full = (prompt_tokens - cached) * self.prompt + cached * (self.cached_prompt or 0.0)
        return round((full + completion_tokens * self.completion) / 1e6, 6)

    def describe(self) -> str:
        """The prices in words, for reports and cards."""
        cached = (f", {self.cached_prompt:g} per million server-cached prompt tokens" if self.cached_prompt is not None
                  else "; server-cached prompt tokens at the prompt price (no cached_prompt set)")
        return (f"{self.prompt:g} per million prompt tokens, {self.completion:g} per million completion "
                f"tokens{cached}")


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
    max_wait_s: float = operational(
        "Longest wait a server may ask for (Retry-After on a 429 or 503) that is still honoured; a longer one "
        "stops the stage with one line naming the wait (finished shards are kept), instead of stalling.",
        600.0, gt=0)
    abort_after: int = operational(
        "Consecutive failed attempts of the endpoint itself (rejected key, unknown model, nothing listening, "
        "5xx or timeouts) after which the stage stops instead of dropping items; finished shards are kept.",
        3, ge=1)
    abort_grace_s: float = operational(
        "A failing endpoint that answered within this many seconds is given time to recover before the stage "
        "stops (a restart mid-run); one that never answered stops the stage at once.", 60.0, ge=0)
    price_per_mtok: Price | None = operational(
        "Prices per million tokens `{prompt: ..., completion: ..., cached_prompt: ...}`; when set, reports include "
        "cost in USD. `cached_prompt` (optional) prices the prompt tokens the server served from its prefix cache.",
        None
    )
    tool_protocol: Literal["auto", "native", "hermes", "llama3", "mistral", "react"] = Field(
        "auto",
        description="How tool calls travel (`openai` backend). `native`: tools sent as `tools`, calls read from "
        "`tool_calls` (vLLM with `--enable-auto-tool-choice --tool-call-parser ...`, llama.cpp with `--jinja`, OpenAI). "
        "`hermes` (Hermes/Qwen `<tool_call>`), `llama3` (Llama 3.x JSON or `<|python_tag|>`), `mistral` "
        "(`[TOOL_CALLS]`), `react` (`Action:` / `Action Input:`): hopforge writes the tool schemas into the "
        "system prompt and parses the calls from the text, for servers that ignore or reject tools. `auto`: probe "
        "the endpoint once with a tiny tool-call request and use what it does (the default).",
    )
    reasoning_field: str = Field(
        "auto", pattern=r"^(auto|think|[A-Za-z_][A-Za-z0-9_]*)$",
        description="Where the server puts an assistant turn's reasoning, and so where earlier turns' reasoning is "
        "sent back on every next turn (`openai` backend; models with interleaved thinking need it there). `auto` "
        "(the default): read `reasoning` (vLLM, OpenRouter), `reasoning_content` (DeepSeek, older vLLM) or "
        "`<think>` in the content, whichever the server's replies carry, and send it back the same way. `think`: "
        "`<think>` blocks in the content. Any other name: a server's own field (auto warns once when a reply holds "
        "text under a key named like reasoning that it does not read). Reasoning is stored as `reasoning_content` "
        "in traces and SFT rows whatever the server called it.",
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

    @model_validator(mode="before")
    @classmethod
    def _hide_url_credentials(cls, data: Any) -> Any:
        # A rejected value is repeated in the config error ("(got '...')"): a base_url with userinfo is
        # replaced by its redacted form first, so the error the field validator raises shows no secret.
        if isinstance(data, dict) and isinstance(data.get("base_url"), str) and "@" in urlsplit(data["base_url"]).netloc:
            data = {**data, "base_url": redact_url(data["base_url"])}
        return data

    @field_validator("base_url")
    @classmethod
    def _no_credentials_in_url(cls, v: str | None) -> str | None:
        # A URL with user:password@ would put a secret into configs and reports written to disk.
        if v is not None and "@" in urlsplit(v).netloc:
            raise ValueError("base_url must not carry credentials (user:password@); put the key in the variable "
                             "named by api_key_env")
        return v

    def display_url(self) -> str:
        """The endpoint for logs: scheme, host, port and path only (never userinfo or a query string, which
        could hold a token)."""
        if not self.base_url:
            return "<openai default>"
        return redact_url(self.base_url, mark="")


def redact_url(url: str, mark: str = "***") -> str:
    """``url`` with its userinfo and its query string and fragment replaced by ``mark`` (or dropped when
    ``mark`` is empty): what a message may repeat of a URL."""
    p = urlsplit(url)
    host = p.netloc.rpartition("@")[2]
    user = f"{mark}@" if mark and "@" in p.netloc else ""
    query = mark if mark and p.query else ""
    return urlunsplit((p.scheme, user + host, p.path, query, mark if mark and p.fragment else ""))


def read_api_key(raw: str | None, env_name: str) -> str:
    """The API key an environment variable holds, without surrounding whitespace (a copy-paste often
    brings a trailing newline or carriage return); :class:`ConfigError` naming ``env_name`` when it is
    unset or empty, or holds a control or non-ASCII character (an HTTP header cannot carry either).
    The message never repeats the key."""
    key = (raw or "").strip()
    if not key:
        raise ConfigError(f"the environment variable {env_name} (teacher.api_key_env) is unset or empty; export the "
                          "API key there (for a local server without auth, any placeholder such as EMPTY)")
    for i, ch in enumerate(key):
        if ord(ch) < 32 or ord(ch) == 127:
            raise ConfigError(f"the API key in {env_name} (teacher.api_key_env) contains a control character (at "
                              f"position {i + 1} of {len(key)}): copy the key again without it")
        if ord(ch) > 127:
            raise ConfigError(f"the API key in {env_name} (teacher.api_key_env) contains a non-ASCII character (at "
                              f"position {i + 1} of {len(key)}), which an HTTP header cannot carry: copy the key "
                              "again")
    return key
