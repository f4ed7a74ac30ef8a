"""Where each message of a rendered conversation lies, for any chat template, found by rendering prefixes.

A chat template is a black box that turns messages into text.  What the student must learn is
the text it would write itself: for an assistant message, everything after the generation
prompt (``render(messages[:i], add_generation_prompt=True)``) up to and including the turn's
end-of-turn token.  Every other character belongs to a message the student only reads.

:func:`conversation_turns` finds these regions without trusting ``{% generation %}`` markers:

* a non-assistant message ends where the render of the conversation cut after it stops
  agreeing with the full render (their common prefix);
* an assistant message starts being *written* where its generation prompt ends, and stops
  after the first end-of-turn token that follows, provided the template also closes the turn
  with that token when it is the last message (so the token is the turn's own, not the next
  message's).

The regions give a loss mask for templates without markers (:meth:`Turns.assistant_mask`)
and let :mod:`sft.masking` check the masks of templates with markers.  :func:`end_of_turn`
reads the end-of-turn token off the template itself, because it belongs to the template:
Gemma ends turns with ``<end_of_turn>`` though its eos is ``<eos>``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

# Probe texts for end_of_turn: plain words no template rewrites, and no tokenizer merges with markup.
_PROBE = ("Which river flows through Paris", "The Seine", "And through Rome")


def common_prefix_len(a: str, b: str) -> int:
    """Length of the longest common prefix of two strings (binary search over C-level compares)."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def render(tokenizer, messages: list[dict], tools, chat_template: str | None,
           add_generation_prompt: bool = False) -> str:
    """The template's text for ``messages`` (an empty conversation renders as the empty string)."""
    if not messages:
        return ""
    return tokenizer.apply_chat_template(messages, tools=tools, chat_template=chat_template, tokenize=False,
                                         add_generation_prompt=add_generation_prompt)


def _render_prefix(tokenizer, messages: list[dict], tools, chat_template: str | None,
                   add_generation_prompt: bool = False) -> str | None:
    """:func:`render` of a cut conversation, or None when the template refuses to render it."""
    from jinja2 import TemplateError

    try:
        return render(tokenizer, messages, tools, chat_template, add_generation_prompt)
    except (TemplateError, ValueError, TypeError, KeyError, IndexError):
        return None


@lru_cache(maxsize=16)
def untracked_template(template: str):
    """``template`` compiled as transformers compiles it, but with each ``{% generation %}`` block as its body
    in a scope of its own rather than a call to the assistant tracker.

    A prefix render tracks nothing, and the tracker's call per block (a macro built and called through the
    sandbox) was about a quarter of a prefix render.  The block's text is the same: the tracker returns its
    body's output unchanged, and a scope keeps the body's assignments inside it as the macro did.  The
    environment is an overlay of transformers' own (its sandbox, filters, globals and options), with only the
    extension that parses ``generation`` replaced.  Returns None when that cannot be built."""
    from jinja2 import nodes
    from jinja2.ext import Extension
    from transformers.utils import chat_template_utils as ctu

    class Untracked(Extension):
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return nodes.Scope(body, lineno=lineno)

    try:
        env = ctu._compile_jinja_template(template).environment.overlay()
        env.extensions = {k: e for k, e in env.extensions.items() if "generation" not in e.tags}
        env.add_extension(Untracked)
        return env.from_string(template)
    except Exception:  # noqa: BLE001 - another transformers or jinja: the tracked template serves
        return None


