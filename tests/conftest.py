"""Test session setup: no network, no Hub, a private Prefect home per session, limits on work rather than time."""

import os
import tempfile

_prefect_home = tempfile.mkdtemp(prefix="hopforge-prefect-")
os.environ["PREFECT_HOME"] = _prefect_home
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Prefect's own setting for how long its ephemeral (test) server may take to start: 20 s by default, which a
# machine at load 5 to 7 exceeds ("Timed out while attempting to connect to ephemeral Prefect API server").  The
# tests' harness reads it (``prefect_test_harness(server_startup_timeout=None)``).
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "600")
# MKL's reproducible mode, before any test's first matrix product (synth/tools/dense.py sets it on import, too
# late in a session where another test ran torch first): a text's vector does not depend on its batch.
os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")


import pytest  # noqa: E402

# The RL world (a real rl_pool, the student's tokenizer): session fixtures shared by the tests of filters/
# and of synth/tools/verl_tool.py, built only when a test asks for them.
pytest_plugins = ["helpers.rlrun",
                  "helpers.worklimit"]  # each test's limit is on the work it does, not on the clock


@pytest.fixture(scope="session")
def demo_store(tmp_path_factory):
    """The demo corpus up to the page vectors, with 3-hop walks and some subgraphs: ``(store, cfg)``, built once.

    Three hops, because a clue that no adversary's search finds is rare on a 10,000-page corpus: about one
    3-hop walk in thirteen gets one for every hop (one 4-hop walk in thirty)."""
    from helpers.demostore import build_demo_store

    return build_demo_store(tmp_path_factory.mktemp("demo"), "walk.hops=3", "walk.num_walks=900", "questions.route=false",
                            "expand.num_subgraphs=300")
