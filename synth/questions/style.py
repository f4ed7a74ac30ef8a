"""What the kept questions look like: depth by source, and the form the benchmarks ask for.

The questions stage's report carries, beside the effective-depth figures (:mod:`synth.questions.depth`):

* ``depth_by_source``: the kept questions' nominal and effective depths per source kind (``walk`` and
  ``subgraph``), so a run whose depth comes from short subgraph chains cannot hide behind its walks, nor
  the reverse;
* ``style``: how many questions use navigation language (:data:`synth.text.question_text.NAVIGATION`;
  the validators drop any, so this is 0 unless a check was bypassed), how many hops state a relation a
  parser reads in the previous entity's text rather than a generic one, how many clues parse as whole
  noun phrases (:func:`synth.text.parse.is_noun_phrase`), and the answers' types (spaCy's NER over the
  answer page's first sentence, :func:`synth.text.parse.entity_type`) with the share of named entities.

The clues are read back from the question text by the contract the oracle writes to
(:class:`synth.teacher.oracle.reading.QuestionView`): for another teacher's free text the clue figures
say how much of it reads that way.
"""

from __future__ import annotations

from collections import Counter

from synth.engine.records import Question
from synth.questions.depth import summary as depth_summary
from synth.teacher.oracle.reading import QuestionView
from synth.text.parse import CONCEPT, entity_type, is_noun_phrase
from synth.text.question_text import navigation


def depth_by_source(kept: list[Question]) -> dict:
    """:func:`synth.questions.depth.summary` of the kept questions of each source kind."""
    out = {}
    for kind in sorted({q.kind for q in kept}):
        out[kind] = depth_summary([(len(q.hops), q.effective_depth) for q in kept
                                   if q.kind == kind and q.effective_depth is not None])
    return out


def style(kept: list[Question], first_sentences: dict[str, str]) -> dict:
    """The style figures of the module docstring; ``first_sentences`` maps an answer page to its lead."""
    n = len(kept)
    if not n:
        return {"questions": 0}
    nav = sum(1 for q in kept if navigation(q.question) or any(navigation(h.sub_question) for h in q.hops))
    hops = relation_hops = clues = noun_phrases = 0
    for q in kept:
        view = QuestionView.parse(q.question)
        hops += len(q.hops)
        for c in view.clues[:len(q.hops)]:
            clues += 1
            relation_hops += c.relation is not None
            noun_phrases += is_noun_phrase(c.described)
    types = Counter(entity_type(q.answer, first_sentences.get(q.answer_page_id, "")) for q in kept)
    named = n - types.get(CONCEPT, 0)
    return {"questions": n, "navigation_questions": nav, "hops": hops, "clues_read": clues,
            "relation_hops": relation_hops, "relation_share": round(relation_hops / clues, 4) if clues else None,
            "noun_phrase_clues": noun_phrases, "noun_phrase_share": round(noun_phrases / clues, 4) if clues else None,
            "named_answers": named, "named_answer_share": round(named / n, 4),
            "answer_types": dict(types.most_common())}


__all__ = ["depth_by_source", "style"]
