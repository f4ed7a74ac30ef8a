"""The student compared as data: its weights and reports, not the trainer's pickled arguments."""

from __future__ import annotations

import json

from sft.digest import NOT_COMPARED, student_file_digest
from synth.engine.sameness import output_digest


def _student(folder, weights: bytes, root: str) -> None:
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(weights)
    (folder / "training_args.bin").write_bytes(f"{root}/student runs/Dec04_18-12".encode())
    (folder / "train_report.json").write_text(json.dumps({"final_loss": 5.9, "train_runtime_s": len(root),
                                                          "checkpoint": {"path": f"{root}/student"}}))


def test_two_trainings_to_the_same_weights_are_one_student(tmp_path):
    _student(tmp_path / "a" / "student", b"weights", str(tmp_path / "a"))
    _student(tmp_path / "bb" / "student", b"weights", str(tmp_path / "bb"))
    _student(tmp_path / "c" / "student", b"other weights", str(tmp_path / "c"))
    a, b, c = (output_digest(tmp_path / n / "student", student_file_digest, (str(tmp_path / n),))
               for n in ("a", "bb", "c"))
    assert "training_args.bin" in NOT_COMPARED and "training_args.bin" not in a.parts
    assert a == b
    assert a.differing(c) == ["model.safetensors"]
