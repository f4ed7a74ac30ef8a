"""``hopforge eval --benchmark``: published benchmarks in the student's harness, graded by the rule and a pinned judge."""