class PrefixRenderer:
    """Renders ``messages[:n]`` of one conversation, for any ``n``, as :func:`render` does, but converts the
    conversation, the tools and the template's variables once rather than at every prefix.

    ``apply_chat_template`` converts the whole conversation to plain data on every call (most of the time
    of a short render), which made locating the messages of a 50-message conversation, ~75 prefix
    renders, quadratic in that conversion.  The fast path renders with the template compiled as
    transformers compiles it, generation blocks untracked (:func:`untracked_template`), and the same
    conversions done once; it is used only when it renders the whole conversation exactly as
    ``apply_chat_template`` does (checked once per conversation), and otherwise (another transformers,
    tools given as functions) every render goes through ``apply_chat_template``.
    """

    use_fast = True  # False: every render through apply_chat_template

    def __init__(self, tokenizer, messages: list[dict], tools, chat_template: str | None, full: str | None = None):
        self.tokenizer, self.messages, self.tools, self.chat_template = tokenizer, messages, tools, chat_template
        self.full = full if full is not None else render(tokenizer, messages, tools, chat_template)
        self._fast = None
        try:
            from transformers.utils import chat_template_utils as ctu

            if not self.use_fast:
                raise RuntimeError("the fast path is off")
            if tools is not None and not all(isinstance(t, dict) for t in tools):
                raise TypeError("tools given as functions")
            source = tokenizer.get_chat_template(chat_template, tools)
            compiled = untracked_template(source) or ctu._compile_jinja_template(source)
            chat = ctu._alias_reasoning_fields(ctu._plain_template_data(ctu._normalize_chat_messages(messages)))
            variables = ctu._plain_template_data(dict(tokenizer.special_tokens_map))
            plain_tools = ctu._plain_template_data(tools)

            def fast(n: int, add_generation_prompt: bool) -> str:
                return compiled.render(messages=chat[:n], tools=plain_tools, documents=None,
                                       add_generation_prompt=add_generation_prompt, **variables)

            if messages and fast(len(messages), False) == self.full:
                self._fast = fast
        except Exception:  # noqa: BLE001 - any failure of the fast path leaves the exact one
            self._fast = None

    @property
    def fast(self) -> bool:
        """Whether prefixes render on the fast path."""
        return self._fast is not None

    def __call__(self, n: int, add_generation_prompt: bool = False) -> str | None:
        """The render of ``messages[:n]``, or None when the template refuses it (see :func:`_render_prefix`)."""
        if n == len(self.messages) and not add_generation_prompt:
            return self.full
        if self._fast is None:
            return _render_prefix(self.tokenizer, self.messages[:n], self.tools, self.chat_template,
                                  add_generation_prompt)
        if n == 0:
            return ""
        from jinja2 import TemplateError

        try:
            return self._fast(n, add_generation_prompt)
        except (TemplateError, ValueError, TypeError, KeyError, IndexError):
            return None


def end_of_turn(tokenizer, chat_template: str | None) -> str | None:
    """The token ``chat_template`` writes to close an assistant turn, or None when it writes none.

    A probe conversation (user, assistant, user) is rendered; the end-of-turn token is the first
    added (special or control) token between the assistant's words and the next user's words:
    ``<|im_end|>`` for ChatML, ``<|eot_id|>`` for Llama 3, ``<end_of_turn>`` for Gemma, ``</s>``
    for Mistral.
    """
    q1, answer, q2 = _PROBE
    msgs = [{"role": "user", "content": q1}, {"role": "assistant", "content": answer},
            {"role": "user", "content": q2}]
    text = _render_prefix(tokenizer, msgs, None, chat_template)
    if text is None:
        from synth.engine.errors import InputError

        raise InputError("the chat template cannot render a plain user / assistant / user conversation")
    a = text.find(answer, max(text.find(q1), 0))
    b = text.find(q2, a + len(answer)) if a >= 0 else -1
    if b < 0:
        return None
    tail = text[a + len(answer):b]
    added = set(tokenizer.get_added_vocab().values())
    enc = tokenizer(tail, add_special_tokens=False, return_offsets_mapping=True)
    for tid, (s, e) in zip(enc["input_ids"], enc["offset_mapping"]):
        if tid in added and e > s:
            return tail[s:e]
    return None


