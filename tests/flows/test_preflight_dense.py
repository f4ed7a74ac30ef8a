"""The preflight names a dense model folder that is not there before any stage runs."""

from __future__ import annotations

from flows.preflight import check


def test_a_missing_dense_model_is_a_preflight_problem(tmp_path) -> None:
    gone = tmp_path / "models" / "minilm"
    problems = check(None, ["corpus.source=demo", f"tools.dense.model={gone}"], network=False, via="cli",
                     stages=["index", "embed"])
    assert problems == [f"tools.dense.model: no model folder at {gone} (a local sentence-transformers model, or "
                        "'all-MiniLM-L6-v2', the packaged one; nothing is fetched from a hub): pass --set "
                        "tools.dense.model=/models/all-MiniLM-L6-v2 or set it in the config file"]
    # The packaged model is always there; a run that stops before the vectors does not need one.
    assert check(None, ["corpus.source=demo"], network=False, stages=["index", "embed"]) == []
    assert check(None, ["corpus.source=demo", f"tools.dense.model={gone}"], network=False, stages=["index"]) == []
