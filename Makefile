# One-command set-up: `make demo` and `make test` each create .venv and install everything first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PLUGINS := $(sort $(dir $(wildcard plugins/*/pyproject.toml)))
PYTEST_ARGS ?=

.PHONY: install demo test clean bench-install

install: $(VENV)/.installed

# torch first, pinned: this exact version is a CPU wheel on the build machines; a bare `torch`
# would pull a multi-GB CUDA build. The project's packages then find it already satisfied.
$(VENV)/.installed: pyproject.toml $(wildcard plugins/*/pyproject.toml)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet hatchling
	$(BIN)/python -m pip install --quiet -e ".[test]" $(foreach p,$(PLUGINS),-e $(p))
	touch $@

demo: install
	$(BIN)/modelexport strategies
	$(BIN)/modelexport export preset:bert out/bert.onnx
	$(BIN)/modelexport inspect out/bert.onnx --depth 4

# lint and type checks first (seconds), then the fast unit tier (a minute), then the rest; exit 5 is
# pytest's "no test selected" (PYTEST_ARGS naming only one tier)
test: install
	$(BIN)/ruff check src plugins tests benchmarks
	$(BIN)/mypy src/modelexport_core
	$(BIN)/mypy --follow-imports=silent $(wildcard plugins/*/src/*/strategy.py plugins/*/src/*/__init__.py)
	$(BIN)/python -m pytest -q -m unit $(PYTEST_ARGS) || [ $$? -eq 5 ]
	$(BIN)/python -m pytest -q -m "not unit" $(PYTEST_ARGS) || [ $$? -eq 5 ]

# The benchmark environment: the project plus timm and torchvision, which the project never depends on.
# --no-deps keeps the pinned CPU torch; torchvision's compiled ops do not load beside it (benchmarks/vision_shim.py).
BENCH_VENV ?= .venv-bench
bench-install: $(BENCH_VENV)/.installed

$(BENCH_VENV)/.installed: pyproject.toml $(wildcard plugins/*/pyproject.toml)
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install --quiet torch==2.13.0
	$(BENCH_VENV)/bin/python -m pip install --quiet hatchling
	$(BENCH_VENV)/bin/python -m pip install --quiet -e ".[test]" $(foreach p,$(PLUGINS),-e $(p))
	$(BENCH_VENV)/bin/python -m pip install --quiet --no-deps timm torchvision pillow
	$(BENCH_VENV)/bin/python -m pip install --quiet huggingface_hub safetensors pyyaml
	touch $@

clean:
	rm -rf $(VENV) $(BENCH_VENV) out .pytest_cache
