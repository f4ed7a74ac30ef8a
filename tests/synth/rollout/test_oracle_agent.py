"""The offline oracle agent: no gold path in its hint, stateless, honest when it fails, varied in its words."""

import asyncio
import json

import pytest

from flows.config import load_config
from flows.stages import INDEX
from filters.grounded import ungrounded_steps
from helpers.walkstore import make_chain_store
from synth.engine.records import Hop, Question, Walk
from synth.engine.runner import run_stage
from synth.engine.seeding import derive_seed
from synth.rollout import loop
from synth.rollout.loop import rollout_one
from synth.teacher.oracle import OracleModel
from synth.teacher.oracle_agent import next_turn
from synth.teacher.oracle_agent_memory import forget
from synth.teacher.oracle_agent_pages import fill_blank
from synth.teacher.oracle_agent_reading import QuestionView
from synth.teacher.tasks import AGENT
from synth.tools.search import SearchIndex
from synth.tools.toolbox import Toolbox


class SpyTeacher:
    """The oracle backend, recording every hint it is handed."""

    tool_protocol = "native"

    def __init__(self, cfg):
        self.cfg, self.model, self.hints = cfg.teacher, OracleModel(cfg.teacher), []

    async def chat(self, messages, tools, sample_index=0, hint=None):
        self.hints.append(hint)
        return await self.model.chat(messages, tools, sample_index=sample_index, hint=hint)


def question(w: Walk, clues: list[str] | None = None) -> Question:
    """A question through ``w`` in the writer's contract (one quoted clue per hop, the link blanked)."""
    if clues is None:
        clues = []
        for h in w.hops:
            left, _, right = h.paragraph.partition(h.anchor_text)
            clues.append(f'Then its text reads "{left.strip()} ___ {right.strip().rstrip(".")}".')
    text = " ".join([f"Begin with the article about {w.titles[0]}.", *clues, "Name the final page."])
    return Question(question_id=f"q-{w.walk_id}", kind="walk", walk_id=w.walk_id, path=w.path, titles=w.titles,
                    question=text, answer=w.titles[-1], answer_aliases=[], answer_page_id=w.path[-1],
                    hops=[Hop("", t, p) for t, p in zip(w.titles[1:], w.path[1:])], teacher_model="hand",
                    prompt_sha="-", seed=0, split="sft")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    store = make_chain_store(tmp_path_factory.mktemp("agent"), n=3, hops=3, extra_pages=20)
    cfg = load_config(None, ["rollout.n=4"])
    run_stage(INDEX, cfg, store)
    walks = [Walk.from_row(r) for r in store.read("walks").to_pylist()]
    return cfg, SearchIndex.open(store.path("index")), walks


def roll(world, q: Question, sample: int = 0):
    cfg, index, _ = world
    teacher = SpyTeacher(cfg)
    toolbox = Toolbox(index, cfg.tools, mask_page_ids=[q.answer_page_id])
    return asyncio.run(rollout_one(teacher, toolbox, q, sample, cfg)), teacher


def test_the_hint_holds_no_gold_path(world) -> None:
    cfg, _, walks = world
    q = question(walks[0])
    trace, teacher = roll(world, q)
    assert trace.final_answer == q.answer  # it still finds the way, from the question and the tools alone
    seed = derive_seed(cfg.seed, "rollout", q.question_id)
    assert teacher.hints and all(h == AGENT.hint(seed=seed) for h in teacher.hints)
    assert set(teacher.hints[0]) == {"task", "seed"}
    assert not hasattr(loop, "Gold") and not hasattr(loop, "gold_for")


def test_a_resumed_rollout_continues_exactly(world) -> None:
    cfg, _, walks = world
    q = question(walks[1])
    hint = AGENT.hint(seed=derive_seed(cfg.seed, "rollout", q.question_id))
    for sample in range(4):
        trace, _ = roll(world, q, sample)
        msgs = json.loads(trace.messages)
        turns = [i for i, m in enumerate(msgs) if m["role"] == "assistant"]
        assert len(turns) >= 4
        for i in turns:  # every turn is re-derived from the conversation before it, nothing else:
            forget()  # not even the memo of earlier replays (a pure function's cache)
            assert next_turn(msgs[:i], sample, hint) == msgs[i]


def test_it_fails_for_the_right_reasons(world) -> None:
    _, _, walks = world
    w = walks[2]
    # The last clue quotes nothing the page holds, and the answer page is masked from search: the agent
    # cannot know the way, and it does not guess.
    good = question(w)
    clues = good.question.split(". ")[1:-1]
    bogus = question(w, [clues[0] + ".", clues[1] + ".", 'Then its text reads "the old ___ by the river mill".'])
    for sample in range(4):
        trace, _ = roll(world, bogus, sample)
        assert trace.final_answer != bogus.answer
        assert ungrounded_steps(trace, 1.0) == []


def test_with_compressed_observations_it_stops_rather_than_guess(world) -> None:
    cfg, index, walks = world
    q = question(walks[0])
    compressed = cfg.model_copy(update={"rollout": cfg.rollout.model_copy(update={"compress_observations": True})})
    toolbox = Toolbox(index, cfg.tools, mask_page_ids=[q.answer_page_id])
    trace = asyncio.run(rollout_one(SpyTeacher(cfg), toolbox, q, 0, compressed))
    # What it read is compressed away after one turn: it cannot re-derive it, so it says so and stops.
    assert trace.final_answer == "unknown" and trace.n_tool_calls <= 2


def test_turn_texts_vary_and_quote_their_reasons(world) -> None:
    _, _, walks = world
    texts = []
    for w in walks:
        for sample in range(4):
            trace, _ = roll(world, question(w), sample)
            texts += [m["content"] for m in json.loads(trace.messages) if m["role"] == "assistant"]
    assert len(set(texts)) >= 0.8 * len(texts)
    picks = [t for t in texts if "___" in t and "which locals visit often" in t]
    assert picks  # it quotes the clue and the passage of the page that matches it


def test_reading_the_contract() -> None:
    q = QuestionView.parse('Open the article on Mary I. In turn, its text says "reign of ___ , the queen"; the '
                           'blank is a link. Somewhere in that page you will find "Henry VIII. He ___"; follow '
                           'it. Which page closes the chain?')
    assert q.opening == "Open the article on Mary I."  # an initial is not a sentence end; a title's "I." is
    assert [(c.left, c.right) for c in q.clues] == [("reign of", ", the queen"), ("Henry VIII. He", "")]
    para = "It began in the reign of Elizabeth I, the queen, and ended under Henry VIII. He ruled alone."
    assert fill_blank(para, "reign of", ", the queen") == (("Elizabeth I", 1.0),)
    assert fill_blank("a building in which", "a", "in") == (("building", 1.0),)  # "in" is a word, not a part

    def best(paragraph: str, left: str, right: str) -> list[str]:
        return [n for n, _ in sorted(fill_blank(paragraph, left, right), key=lambda x: -x[1])]

    # A blank at a quote's end: the whole phrase up to punctuation first, then shorter readings.
    assert best("It is larger than the Arctic Ocean.", "larger than the", "") == ["Arctic Ocean", "Arctic"]
    right = best("In physics and particle physics, the force acts.", "", ", the force acts")
    assert right[0] == "particle physics" and right.index("physics") < right.index("physics and particle physics")
    # A link may cover part of a joined word.
    assert best("causal powers, mind-independence, and more", "causal powers,", "") == ["mind-independence", "mind"]
