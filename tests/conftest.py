"""Test session setup: no network, no Hub, a private Prefect home per session."""

import os
import tempfile

_prefect_home = tempfile.mkdtemp(prefix="hopforge-prefect-")
os.environ["PREFECT_HOME"] = _prefect_home
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
