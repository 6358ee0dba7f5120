# Two set-up-free entry points (see README): `make demo` and `make test`.
# Each creates .venv on first use and installs the project with its dev extra.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DEMO_MODEL := models/demo/mobilenet_tiny_int8.tflite

.PHONY: demo test test-long models toolchain-models bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	mkdir -p out
	$(BIN)/tfl2tosa convert $(DEMO_MODEL) -o out/demo.tosa --report out/demo-report.json
	$(BIN)/tfl2tosa validate $(DEMO_MODEL)

test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 -m "not slow"

test-long: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 -m slow

models: $(STAMP)
	$(BIN)/python models/generate.py

# The toolchain zoo (models/toolchains/): LiteRT Torch, AI Edge Quantizer, keras-hub, Flax.
# Its own venv: these toolchains pin versions the test install must not inherit.
TOOLCHAIN_VENV  := .venv-toolchains
TOOLCHAIN_STAMP := $(TOOLCHAIN_VENV)/.installed

$(TOOLCHAIN_STAMP): models/toolchains/requirements.txt
	$(PYTHON) -m venv $(TOOLCHAIN_VENV)
	$(TOOLCHAIN_VENV)/bin/pip install --quiet --upgrade pip
	$(TOOLCHAIN_VENV)/bin/pip install --quiet -r models/toolchains/requirements.txt
	touch $(TOOLCHAIN_STAMP)

toolchain-models: $(TOOLCHAIN_STAMP)
	$(TOOLCHAIN_VENV)/bin/python models/toolchains/generate.py

bench: $(STAMP)
	$(BIN)/python benchmarks/import_large_model.py

clean:
	rm -rf $(VENV) $(TOOLCHAIN_VENV) build *.egg-info
