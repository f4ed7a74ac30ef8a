"""hopforge's ``search``, ``open`` and ``find`` (and the optional ``multi_search``) as verl tools, served by
``hopforge tools serve``; and CAPF's training-only ``check_answer`` (:class:`CheckAnswerTool`,
``configs/rl/tools-capf.yaml``).

verl's multi-turn rollout (``actor_rollout_ref.rollout.multi_turn.tool_config_path``) builds
its tools from a YAML file; ``configs/rl/tools.yaml`` lists this class once per tool::

    tools:
      - class_name: synth.tools.verl_tool.HopforgeTool
        config: {type: native, name: search, url: http://127.0.0.1:8765, tools: {}}
      ...

``config`` keys: ``name`` (search | open | find, or an optional tool its ``tools`` offers:
``multi_search`` with ``tools: {extra_tools: [multi_search]}``), ``url`` (the tool server, default
``http://127.0.0.1:8765``), ``tools`` (the run's ``tools:`` section, default: hopforge's
defaults; it decides the schemas' numbers, the optional tools and ``mask_answer_page``, and its ``ranker`` must be
the one the server searches with: ``hopforge tools serve`` serves ``tools.ranker``), ``timeout_s``,
``max_retries``, ``verify_server`` and ``require_exclude`` (a masked tool refuses a call whose row
gives it no ``exclude``, instead of searching unmasked; ``configs/rl/tools-multisearch.yaml`` sets it
for ``multi_search``).  No ``tool_schema`` is needed: it is taken from
:func:`synth.tools.schema.tool_schemas`.

What RL sees is what SFT trained on:

- **Schemas.**  verl renders the tools into the chat template from
  ``tool_schema.model_dump()``.  Its pydantic schema keeps only the fields it knows (no
  ``minimum``, ``maximum``, ``additionalProperties``) in its own key order, so
  :class:`ExactToolSchema` dumps the schema dict of :mod:`synth.tools.schema` as it is:
  the JSON of the SFT rows' ``tools``, key for key.  With ``verify_server`` the tool also
  checks that the server serves the same schemas (same ``tools`` settings) and ranks with the same
  ``tools.ranker`` (its ``/health``): when they
  differ it refuses to start (or, when the server was not up yet, refuses its first call).
- **Behaviour.**  Every call goes to the tool server (:mod:`synth.tools.server`), the same
  ``run_search`` / ``run_open`` / ``run_find`` over the same index as the rollouts'
  :class:`~synth.tools.toolbox.Toolbox`, and the observation is the text ``Toolbox.call``
  gives: the result as JSON (``json.dumps(..., ensure_ascii=False)``), or
  ``{"error": "..."}`` for a call the agent got wrong, which the agent reads and recovers from.
- **Masking.**  verl calls ``create(create_kwargs=extra_info.tools_kwargs[name].create_kwargs)``
  per call.  ``rl_pool`` rows carry ``{"search": {"create_kwargs": {"exclude":
  [answer_page_id]}}}`` (:func:`filters.band.tools_kwargs`), so the search never returns the
  question's answer page, as in the rollouts; like the ``Toolbox``, only when
  ``tools.mask_answer_page``.  An ``exclude`` written by the model is an unknown argument, as
  it is for the ``Toolbox``: it can never unmask the page.

The server binds to loopback: run ``hopforge tools serve --out DIR --port 8765`` on every
node that runs rollouts.  A server that does not answer (refused connection, timeout, 5xx)
is retried ``max_retries`` times and then raises :class:`ToolServerError`.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import weakref
from typing import Any, Optional
from uuid import uuid4

import httpx
from pydantic import PrivateAttr
from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse
from verl.utils.rollout_trace import rollout_trace_op

from synth.tools.config import ToolsConfig
from synth.tools.feedback import CHECK_ANSWER, DEFAULT_MIN_F1, check, check_answer_schema
from synth.tools.registry import find_tool, get_tool, tool_names
from synth.tools.schema import tool_schemas

DEFAULT_URL = "http://127.0.0.1:8765"
log = logging.getLogger("hopforge")


class ToolServerError(RuntimeError):
    """The tool server cannot be reached, failed, or serves other tools than the tool config's."""


