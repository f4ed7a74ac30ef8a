"""The offline oracle agent: no gold path in its hint, stateless, a researcher's moves, honest when it fails."""

import asyncio
import json
from collections import Counter
from dataclasses import fields

import pyarrow.dataset as ds
import pytest

from filters.grounded import ungrounded_steps
from flows.stages import QUESTIONS
from synth.engine.records import Question
from synth.engine.runner import run_stage
from synth.engine.seeding import derive_seed
from synth.rollout import loop
from synth.rollout.loop import rollout_one
from synth.teacher.oracle import OracleModel
from synth.teacher.oracle.agent import next_turn
from synth.teacher.oracle.reading import QuestionView, start_name
from synth.teacher.tasks import AGENT, AgentHint, hinted, task_of
from synth.tools.search import SearchIndex
from synth.tools.toolbox import Toolbox


class SpyTeacher:
    """The oracle backend, recording every hint it is handed."""

    tool_protocol = "native"

    def __init__(self, cfg):
        self.cfg, self.model, self.hints = cfg.teacher, OracleModel(cfg.teacher), []

    async def chat(self, messages, tools, sample_index=0, hint=None):  # as Teacher.chat: it is the rollout's teacher
        self.hints.append(hint)
        with hinted(hint):
            return await self.model.chat(messages, tools, sample_index=sample_index, task=task_of(hint))


@pytest.fixture(scope="module")
def world(demo_store):
    store, cfg = demo_store
    run_stage(QUESTIONS, cfg, store, progress=False)
    questions = [Question.from_row(r) for r in ds.dataset(store.root / "questions").to_table().to_pylist()]
    return cfg, SearchIndex.open(store.path("index")), questions


def roll(world, q: Question, sample: int = 0, cfg=None):
    base, index, _ = world
    cfg = cfg or base
    teacher = SpyTeacher(cfg)
    toolbox = Toolbox(index, cfg.tools, mask_page_ids=[q.answer_page_id])
    return asyncio.run(rollout_one(teacher, toolbox, q, sample, cfg)), teacher


def test_the_hint_holds_no_gold_path(world) -> None:
    cfg, _, questions = world
    q = questions[0]
    trace, teacher = roll(world, q)
    seed = derive_seed(cfg.seed, "rollout", q.question_id)
    assert teacher.hints and all(h == AGENT.hint(seed=seed) for h in teacher.hints)
    assert all(type(h) is AgentHint for h in teacher.hints) and [f.name for f in fields(AgentHint)] == ["seed"]
    assert not hasattr(loop, "Gold") and not hasattr(loop, "gold_for")


def test_it_answers_as_a_researcher_and_sometimes_fails(world) -> None:
    _, _, questions = world
    c_of_n, calls = Counter(), Counter()
    for q in questions[:30]:
        correct = 0
        for sample in range(4):
            trace, _ = roll(world, q, sample)
            correct += trace.final_answer == q.answer
            assert ungrounded_steps(trace, 0.8) == []  # it acts only on what it was shown
            for m in json.loads(trace.messages):
                for tc in m.get("tool_calls") or []:
                    calls[tc["function"]["name"]] += 1
        c_of_n[correct] += 1
    solved = sum(n for c, n in c_of_n.items() if c)
    assert solved >= 0.8 * 30, c_of_n  # it finds the way, from the question and the tools alone
    assert c_of_n[4] < 30, c_of_n  # ... but not always: a budget spent on the wrong links, a hasty pick
    assert calls["search"] and calls["open"] > calls["search"] / 2  # it searches, opens and checks


def _with(cfg, **rollout):
    return cfg.model_copy(update={"rollout": cfg.rollout.model_copy(update=rollout)})


@pytest.mark.parametrize("compress", [False, True])
def test_a_resumed_rollout_continues_exactly(world, compress) -> None:
    cfg, _, questions = world
    cfg = _with(cfg, compress_observations=compress)
    q = questions[1]
    seed = derive_seed(cfg.seed, "rollout", q.question_id)
    for sample in range(3):
        trace, _ = roll(world, q, sample, cfg)
        msgs = json.loads(trace.messages)
        turns = [i for i, m in enumerate(msgs) if m["role"] == "assistant"]
        assert len(turns) >= 4
        for i in turns:  # every turn is re-derived from the conversation it was shown, nothing else:
            # not even the memo of earlier replays (a pure function's cache): next_turn without one replays it all
            shown = loop.compress(msgs[:i], cfg.rollout.keep_observations) if compress else msgs[:i]
            assert next_turn(shown, sample, seed) == msgs[i]


