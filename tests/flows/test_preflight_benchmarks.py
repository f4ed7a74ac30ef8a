"""The preflight names a missing benchmark file of ``questions.decontaminate`` before any stage runs."""

from __future__ import annotations

from flows.preflight import check


def test_a_missing_benchmark_file_is_a_preflight_problem(tmp_path) -> None:
    there = tmp_path / "hotpot_dev.json"
    there.write_text("[]", encoding="utf-8")
    files = (f"questions.decontaminate=[{{path: {there}, format: hotpotqa}}, "
             f"{{path: {tmp_path / 'gone.jsonl'}, format: musique}}]")
    problems = check(None, ["corpus.source=demo", files], network=False, stages=["walks", "questions"])
    named = [p for p in problems if p.startswith("questions.decontaminate")]
    assert named == [f"questions.decontaminate[1] (musique): no such file: {tmp_path / 'gone.jsonl'} (on the "
                     "machine that runs the flow)"]
    # A run that stops before the questions stage does not need the files.
    later = check(None, ["corpus.source=demo", files], network=False, stages=["walks"])
    assert not [p for p in later if p.startswith("questions.decontaminate")]