@dataclass
class Turns:
    """A rendered conversation and, per message, where it lies and what of it the model writes.

    ``spans[i]`` is message ``i``'s ``(start, end)`` in ``text`` (contiguous, covering the text);
    ``written[i]`` is, for an assistant message, the ``(start, end)`` the model writes (None for
    other roles); ``eot_at[i]`` is where that turn's end-of-turn token starts (None: the turn has
    none); ``unattributable`` lists assistant messages whose generation prompt is not a prefix
    of the full render, so no mask can be derived for them from prefixes.
    """

    text: str
    spans: list[tuple[int, int]] = field(default_factory=list)
    written: list[tuple[int, int] | None] = field(default_factory=list)
    eot_at: list[int | None] = field(default_factory=list)
    unattributable: list[int] = field(default_factory=list)

    def prompt_end(self) -> int:
        """Where the model first writes: the end of the prompt it is given (the whole text if never)."""
        return next((w[0] for w in self.written if w is not None), len(self.text))

    def assistant_mask(self, offsets: list[tuple[int, int]]) -> list[int]:
        """1 for each token (by character ``offsets``) that overlaps text the model writes, else 0."""
        regions = [w for w in self.written if w is not None and w[1] > w[0]]
        mask, r = [0] * len(offsets), 0
        for t, (s, e) in enumerate(offsets):  # tokens and regions are both in order: one pass
            while r < len(regions) and s >= regions[r][1]:
                r += 1
            if r == len(regions):
                break
            if e > s and e > regions[r][0]:
                mask[t] = 1
        return mask


def conversation_turns(tokenizer, messages: list[dict], tools, chat_template: str | None, eot: str,
                       rendered: str | None = None) -> Turns:
    """Locate every message of ``messages`` in its render, and what the model writes of each assistant turn."""
    msgs = [dict(m) for m in messages]
    prefix = PrefixRenderer(tokenizer, msgs, tools, chat_template, rendered)
    full = prefix.full
    turns, start = Turns(full), 0
    for i, m in enumerate(msgs):
        if m.get("role") == "assistant":
            end, written, eot_at = _assistant(prefix, i, eot, full, start, turns)
        else:
            cut = prefix(i + 1)
            # A prefix the template refuses (Llama's tools need a user message after the system one) ends
            # nowhere: its text goes to the next message, which the model reads all the same.
            end, written, eot_at = max(common_prefix_len(cut or "", full), start), None, None
        turns.spans.append((start, end))
        turns.written.append(written)
        turns.eot_at.append(eot_at)
        start = end
    if turns.spans:  # what follows the last message (a trailing newline) is still that message's
        turns.spans[-1] = (turns.spans[-1][0], len(full))
    return turns


def _assistant(prefix: PrefixRenderer, i, eot, full, start, turns):
    """``(span end, written region, end-of-turn position)`` of assistant message ``i``."""
    prompt = prefix(i, add_generation_prompt=True)
    alone = prefix(i + 1)
    if prompt is None or alone is None:
        turns.unattributable.append(i)
        prompt, alone = prompt or "", alone or ""
    g = common_prefix_len(prompt, full)
    if g < len(prompt):  # the template rewrites earlier text once this turn follows it
        turns.unattributable.append(i)
    g = max(g, start)
    pos = full.find(eot, g) if eot else -1
    # The first end-of-turn after the generation prompt is this turn's own only if the turn, rendered
    # last, also ends with it: a template that leaves the turn open would else lend it the next message's.
    own = pos >= 0 and alone[len(prompt):].rstrip().endswith(full[g:pos + len(eot)].rstrip())
    agreed = common_prefix_len(alone, full)  # through the glue after the turn (a newline) when prefix-preserving
    if own:
        return max(pos + len(eot), agreed), (g, pos + len(eot)), pos
    end = max(agreed, g)
    return end, (g, end), None


__all__ = ["PrefixRenderer", "Turns", "common_prefix_len", "conversation_turns", "end_of_turn", "render",
           "untracked_template"]