def test_with_compressed_observations_it_walks_on_from_its_notes(world) -> None:
    cfg, _, questions = world
    keep = 2
    full, compressed = _with(cfg, compress_observations=False), _with(cfg, compress_observations=True,
                                                                        keep_observations=keep)
    from filters.repeats import repeated_calls
    right = {False: 0, True: 0}
    elided = finds = 0
    for q in questions[:20]:
        for sample in range(2):
            right[False] += roll(world, q, sample, full)[0].final_answer == q.answer
            trace, _ = roll(world, q, sample, compressed)
            right[True] += trace.final_answer == q.answer
            msgs = json.loads(trace.messages)
            assert ungrounded_steps(trace, 0.8) == []
            # Its notes state the path it walked, page by page, in the order it accepted them.
            notes = [m["content"] for m in msgs if m["role"] == "assistant" and "Path so far: " in m["content"]]
            if trace.final_answer == q.answer:
                last = notes[-1].split("Path so far: ")[1]
                assert last.startswith(q.titles[0]) and q.titles[-2] in last
                # ... and the links of each page it stood on, once it had read them.
                assert sum("Links of " in n for n in notes) >= len(q.path) - 2
            # It saw placeholders in place of older observations, yet never made a call twice (the stored trace
            # holds every observation: a second identical call would teach the student to loop).
            turns = [i for i, m in enumerate(msgs) if m["role"] == "assistant"]
            elided += any(m["content"] == loop.PLACEHOLDER for m in loop.compress(msgs[:turns[-1]], keep))
            assert max(repeated_calls(trace.conversation).values()) == 1
            finds += trace.calls_of("find")
    # It still checks a link's passage with `find` now and then (the rows teach the tool).
    assert finds >= 3
    # Before, the compressed agent answered "unknown" to every question; now it keeps its quality.
    assert elided >= 30
    assert right[True] >= 0.9 * right[False] > 0, right


def test_without_notes_of_its_links_it_reads_the_page_again(world) -> None:
    cfg, _, questions = world
    q = next(q for q in questions if len(q.path) >= 4)
    seed = derive_seed(cfg.seed, "rollout", q.question_id)
    trace, _ = roll(world, q, 0, _with(cfg, compress_observations=False))
    msgs = json.loads(trace.messages)
    # Cut the conversation just after the turn that noted the second page's links, elide every observation but
    # the last, and strike the notes of links: it cannot tell where the page it stands on links, so it reopens it.
    i = next(i for i, m in enumerate(msgs) if m["role"] == "assistant" and m["content"].count(" → ") == 1
             and "Links of " in m["content"])
    cut = loop.compress(msgs[:i + 2], 1)
    for m in cut:
        if m["role"] == "assistant" and "Links of " in m["content"]:
            m["content"] = m["content"].split("Links of ")[0]
    reply = next_turn(cut, 0, seed)
    assert reply["tool_calls"][0]["function"]["name"] == "open"
    assert json.loads(reply["tool_calls"][0]["function"]["arguments"]) == {"page": q.path[1]}


def test_its_notes_read_back() -> None:
    from synth.teacher.oracle.memory import Links, Note, note, read_notes, stated, stated_out
    path = (("11", "Mercury (planet)"), ("42", "St. Louis"))
    msgs = [{"role": "user", "content": "q"},
            {"role": "assistant", "content": "Opening it."},
            {"role": "assistant", "content": "Fits. " + note(path[:1], ["Area", "Trade, Inc."]) + " Searching."},
            {"role": "assistant", "content": "Yes. " + note(path) + " Next."}]
    notes = read_notes(msgs)
    assert notes == {2: Note(1, path[:1], ("Area", "Trade, Inc.")), 3: Note(2, path, ())}
    assert stated(notes, 1) == () and stated(notes, 2) == path[:1] and stated(notes, 9) == path
    assert stated_out(notes, 1) == {"area", "trade, inc."} and stated_out(notes, 2) == set()
    # A clue whose relation word no link's sentence has: its other links are read back as the others.
    none = note(path[:1], links=Links((), ("Mars", "Venus")), page="Mercury (planet)", relation="orbit")
    assert none.endswith("in the passage on orbit: none. Its other links: “Mars”, “Venus”.")
    assert read_notes([{"role": "assistant", "content": none}])[1].links == Links((), ("Mars", "Venus"))


def test_it_fails_for_the_right_reasons(world) -> None:
    _, _, questions = world
    q = next(q for q in questions if len(q.hops) >= 3)
    view = QuestionView.parse(q.question)
    # The last clue now describes nothing the previous page links to, and the answer page is masked from
    # search: the agent cannot know the way, and it does not guess.
    last = view.clues[-1].text
    bogus = Question(**{**q.to_row(), "hops": q.hops,
                        "question": q.question.replace(last, "That page links to a lighthouse keeper on the moon.")})
    for sample in range(4):
        trace, _ = roll(world, bogus, sample)
        assert trace.final_answer != bogus.answer
        assert ungrounded_steps(trace, 0.8) == []


def test_turn_texts_vary_and_name_their_reasons(world) -> None:
    _, _, questions = world
    texts = []
    for q in questions[:8]:
        for sample in range(2):
            trace, _ = roll(world, q, sample)
            texts += [m["content"] for m in json.loads(trace.messages) if m["role"] == "assistant"]
    assert len(set(texts)) >= 0.8 * len(texts)
    # It names the clue and what a page says it is when it judges one.
    assert any(" is " in t and ("fits" in t or "not" in t or "matches" in t) for t in texts)


def test_reading_the_contract() -> None:
    q = QuestionView.parse("Consider Mary I. In turn, the latter was succeeded by an English queen. That one was "
                           "born in one of the 16th-century palaces. What is the name of the last one?")
    assert q.opening == "Consider Mary I." and q.start == "Mary I"
    first, second = q.clues
    assert first.relation == "succeeded" and first.words == frozenset({"english", "queen"})
    assert first.described == "an English queen"
    assert second.relation == "born" and second.fits("Royal palace built in 1515") and not second.fits("Royal palace")
    generic = QuestionView.parse("Think of Mary I. It is associated with a royal palace. Name it.").clues[0]
    assert generic.relation is None and generic.described == "a royal palace"
    assert start_name("Look up Supply and demand on Wikipedia.") == "Supply and demand"
    assert start_name("Start from the Wikipedia article on The Hague.") == "The Hague"
