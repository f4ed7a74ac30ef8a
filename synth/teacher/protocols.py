"""Tool-calling protocols: how tool schemas, calls and results travel between hopforge and a server.

``native``   tools go out as ``tools``, calls come back in ``tool_calls`` (OpenAI; vLLM with
             ``--enable-auto-tool-choice --tool-call-parser ...``; llama.cpp with ``--jinja``).
``hermes``   Hermes / Qwen: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``; results
             come back as ``<tool_response>...</tool_response>``.
``llama3``   Llama 3.x: a bare ``{"name": ..., "parameters": {...}}``, optionally after
             ``<|python_tag|>``, or ``name.call(key="value")``.
``mistral``  ``[TOOL_CALLS][{"name": ..., "arguments": {...}}]`` (or ``[TOOL_CALLS]name[ARGS]{...}``);
             results as ``[TOOL_RESULTS]...[/TOOL_RESULTS]``.
``react``    ``Action: name`` then ``Action Input: {...}``; results as ``Observation: ...``.

Many served models write tool calls as text, and many servers ignore ``tools`` silently.
With a text protocol the openai backend rewrites the conversation before sending it
(:func:`to_text_messages`: schemas and instructions in the system prompt, past calls as
text, results as user messages, which every chat template accepts) and reads the calls back
into OpenAI's ``tool_calls`` shape (:func:`parse_calls`), so the rollout loop and the stored
traces are the same whatever protocol carried them.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from synth.teacher.prompting import object_spans

TEXT_PROTOCOLS = ("hermes", "llama3", "mistral", "react")
PROTOCOLS = ("native", *TEXT_PROTOCOLS)
# The vLLM --tool-call-parser that reads each text format, for the fix a preflight names.
VLLM_PARSERS = {"hermes": "hermes", "llama3": "llama3_json", "mistral": "mistral"}


def _fn(tool: dict) -> dict:
    return tool.get("function", tool)


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False)


def _args_of(obj: dict) -> Any:
    """A call's arguments as a dict, or the raw text when they are not an object (the tool then
    answers with an error the model can fix, as it does for a native call with bad arguments)."""
    args = obj.get("arguments", obj.get("parameters"))
    if args is None:
        return {}
    if isinstance(args, str):
        try:
            parsed = json.loads(args)
        except ValueError:
            return args
        return parsed if isinstance(parsed, dict) else args
    return args


def _named(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("name"), str) and bool(obj["name"].strip())


def _objects(text: str) -> list[tuple[int, int, dict]]:
    """Top-level JSON objects of ``text`` that parse strictly, with their spans."""
    out = []
    for a, b in object_spans(text)[0]:
        try:
            obj = json.loads(text[a:b])
        except ValueError:
            continue
        if isinstance(obj, dict):
            out.append((a, b, obj))
    return out


def _cut(text: str, spans: list[tuple[int, int]]) -> str:
    for a, b in sorted(spans, reverse=True):
        text = text[:a] + text[b:]
    return text.strip()


# ---- reading calls out of text ------------------------------------------------------------------

_HERMES = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.S)


def _parse_hermes(text: str) -> tuple[str, list[tuple[str, Any]]]:
    calls, spans = [], []
    for m in _HERMES.finditer(text):
        closed = m.group(0).endswith("</tool_call>")
        try:  # an unclosed block counts only when its JSON is whole (some servers eat the end tag)
            obj = json.loads(m.group(1).strip())
        except ValueError:
            obj = None
        if obj is None and closed:
            found = _objects(m.group(1))
            obj = found[0][2] if found else None
        if _named(obj):
            calls.append((obj["name"].strip(), _args_of(obj)))
            spans.append(m.span())
    return _cut(text, spans), calls


_PY_CALL = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*\((.*)\)\s*$", re.S)


def _pythonic(src: str) -> list[tuple[str, Any]]:
    """Calls written as Python (``search(query="x")``, ``brave_search.call(query="x")``, a list of them);
    [] unless every part is a call with literal keyword arguments."""
    try:
        tree = ast.parse(src.strip(), mode="eval").body
    except (SyntaxError, ValueError):
        return []
    nodes = tree.elts if isinstance(tree, (ast.List, ast.Tuple)) else [tree]
    calls = []
    for node in nodes:
        if not isinstance(node, ast.Call) or node.args:
            return []
        name = ast.unparse(node.func).removesuffix(".call")
        try:
            args = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg}
        except ValueError:
            return []
        calls.append((name, args))
    return calls


def _parse_llama3(text: str) -> tuple[str, list[tuple[str, Any]]]:
    before, tag, body = text.partition("<|python_tag|>")
    if not tag:
        before, body = "", text
    body = body.replace("<|eom_id|>", "").replace("<|eot_id|>", "")
    calls, spans = [], []
    for a, b, obj in _objects(body):
        # A bare JSON answer is not a call: it needs a name and parameters (or arguments).
        if _named(obj) and ("parameters" in obj or "arguments" in obj):
            calls.append((obj["name"].strip(), _args_of(obj)))
            spans.append((a, b))
    if calls:
        rest = _cut(body, spans).strip(" \n;")
        return "\n".join(x for x in (before.strip(), rest) if x), calls
    stripped = body.strip()
    if tag or (stripped.startswith("[") and stripped.endswith(")]")):
        calls = [c for part in stripped.split(";") if part.strip() for c in _pythonic(part)] \
            if tag else _pythonic(stripped)
        if calls:
            return before.strip(), calls
    return text, []


_MISTRAL_V11 = re.compile(r"\s*([A-Za-z_][\w.\-]*)\s*(?:\[CALL_ID\]\s*\w+\s*)?\[ARGS\]")


def _parse_mistral(text: str) -> tuple[str, list[tuple[str, Any]]]:
    before, tag, body = text.partition("[TOOL_CALLS]")
    if not tag:
        return text, []
    body = body.replace("[TOOL_CALLS]", " ").replace("</s>", "")
    calls: list[tuple[str, Any]] = []
    stripped = body.strip()
    if stripped.startswith("["):
        try:
            items, end = json.JSONDecoder().raw_decode(stripped)
        except ValueError:
            items, end = None, 0
        if isinstance(items, list) and all(_named(x) for x in items):
            calls = [(x["name"].strip(), _args_of(x)) for x in items]
            return "\n".join(x for x in (before.strip(), stripped[end:].strip()) if x), calls
    pos = 0
    while m := _MISTRAL_V11.match(body, pos):
        try:
            args, end = json.JSONDecoder().raw_decode(body, m.end())
        except ValueError:
            break
        calls.append((m.group(1), args))
        pos = end
    if calls:
        return "\n".join(x for x in (before.strip(), body[pos:].strip()) if x), calls
    found = [(obj["name"].strip(), _args_of(obj)) for _, _, obj in _objects(body) if _named(obj)]
    return (before.strip(), found) if found else (text, [])


_ACTION = re.compile(r"^[ \t]*Action[ \t]*:[ \t]*`?([\w.\-]+)`?[ \t]*\n+[ \t]*Action[ \t]*Input[ \t]*:[ \t]*", re.M)
_AFTER_INPUT = re.compile(r"\n[ \t]*(?:Observation|Thought|Action|Final Answer)[ \t]*:", re.I)


def _parse_react(text: str, tools: list[dict]) -> tuple[str, list[tuple[str, Any]]]:
    matches = list(_ACTION.finditer(text))
    calls = []
    for m in matches:
        rest = text[m.end():]
        stop = _AFTER_INPUT.search(rest)
        raw = re.sub(r"^```(?:json)?\s*|\s*```$", "", (rest[:stop.start()] if stop else rest).strip())
        found = _objects(raw)
        if found and found[0][0] == 0:
            args: Any = found[0][2]
        else:
            # A bare value for a tool with one required parameter: `Action Input: Paris` is {"query": "Paris"}.
            params = next((_fn(t).get("parameters", {}).get("required", []) for t in tools
                           if _fn(t).get("name") == m.group(1)), [])
            args = {params[0]: raw.strip().strip('"')} if len(params) == 1 and raw.strip() else raw
        calls.append((m.group(1), args))
    if not calls:
        return text, []
    return text[:matches[0].start()].strip(), calls


def parse_calls(protocol: str, text: str | None, tools: list[dict]) -> tuple[str | None, list[tuple[str, Any]]]:
    """``(text without the calls, [(name, arguments)])`` read from a reply in ``protocol``'s format.

    ``arguments`` is a dict, or the raw text when the model wrote something that is not a JSON
    object (the tool then reports the error).  A block cut short is left in the text, never
    guessed at.  ``native`` and text without calls give ``(text, [])``.
    """
    if not text or protocol == "native":
        return text, []
    if protocol == "hermes":
        return _parse_hermes(text)
    if protocol == "llama3":
        return _parse_llama3(text)
    if protocol == "mistral":
        return _parse_mistral(text)
    if protocol == "react":
        return _parse_react(text, tools)
    raise ValueError(f"unknown tool protocol {protocol!r}")


def detect(text: str | None, tools: list[dict]) -> str | None:
    """The text protocol whose calls ``text`` holds (a call to one of ``tools``), or None."""
    names = {_fn(t).get("name") for t in tools}
    # Most specific markers first: a Hermes or Mistral call also holds a Llama-style JSON object.
    for protocol in ("hermes", "mistral", "llama3", "react"):
        _, calls = parse_calls(protocol, text, tools)
        if any(name in names for name, _ in calls):
            return protocol
    return None


def to_openai_calls(calls: list[tuple[str, Any]], turn: int) -> list[dict]:
    """Parsed calls in OpenAI's ``tool_calls`` shape, with ids ``call_<turn>_<i>`` (the rollout loop's own)."""
    return [{"id": f"call_{turn}_{i}", "type": "function",
             "function": {"name": name, "arguments": args if isinstance(args, str) else _dumps(args)}}
            for i, (name, args) in enumerate(calls)]


# ---- writing the conversation as text -----------------------------------------------------------

def instructions(protocol: str, tools: list[dict]) -> str:
    """The system-prompt text that shows ``tools`` and how to call them in ``protocol``."""
    fns = [_fn(t) for t in tools]
    if protocol == "hermes":  # Qwen2.5's own template text, which Hermes-style models were trained on
        listed = "\n".join(_dumps({"type": "function", "function": f}) for f in fns)
        return ("# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                "You are provided with function signatures within <tools></tools> XML tags:\n"
                f"<tools>\n{listed}\n</tools>\n\nFor each function call, return a json object with function name "
                "and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
                '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>')
    if protocol == "llama3":  # Meta's JSON-based tool calling prompt for Llama 3.1+
        listed = "\n\n".join(_dumps(f) for f in fns)
        return ("Given the following functions, please respond with a JSON for a function call with its proper "
                "arguments that best answers the given prompt.\n\nRespond in the format "
                '{"name": function name, "parameters": dictionary of argument name and its value}. '
                "Do not use variables. Call one function at a time; when you need no function, reply in plain "
                f"text.\n\n{listed}")
    if protocol == "mistral":
        listed = _dumps([{"type": "function", "function": f} for f in fns])
        return (f"[AVAILABLE_TOOLS]{listed}[/AVAILABLE_TOOLS]\nTo call tools, reply with [TOOL_CALLS] followed by "
                'a JSON list of calls, e.g. [TOOL_CALLS][{"name": "NAME", "arguments": {...}}]. '
                "Results come back as [TOOL_RESULTS]...[/TOOL_RESULTS].")
    if protocol == "react":
        lines = [f"- {f['name']}: {f.get('description', '').strip()} Arguments (JSON schema): "
                 f"{_dumps(f.get('parameters', {}))}" for f in fns]
        return ("You can use these tools:\n" + "\n".join(lines) + "\n\nTo use a tool, write exactly:\n"
                "Action: <tool name>\nAction Input: <the arguments as a JSON object>\nand stop there: the result "
                "comes back as \"Observation: ...\". Use one action at a time. When you need no tool, write no "
                "Action.")
    raise ValueError(f"not a text tool protocol: {protocol!r}")


def _calls_text(protocol: str, calls: list[dict]) -> str:
    pairs = [(c["function"]["name"], _loads_or_raw(c["function"].get("arguments"))) for c in calls]
    if protocol == "hermes":
        return "\n".join(f"<tool_call>\n{_dumps({'name': n, 'arguments': a})}\n</tool_call>" for n, a in pairs)
    if protocol == "llama3":
        return "\n".join(_dumps({"name": n, "parameters": a}) for n, a in pairs)
    if protocol == "mistral":
        return "[TOOL_CALLS]" + _dumps([{"name": n, "arguments": a} for n, a in pairs])
    return "\n".join(f"Action: {n}\nAction Input: {a if isinstance(a, str) else _dumps(a)}" for n, a in pairs)


def _loads_or_raw(args: Any) -> Any:
    if isinstance(args, str):
        try:
            return json.loads(args)
        except ValueError:
            return args
    return args if args is not None else {}


def _result_text(protocol: str, msg: dict) -> str:
    content = _text(msg.get("content"))
    if protocol == "hermes":
        return f"<tool_response>\n{content}\n</tool_response>"
    if protocol == "llama3":
        return f"Output of {msg.get('name') or 'the tool'}:\n{content}"
    if protocol == "mistral":
        return f"[TOOL_RESULTS]{_dumps({'call_id': msg.get('tool_call_id'), 'content': content})}[/TOOL_RESULTS]"
    return f"Observation: {content}"


def _text(content: Any) -> str:
    if isinstance(content, list):  # OpenAI content parts
        return "".join(p.get("text") or "" for p in content if isinstance(p, dict))
    return content or ""


def to_text_messages(protocol: str, messages: list[dict], tools: list[dict]) -> list[dict]:
    """``messages`` rewritten for a server that knows nothing of tools.

    The tools and the protocol's instructions join the system prompt; an assistant turn's calls
    become text in the protocol's format; tool results become one user message per turn (roles
    then alternate, which templates such as Gemma's insist on).  An assistant turn's reasoning goes back as
    :func:`synth.teacher.types.outgoing_reasoning` put it: in its field (kept here), or in the content.
    """
    head = instructions(protocol, tools)
    out: list[dict] = []
    rest = messages
    if messages and messages[0].get("role") == "system":
        head = f"{_text(messages[0].get('content'))}\n\n{head}"
        rest = messages[1:]
    out.append({"role": "system", "content": head})
    for m in rest:
        role = m.get("role")
        if role == "tool":
            text, role = _result_text(protocol, m), "user"
        elif role == "assistant" and m.get("tool_calls"):
            text = "\n".join(x for x in (_text(m.get("content")).strip(), _calls_text(protocol, m["tool_calls"])) if x)
        else:
            text = _text(m.get("content"))
        extra = {k: v for k, v in m.items() if k not in _MESSAGE_KEYS} if role == "assistant" else {}
        if out[-1]["role"] == role and role != "system" and not extra:
            out[-1]["content"] += "\n\n" + text
        else:
            out.append({"role": role, "content": text, **extra})
    return out


# The keys a text protocol rewrites; any other key of an assistant turn is its reasoning, in the server's field.
_MESSAGE_KEYS = {"role", "content", "tool_calls", "tool_call_id", "name"}