class ExactToolSchema(OpenAIFunctionToolSchema):
    """verl's tool schema model that dumps the schema dict it was made from, unchanged.

    verl validates a schema into pydantic models that drop the fields they do not declare
    and reorder keys; the chat template would then show the student other tools than the
    SFT rows did.  ``model_dump`` (whatever its arguments) returns the original dict."""

    _exact: dict = PrivateAttr(default_factory=dict)

    @classmethod
    def of(cls, schema: dict) -> "ExactToolSchema":
        obj = cls.model_validate(schema)
        obj._exact = copy.deepcopy(schema)
        return obj

    def model_dump(self, *args: Any, **kwargs: Any) -> dict:  # noqa: D102 - see the class docstring
        return copy.deepcopy(self._exact)


def schema_of(name: str, cfg: ToolsConfig) -> dict:
    """The OpenAI schema of tool ``name`` under ``cfg`` (as rollouts and SFT rows hold it)."""
    for s in tool_schemas(cfg):
        if s["function"]["name"] == name:
            return s
    raise ValueError(f"unknown hopforge tool {name!r} (the tools are: {', '.join(tool_names(cfg))})")


def _as_list(value: Any) -> list:
    if value is None:
        return []
    if hasattr(value, "tolist"):  # numpy arrays, as verl's batches may hand them over
        value = value.tolist()
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


