# The two commands of the README:
#   make demo   set up, then run the embedded Bible En-Fr demo end to end (profiles/local)
#   make test   set up, then run the test suite
# and, on a machine with one GPU, `make demo-gpu`: the same data at the papers' width and recipe
# (config.gpu_demo.yaml; docs/demo.md, "The GPU demo").
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin

.PHONY: setup setup-dev profiles demo demo-gpu test test-fast test-peers mutate lint clean-results

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Profiles: `setup` links them by name but leaves another checkout's links (it says so);
# `profiles` re-points those to this checkout. A real directory is never replaced.
# torch first and alone: a pinned CPU/CUDA build already present is kept, and nothing else can drag in another.
setup: $(BIN)/python
	$(BIN)/pip install --quiet "torch==2.13.0"
	$(BIN)/pip install --quiet -e .
	$(BIN)/python -m pipeline_lib.setup_profiles --keep-others

setup-dev: setup
	$(BIN)/pip install --quiet -e ".[dev]"

profiles: $(BIN)/python
	$(BIN)/python -m pipeline_lib.setup_profiles --force

demo: setup
	. $(BIN)/activate && snakemake --profile local all

# The GPU demo on one card. profiles/local pins the GPU rules to gpu 0 (a CPU laptop); here each GPU job
# holds one of GPU_JOBS slots of the one card (jobs that size leave an H100/H200 mostly idle alone):
# 4 on an 80 GB or larger card, 2 on a 24 GB one with config.gpu_demo_24gb.yaml added (docs/demo.md).
GPU_JOBS ?= 4
GPU_DEMO_CONFIG ?= config.gpu_demo.yaml
GPU_DEMO_MEM_MB ?= 64000
DEMO_GPU_ARGS = --resources gpu=$(GPU_JOBS) mem_mb=$(GPU_DEMO_MEM_MB) \
	--set-resources train:gpu=1 train_backtranslation:gpu=1 profile_admin:gpu=1 translate:gpu=1 \
	translate_backtranslation:gpu=1

demo-gpu: setup
	. $(BIN)/activate && snakemake --profile local all $(DEMO_GPU_ARGS) --configfile $(GPU_DEMO_CONFIG)

# Test modules run in parallel, one module per worker (tests/conftest.py), up to 4 workers: the SLURM
# tests mostly wait on the scheduler, and the end-to-end runs are many short processes.
# TEST_WORKERS=0 runs everything in this process.
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); [ $$n -gt 4 ] && n=4; echo $$n)
XDIST = -n $(TEST_WORKERS)

test: setup-dev
	. $(BIN)/activate && python -m pytest -q -ra $(XDIST) $(PYTEST_ARGS)

# The edit loop: everything but the end-to-end runs, the DDP runs and the SLURM cluster (~2 minutes).
test-fast: setup-dev
	. $(BIN)/activate && python -m pytest -q -ra $(XDIST) -m "not slow" --ignore=tests/slurm $(PYTEST_ARGS)

# fairseq as the oracle of exported models (forward pass, fairseq-generate) and of the training
# trajectory (optimizers, schedules, update_freq, clipping: docs/numerics.md): needs the peer venv that
# bench/peers/install.sh fairseq builds (~3 min); skipped when it is absent.
test-peers: setup-dev
	. $(BIN)/activate && DEEPNMT_TEST_PEERS=1 python -m pytest -q -ra -n 0 tests/export/test_fairseq_peer.py tests/export/test_fairseq_trajectory.py $(PYTEST_ARGS)

# Mutation score of the core modules (tools/mutate.py, mutmut; docs/mutation.md). Not part of
# `make test`. MODULE=metrics runs one module; each run resumes from mutants/. One torch thread per
# mutant: MUTATE_JOBS mutants run at once (mutmut forks them; forked OpenMP pools can hang).
MODULE ?=
MUTATE_JOBS ?= 2
mutate: setup-dev
	. $(BIN)/activate && OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 python tools/mutate.py run --jobs $(MUTATE_JOBS) $(MODULE)

lint: setup-dev
	$(BIN)/ruff check . && $(BIN)/ruff format --check .
	$(BIN)/snakefmt --check Snakefile workflow/rules
	. $(BIN)/activate && snakemake --lint

clean-results:
	rm -rf results work logs
