"""The stage table: the one place that lists the pipeline's stages, in order.

Each stage's work lives in its own module (``entry``); this table says what each stage
reads, which config sections shape its output, and what it publishes.  Its code is hashed
from the entry's import closure, so nothing here lists modules or prompt files.  Entries
are imported only when a stage runs, so the CLI starts fast.
"""

from __future__ import annotations

from synth.engine.runner import Pipeline
from synth.engine.stage import Stage


def _source_identity(cfg, store) -> str:
    from synth.corpus.kilt import resolve_source, source_identity

    return source_identity(resolve_source(cfg.corpus.source, store.root))


def _tokenizer_identity(cfg, store) -> str:
    from synth.tokenizer.tokens import tokenizer_identity

    return tokenizer_identity(cfg, store)


def _questions_identity(cfg, store) -> str:
    from synth.questions.decontam import identity

    return identity(cfg, store)


def _questions_reads(cfg) -> tuple[str, ...]:
    # The text-level decontamination's n-gram size, read only when benchmark files are set; the dense
    # retriever's settings (the model that embeds queries, how much of a query it reads) with a dense adversary.
    return (("filters.ngram",) if cfg.questions.decontaminate else ()) + \
        (("tools.dense",) if "dense" in cfg.questions.adversaries else ())


def _dense_identity(cfg, store) -> str:
    from synth.tools.embed import dense_identity

    return dense_identity(cfg, store)


def _embed_reads(cfg) -> tuple[str, ...]:
    from synth.tools.embed import embed_reads

    return embed_reads(cfg)


def _vectors(cfg) -> tuple[str, ...]:
    # The stages that search with the agents' tools read the page vectors under a dense or hybrid tools.ranker.
    return ("embed",) if cfg.tools.ranker != "bm25" else ()


def _search_key(cfg, store) -> str:
    from synth.tools.rank import search_key

    return search_key(cfg, store)


def _rollout_reads(cfg) -> tuple[str, ...]:
    # The adaptive policy stops no question early that can enter rl_pool: it reads whether sft questions are
    # shared into the pool, and, when they are, whether the teacher's rollouts measure its band.
    if cfg.rollout.policy != "adaptive":
        return ()
    return ("questions.share_sft_rl",) + (("rl.band_by",) if cfg.questions.share_sft_rl else ())


def _filter_reads(cfg) -> tuple[str, ...]:
    # The teacher is asked only by the LLM judge and the baselines (with the tools, the baselines' search).
    return (("teacher",) if cfg.filters.judge else ()) + (("teacher", "tools") if cfg.rl.baselines else ())


def _filter_identity(cfg, store) -> str:
    from filters.stage import key_extra

    return key_extra(cfg, store)


def _sft_recipe(cfg, store) -> str:
    from sft.stage import recipe_identity

    return recipe_identity(cfg, store)


INGEST = Stage("ingest", "synth.corpus.ingest:run_ingest", sections=("corpus",),
               outputs=("corpus/pages", "corpus/links", "rejects/ingest.jsonl"), command="ingest",
               key_extra=_source_identity)

GRAPH = Stage("graph", "synth.graph.csr:run_graph", reads=("ingest",), sections=("graph",), outputs=("graph",),
              command="graph")

WALKS = Stage("walks", "synth.graph.walks:run_walks", reads=("ingest", "graph"), sections=("walk",),
              outputs=("walks",), command="walk")

EXPAND = Stage("expand", "synth.graph.expand:run_expand", reads=("ingest", "graph"),
               sections=("expand", "walk.max_in_degree", "walk.exclude_patterns"), outputs=("subgraphs",),
               command="expand")

# Only the pages and the code shape the index; tools.* act at query time.
INDEX = Stage("index", "synth.tools.stage:run_index", reads=("ingest",), outputs=("index",), command="index")

# Every page's vector for search by meaning: the model (key_extra: its name and file hash) and what of a page is
# embedded shape it; a page's vector depends on neither its shard nor its batch, so the batch size, device,
# threads and shard size are operational.  The shards are torch on the CPU: they run in processes.  It embeds only
# for a reader (questions.adversaries holds dense, or tools.ranker is dense or hybrid); which reader does not enter
# its key, since the vectors are the same for any (the settings enter only when it idles: _embed_reads).
EMBED = Stage("embed", "synth.tools.embed:SHARDS", sharded=True, reads=("ingest",),
              sections=("tools.dense.model", "tools.dense.text", "tools.dense.document_prompt"), outputs=("embed",),
              command="embed", more_sections=_embed_reads,
              key_extra=_dense_identity, cpu_shards=True)

QUESTIONS = Stage("questions", "synth.questions.stage:SHARDS", sharded=True,
                  # the index: shortcut checks; the graph: skippable and ambiguous hops (every pipeline has it,
                  # since walks need it; a store made by hand may not, and then corpus/links stands in); embed: the
                  # page vectors of the dense adversary, which like every adversary searches only with the index (a
                  # store with the index and a dense adversary but no vectors is a MissingInput naming `embed`)
                  reads=("ingest", "walks"), optional_reads=("expand", "index", "graph", "embed"),
                  # key_extra: the bytes of the benchmark files (questions.decontaminate)
                  sections=("questions", "teacher", "tools.search_max_k", "walk.max_in_degree",
                            "walk.max_answer_repeats"),
                  more_sections=_questions_reads,
                  outputs=("questions", "rejects/questions"), command="questions", key_extra=_questions_identity,
                  # the validators (and the offline teacher) are Python: shards run in processes, each teacher
                  # taking its share of the global limits
                  cpu_shards=True)

