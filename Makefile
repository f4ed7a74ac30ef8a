# hopforge: every target sets up .venv first, idempotently.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.hopforge-installed
OUT    ?= data/demo
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: setup demo test bench clean

setup: $(STAMP)

# torch goes first and pinned, so pip takes the CPU wheel rather than a multi-GB CUDA build.
$(STAMP): pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -c requirements.lock -e '.[demo,bench,dev]'
	touch $(STAMP)

demo: setup
	$(BIN)/hopforge run --config configs/demo.yaml --out $(OUT)

test: setup
	$(BIN)/python -m pytest -q

bench: setup
	@for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) data/demo
