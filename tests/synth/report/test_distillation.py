"""The report's Distillation section: what the student learns from the teacher, from reports/filter.json."""

from __future__ import annotations

from synth.report.stage import distillation_section

FILTER = {"output": 3, "sft_rows": 15,
          "context": {"policy": "as_seen", "compress_observations": True, "keep_observations": 2},
          "reasoning": {"mode": "keep", "traces": 3, "traces_with_reasoning": 2, "reasoning_tokens": 40,
                        "assistant_tokens": 160, "share_of_assistant_tokens": 0.25},
          "match": {"page": 5, "f1": 1, "other_page": 2, "qualified": 1, "none": 3},
          "answers": {"corpus": True, "aliases": {"teacher": 4, "kept": 1, "dropped": 3,
                                                  "dropped_examples": [{"question_id": "q", "answer": "New York",
                                                                        "alias": "Gotham"}]},
                      "other_titles": {"questions": 2, "titles": 5, "capped": 0, "min_f1": 0.8}},
          "preference": {"pairs": 2, "by_rejected": {"lower_rubric": 1, "wrong_answer": 1}, "without_rejected": 1}}


def test_the_section_says_what_the_rows_hold_and_the_explorer_gets_the_figures() -> None:
    md, summary = [], {}
    distillation_section(md, FILTER, summary, {"reasoning": {"field": "reasoning", "traces": 7}})
    text = "\n".join(md)
    assert text.startswith("## Distillation")
    assert "Context `as_seen`: 15 SFT rows from 3 kept traces (one row per assistant turn" in text
    assert "2 of 3 kept traces carry the teacher's reasoning (`sft.reasoning`: keep); it is 25.0%" in text
    assert "2 named another page of the corpus, 1 a qualified sibling page" in text
    assert "3 have no support in the corpus" in text and "'Gotham' for 'New York'" in text
    assert "Preference pairs (`preference`, DPO): 2" in text
    assert "returned its reasoning under `reasoning` (7 traces)" in text
    # scalars: the explorer shows them as chips
    assert summary == {"sft_context": "as_seen", "sft_rows": 15, "sft_rows_with_reasoning": 2,
                       "reasoning_share_of_assistant_tokens": 0.25, "answers_other_page": 3, "aliases_dropped": 3,
                       "preference_pairs": 2, "teacher_reasoning_field": "reasoning"}


def test_a_run_from_before_says_nothing() -> None:
    md, summary = [], {}
    distillation_section(md, {"output": 3}, summary)
    assert md == [] and summary == {}