ROLLOUT = Stage("rollout", "synth.rollout.stage:SHARDS", sharded=True, reads=("questions", "index", "ingest", "walks"),
                optional_reads=("expand",), outputs=("traces",),
                # The adaptive policy stops an sft question at keep_per_question answers correct at min_f1 (unless
                # rl_pool shares it: _rollout_reads); each trace's step labels say whether a turn was grounded at
                # the grounded filter's threshold.
                sections=("rollout", "teacher", "tools", "filters.keep_per_question", "filters.min_f1",
                          "filters.min_grounding"), more_sections=_rollout_reads,
                # tools.ranker (in `tools`) picks the agents' search; under dense or hybrid the page vectors and the
                # model's identity (key_extra) shape the traces too (synth/tools/rank.py)
                more_reads=_vectors, key_extra=_search_key,
                command="rollout")

TOKENIZER = Stage("tokenizer", "synth.tokenizer.tokens:run_tokenizer", reads=("ingest",), sections=("tokenizer",),
                  outputs=("tokenizer",), command="tokenizer", key_extra=_tokenizer_identity)

# rl.band_by: the filter writes rl_pool (and its curriculum stages) only when the teacher measures the band.
FILTER = Stage("filter", "filters.stage:run_filter", reads=("questions", "rollout", "tokenizer"),
               optional_reads=("ingest",),  # the answer keys (synth.corpus.answerkeys) read the corpus
               # sft.context / sft.reasoning: what a kept trace's rows hold and how the length filter renders them
               # rollout.n: the samples a pooled question's band must count (filters.pool refuses fewer)
               sections=("filters", "questions.share_sft_rl", "questions.splits.sft", "rl.band_by", "rl.curriculum",
                         "rl.guidance", "rl.baselines", "rl.rag_k", "sft.context", "sft.reasoning",
                         "rollout.compress_observations", "rollout.keep_observations", "rollout.n"),
               outputs=("sft", "preference", "rl_pool", "rl_curriculum", "rejects/filter", "filter/verdicts",
                        "filter/references"),
               command="filter", more_sections=_filter_reads,
               key_extra=_filter_identity)

ASSEMBLE = Stage("assemble", "synth.assemble.stage:run_assemble",
                 reads=("questions", "rollout", "filter", "index", "tokenizer", "ingest"), sections=("assemble",),
                 outputs=("longctx", "rejects/assemble"), command="assemble")

# The price is operational for the teacher stages (it changes no call) but shapes the report's cost, so the
# report names it: a price set or changed later reruns only the report, which prices the recorded tokens.
REPORT = Stage("report", "synth.report.stage:run_report", reads=("rollout",),
               optional_reads=("ingest", "graph", "walks", "expand", "questions", "filter", "assemble"),
               sections=("filters.min_f1", "filters.min_tool_calls", "filters.max_tool_calls",
                         "teacher.price_per_mtok"), outputs=("report",), command="report")

# The student reads only the `sft` table of the filter's outputs, so it is keyed by that table's content:
# a filter change that leaves `sft` as it was does not retrain it.  `hopforge sft` trains a recipe into
# DIR/runs/<recipe>; this stage's own command is `hopforge student`.
SFT = Stage("sft", "sft.stage:run_sft", reads=("filter", "tokenizer"), by_content={"filter": ("sft",)},
            sections=("sft",), outputs=("student",), command="student", key_extra=_sft_recipe)

EVAL = Stage("eval", "sft.evaluate:run_eval", reads=("sft", "questions", "rollout", "index"),
             optional_reads=("ingest",),  # the answer keys
             # sft.context: the student is evaluated in the context it trained in; teacher: the student's backend
             # is the teacher's settings with the student's model (or the server at teacher.model)
             sections=("eval", "teacher", "tools", "filters.min_f1", "filters.min_grounding", "sft.context",
                       "questions.splits.eval", "rollout.compress_observations", "rollout.keep_observations",
                       "rollout.max_tokens"),
             more_reads=_vectors, key_extra=_search_key,  # the agents' search under tools.ranker, as in rollout
             outputs=("eval",), command="eval")

# Under rl.band_by: student, the warm-start student's own rollouts decide the band and this stage writes
# rl_pool (under `teacher` it measures nothing and writes nothing: the filter wrote the pool).  It reads the
# student and the filter's references (each question's best correct teacher rollout: the rows' reference, and
# the guidance whose minimal prefix it measures with rl.guidance), rolls out through the eval harness; with
# rl.baselines it asks the teacher the dual reward's baselines for its rows.
RL_BAND = Stage("rl_band", "sft.rlband:SHARDS", sharded=True, reads=("sft", "questions", "index", "filter"),
                optional_reads=("ingest",),  # the answer keys
                sections=("rl", "teacher", "eval.max_turns", "eval.max_new_tokens", "tools", "filters.min_f1",
                          "filters.min_grounding", "questions.share_sft_rl", "sft.context",
                          "rollout.compress_observations", "rollout.keep_observations", "rollout.max_tokens"),
                more_reads=_vectors, key_extra=_search_key,  # the agents' search under tools.ranker, as in rollout
                outputs=("rl_pool", "rl_band/traces", "rl_band/guided", "rl_curriculum"), command="rl-band")

PIPELINE = Pipeline([INGEST, GRAPH, WALKS, EXPAND, INDEX, EMBED, QUESTIONS, ROLLOUT, TOKENIZER, FILTER, ASSEMBLE,
                     REPORT, SFT, EVAL, RL_BAND])
BY_NAME = PIPELINE.by_name