class HopforgeTool(BaseTool):
    """One of hopforge's tools (``config["name"]``) as a verl ``BaseTool`` calling the tool server."""

    def __init__(self, config: dict, tool_schema: Optional[OpenAIFunctionToolSchema] = None):
        config = dict(config or {})
        name = config.get("name") or (tool_schema.function.name if tool_schema is not None else None)
        self.tools_cfg = ToolsConfig(**(config.get("tools") or {}))
        offered = tool_names(self.tools_cfg)
        if name not in offered:
            hint = (f" ({name} is optional: config.tools.extra_tools must name it, as the tool server's "
                    "tools.extra_tools does)" if find_tool(name) is not None else "")
            raise ValueError(f"config.name must be one of {', '.join(offered)}, got {name!r}{hint}")
        if tool_schema is not None and tool_schema.function.name != name:
            raise ValueError(f"tool_schema names {tool_schema.function.name!r} but config.name is {name!r}")
        self.require_exclude = bool(config.get("require_exclude", False))
        self.url = str(config.get("url") or DEFAULT_URL).rstrip("/")
        self.timeout_s = float(config.get("timeout_s", 60.0))
        self.max_retries = int(config.get("max_retries", 3))
        self.verify_server = bool(config.get("verify_server", True))
        schema = schema_of(name, self.tools_cfg)
        self._params = schema["function"]["parameters"]["properties"]
        self._instances: dict[str, list[str]] = {}
        self._clients: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient]" = \
            weakref.WeakKeyDictionary()
        self._verified = False
        super().__init__(config, ExactToolSchema.of(schema))
        if self.verify_server:
            self._verify_now()

    # ---- verl's lifecycle ---------------------------------------------------------------------

    async def create(self, instance_id: Optional[str] = None, **kwargs: Any) -> tuple[str, ToolResponse]:
        """A tool instance for one call; ``create_kwargs["exclude"]``: pages its search never returns."""
        create_kwargs = kwargs.get("create_kwargs") or {}
        iid = instance_id or uuid4().hex
        masked = get_tool(self.name).masked and self.tools_cfg.mask_answer_page
        if masked and self.require_exclude and create_kwargs.get("exclude") is None:
            # verl hands a tool only its own entry of extra_info.tools_kwargs: a row without one would search
            # with the answer page unmasked.  verl shows the policy this error as the call's observation.
            raise ValueError(f"{self.name}: this rl_pool row gives no extra_info.tools_kwargs.{self.name}.create_kwargs"
                             ".exclude (the answer page to mask); rebuild rl_pool with an entry for this tool")
        self._instances[iid] = _as_list(create_kwargs.get("exclude")) if masked else []
        return iid, ToolResponse()

    @rollout_trace_op
    async def execute(self, instance_id: str, parameters: dict[str, Any],
                      **kwargs: Any) -> tuple[ToolResponse, float, dict]:
        """Run the call on the tool server; the observation is the text the rollouts' Toolbox gives."""
        text, is_error = await self.call(parameters, self._instances.get(instance_id, []))
        return ToolResponse(text=text), 0.0, {"error": is_error}

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        return 0.0

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        self._instances.pop(instance_id, None)

    # ---- the call -------------------------------------------------------------------------------

    async def call(self, parameters: Any, exclude: list[str] = ()) -> tuple[str, bool]:
        """``(observation, is_error)`` of one call with the model's ``parameters``."""
        if not isinstance(parameters, dict):
            return _error(f"{self.name}: arguments must be a JSON object, got {type(parameters).__name__}")
        # The words of synth.tools.toolbox.check_arguments, checked here because the server reads an
        # `exclude` field itself: the model's own would otherwise unmask the answer page.
        unknown = sorted(set(parameters) - set(self._params))
        if unknown:
            return _error(f"{self.name}: unknown argument(s) {', '.join(unknown)}; allowed: {', '.join(self._params)}")
        if not self._verified and self.verify_server:
            await self._verify()
        body = dict(parameters)
        if exclude:  # only a masked tool's instances hold pages to exclude (create)
            body["exclude"] = list(exclude)
        status, payload = await self._request("POST", f"/{self.name}", body)
        if status == 200:
            return json.dumps(payload, ensure_ascii=False), False
        if isinstance(payload, dict) and isinstance(payload.get("error"), str):
            return _error(payload["error"])
        raise ToolServerError(f"the tool server at {self.url} answered {status} to /{self.name}: {str(payload)[:200]}")

    async def _request(self, method: str, path: str, body: dict | None = None) -> tuple[int, Any]:
        client = self._client()
        last: str = ""
        for attempt in range(self.max_retries + 1):
            if attempt:
                await asyncio.sleep(min(0.5 * 2 ** (attempt - 1), 8.0))
            try:
                r = await client.request(method, self.url + path, json=body)
            except httpx.HTTPError as e:
                last = f"{type(e).__name__}: {e}"
                continue
            if r.status_code >= 500:
                last = f"HTTP {r.status_code}"
                continue
            try:
                return r.status_code, r.json()
            except ValueError:
                return r.status_code, r.text
        raise ToolServerError(f"the tool server at {self.url} did not answer {path} ({last}) after "
                              f"{self.max_retries + 1} tries; start it with `hopforge tools serve --out DIR "
                              f"--port PORT` on this node and set the tool config's url")

    def _client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = httpx.AsyncClient(timeout=self.timeout_s, trust_env=False)
            self._clients[loop] = client
        return client

    # ---- the server serves these tools ----------------------------------------------------------

    def _check(self, served: Any) -> None:
        mine = tool_schemas(self.tools_cfg)
        if served != mine:
            raise ToolServerError(
                f"the tool server at {self.url} serves other tools than this tool config: its GET /tools differs "
                f"from synth.tools.schema.tool_schemas(tools={self.tools_cfg.model_dump(exclude_defaults=True)}). "
                "Serve the run's config (`hopforge tools serve --config CONFIG --out DIR`) and copy its `tools:` "
                "section into the tool config's `config.tools`")
        self._verified = True

    def _check_ranker(self, health: Any) -> None:
        """The server's ``search`` must rank as the tool config says (``tools.ranker``: its ``/health`` names it;
        a server that names none ranks by BM25)."""
        served = (health.get("ranker") if isinstance(health, dict) else None) or "bm25"
        if served != self.tools_cfg.ranker:
            raise ToolServerError(
                f"the tool server at {self.url} searches with tools.ranker={served} but this tool config says "
                f"{self.tools_cfg.ranker}: serve the run's config (`hopforge tools serve --config CONFIG --out DIR`) "
                "and copy its `tools:` section into the tool config's `config.tools`")

    def _verify_now(self) -> None:
        """Check the server's schemas and ranker at construction; a server not up yet is checked at the first
        call."""
        try:
            r = httpx.get(self.url + "/tools", timeout=min(self.timeout_s, 5.0), trust_env=False)
            served = r.json() if r.status_code == 200 else None
            h = httpx.get(self.url + "/health", timeout=min(self.timeout_s, 5.0), trust_env=False)
            health = h.json() if h.status_code == 200 else None
        except (httpx.HTTPError, ValueError) as e:
            log.warning("hopforge tool %s: the tool server at %s is not answering yet (%s); its tools are checked "
                        "at the first call", self.name, self.url, e)
            return
        if served is not None and health is not None:
            self._check_ranker(health)
            self._check(served)

    async def _verify(self) -> None:
        status, served = await self._request("GET", "/tools")
        if status != 200:
            raise ToolServerError(f"the tool server at {self.url} answered {status} to /tools")
        status, health = await self._request("GET", "/health")
        if status != 200:
            raise ToolServerError(f"the tool server at {self.url} answered {status} to /health")
        self._check_ranker(health)
        self._check(served)


