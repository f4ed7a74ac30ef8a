"""The call cache's process-wide object follows the file at its path."""

from __future__ import annotations

import shutil

from synth.teacher.cache import shared_cache


def test_a_deleted_and_remade_output_folder_gets_a_fresh_cache(tmp_path):
    """A long-lived process (a Prefect worker, a bench) whose output folder is deleted between runs must
    neither fail to open the cache nor write calls into the deleted file."""
    path = tmp_path / "run" / "cache" / "teacher.sqlite"
    first = shared_cache(path)
    first.put("k1", "m", {"message": {"role": "assistant", "content": "a"}})
    assert shared_cache(path) is first and first.get("k1") is not None
    shutil.rmtree(tmp_path / "run")
    again = shared_cache(path)
    assert again is not first and again.get("k1") is None
    again.put("k2", "m", {"message": {"role": "assistant", "content": "b"}})
    assert path.exists() and shared_cache(path).get("k2") is not None
