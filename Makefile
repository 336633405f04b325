# Two commands on a fresh machine: `make demo` and `make test` (see README.md).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
UV_VERSION := 0.13.8
# A portable llama.cpp build (runs on any x86-64); pip's wheel cache reuses it afterwards.
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF
# Offline: models come from installed packages, tiktoken from LlamaIndex's bundled encodings.
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export ANONYMIZED_TELEMETRY := False
PYTEST := $(BIN)/python -m pytest
PACKAGES := multihop_rag llama_index_sirerag llama_index_k2rag llama_index_garlic langchain_resp langgraph_hirag
DOCS := $(BIN)/mkdocs build --strict --quiet
LINT := $(BIN)/ruff check . && $(BIN)/mypy $(PACKAGES) && $(BIN)/lint-imports && $(DOCS)
# The fast tier's longest test takes ~200 s here: a test still running at 600 s prints every thread's stack (so a CI
# log that ends in a hang says where), and at 900 s it fails, leaving CI's 90 minutes for the rest.
FAST_TIER_LIMITS := --timeout 900 -o faulthandler_timeout=600

.PHONY: setup demo test test-unit test-integration test-slow lint docs bench cookbooks lock clean llama-native llama-portable

# Everything installs from constraints.txt (exact versions; `make lock` regenerates it). pip takes the two
# packages it has local copies of: torch (the machine's CPU build; a looser source pulls GBs of CUDA) and
# llama-cpp-python (pip's wheel cache saves its compile); uv installs the rest in one resolver call.
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --progress-bar off -c constraints.txt uv==$(UV_VERSION) torch llama-cpp-python
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -c constraints.txt -e ".[all,dev]"
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(BIN)/multihop-rag demo

lint: setup
	$(LINT)

# The documentation site (mkdocs.yml, docs/, the API from the docstrings) into .venv/site.
docs: setup
	$(DOCS)

# Lint, types, the import floors and the documentation site, then every test but the ones marked slow; prints the total time at the end.
test: setup
	@start=$$(date +%s); \
	$(LINT) && $(PYTEST) integrations_tests -m "not slow" -ra --durations=15 $(FAST_TIER_LIMITS); status=$$?; \
	echo "make test: $$(( $$(date +%s) - start )) s in all (exit $$status)"; exit $$status

test-unit: setup
	$(PYTEST) integrations_tests/unit -ra

test-integration: setup
	$(PYTEST) integrations_tests/integration -m "not slow" -ra

# The heavier checks that do not fit CI's budget: larger builds, the eval command on more questions.
test-slow: setup
	@start=$$(date +%s); \
	$(PYTEST) integrations_tests -m slow -ra --durations=15; status=$$?; \
	echo "make test-slow: $$(( $$(date +%s) - start )) s in all (exit $$status)"; exit $$status

# The model-speed benchmark, then build throughput, update cost, estimate accuracy and cost against corpus size
# (bench_scale: about 1.5 h; it resumes from benchmarks/results/scale/scale.jsonl — delete that file to measure
# again) against stand-in servers.
bench: setup
	$(BIN)/python benchmarks/bench_backends.py
	$(BIN)/python benchmarks/bench_build.py
	$(BIN)/python benchmarks/bench_update.py
	$(BIN)/python benchmarks/bench_estimate.py
	$(BIN)/python benchmarks/bench_scale.py

# Execute the cookbooks in place on the fast embedded model (the run the tests do), outputs committed.
cookbooks: setup
	cd cookbooks && MULTIHOP_RAG_LLM=llamacpp:qwen2.5-coder-0.5b MULTIHOP_RAG_EMBED=st:default \
		../$(BIN)/jupyter execute --inplace *.ipynb

# Regenerate constraints.txt from pyproject.toml's ranges (the CPU build of torch from this machine's wheels).
lock: setup
	$(BIN)/uv pip compile pyproject.toml --all-extras --python-version 3.11.7 --find-links /opt/wheels \
		--no-annotate --quiet -o constraints.txt

# llama.cpp compiled for this machine's CPU (AVX-512, AVX-VNNI where it has them) instead of the portable build:
# prompts read up to ~1.8x faster, but greedy replies differ from the portable build's at near-ties, so tests and
# the run of record use the portable one (docs/models.md). Not cached: pip's wheel cache keeps the portable wheel,
# which `make llama-portable` puts back.
llama-native: setup
	CMAKE_ARGS=-DGGML_NATIVE=ON $(BIN)/pip install --quiet --progress-bar off --force-reinstall --no-deps \
		--no-cache-dir -c constraints.txt llama-cpp-python

llama-portable: setup
	$(BIN)/pip install --quiet --progress-bar off --force-reinstall --no-deps -c constraints.txt llama-cpp-python

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