class CheckAnswerTool(BaseTool):
    """CAPF's privileged feedback action ``check_answer`` as a verl tool: training only, no server.

    ``configs/rl/tools-capf.yaml`` lists it after hopforge's three tools.  verl calls ``create`` with
    ``extra_info.tools_kwargs.check_answer.create_kwargs`` of the ``rl_pool`` row, ``{target: [the answer
    page's names], chain: [titles of the path], other_titles: [titles of other pages that are never right]}``
    (:func:`filters.band.tools_kwargs`), so the ground truth
    reaches the tool and never the prompt.  ``execute`` compares the model's ``answer`` with it
    (:func:`synth.tools.feedback.check`) and returns the guidance text; the reward attenuates the
    trajectory by ``reward_kwargs.rho_pf`` per call (:mod:`filters.reward`).  ``config.min_f1`` is the
    run's ``filters.min_f1`` (default 0.8), so "correct" here is what the reward calls correct.
    """

    def __init__(self, config: dict, tool_schema: Optional[OpenAIFunctionToolSchema] = None):
        config = dict(config or {})
        self.min_f1 = float(config.get("min_f1", DEFAULT_MIN_F1))
        self._truth: dict[str, tuple[list[str], list[str], list[str]]] = {}
        super().__init__(config, ExactToolSchema.of(check_answer_schema()))

    async def create(self, instance_id: Optional[str] = None, **kwargs: Any) -> tuple[str, ToolResponse]:
        """A tool instance holding one question's ground truth (``create_kwargs``: target, chain, other_titles)."""
        create_kwargs = kwargs.get("create_kwargs") or {}
        iid = instance_id or uuid4().hex
        self._truth[iid] = (_as_list(create_kwargs.get("target")), _as_list(create_kwargs.get("chain")),
                            _as_list(create_kwargs.get("other_titles")))
        return iid, ToolResponse()

    @rollout_trace_op
    async def execute(self, instance_id: str, parameters: dict[str, Any],
                      **kwargs: Any) -> tuple[ToolResponse, float, dict]:
        """The guidance for the candidate ``parameters["answer"]``; a call without ground truth is an error."""
        if not isinstance(parameters, dict) or not isinstance(parameters.get("answer"), str):
            text, _ = _error(f"{CHECK_ANSWER}: give the candidate as {{\"answer\": \"...\"}}")
            return ToolResponse(text=text), 0.0, {"error": True}
        target, chain, others = self._truth.get(instance_id, ([], [], []))
        if not target:
            raise ValueError(f"{CHECK_ANSWER} has no ground truth: the rl_pool row needs "
                             "extra_info.tools_kwargs.check_answer (rebuild rl_pool) and need_tools_kwargs")
        verdict, guidance = check(parameters["answer"], target, chain, self.min_f1, others)
        return ToolResponse(text=guidance), 0.0, {"verdict": verdict}

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        return 0.0

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        self._truth.pop(instance_id, None)


def _error(message: str) -> tuple[str, bool]:
    """The observation of a call the agent got wrong, as ``Toolbox.call`` writes it."""
    return json.dumps({"error": message}, ensure_ascii=False), True


__all__ = ["CheckAnswerTool", "DEFAULT_URL", "ExactToolSchema", "HopforgeTool", "ToolServerError", "schema_of"]
