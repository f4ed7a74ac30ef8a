"""Decontamination against the benchmarks search agents are judged on, before the teacher is paid.

``formats`` reads each benchmark file as its authors publish it; ``index`` turns the files into
an index of answers, supporting and linked pages (KILT page ids) and question texts, each file
parsed once per content; ``saved`` keeps the resolved index per content and corpus; ``check``
finds the walks and subgraphs that retrace a benchmark question (levels ``entity`` and ``path``),
vectorised over every source; ``tally`` counts the drops per benchmark for the report.  The
questions stage runs the entity and path levels on its sources before any question is written
and the text level on each written question before rollout.
"""
