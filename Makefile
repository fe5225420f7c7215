# moesim: two entry points for people and CI.
#   make run   — install what is missing, configure, build, simulate scenarios/quickstart.yaml
#   make test  — same set-up, then the whole test suite
#   make plots — same set-up, then every notebook in notebooks/ executed headless (PNGs in results/plots/)
#   make fuzz  — clang + libFuzzer build in build-fuzz/, each fuzz target for FUZZ_SECONDS (findings in build-fuzz/findings/)
# Everything else here is a helper of those two.

BUILD ?= build
MESON_ARGS ?=
# Debian packages the build and tests need (compilers, Meson, and the libraries of the project card),
# and the notebooks' Python stack (run with Debian's /usr/bin/python3; the tests execute a notebook).
APT_PACKAGES := g++ pkg-config python3 meson ninja-build libboost-graph-dev libyaml-cpp-dev \
                libeigen3-dev nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev \
                python3-matplotlib python3-pandas python3-yaml python3-jsonschema python3-pytest python3-dev pybind11-dev jupyter-nbconvert python3-nbconvert \
                python3-nbclient python3-ipykernel parallel
# The interpreter that has those packages (a pyenv or venv python3 on PATH does not).
NOTEBOOK_PYTHON ?= /usr/bin/python3
NOTEBOOKS := $(sort $(wildcard notebooks/*.ipynb))

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: run test deps configure build bench papers validate validate-all profiles plots sanitize fuzz clean

run: build
	./$(BUILD)/moesim run scenarios/quickstart.yaml

test: build
	@meson test -C $(BUILD) --print-errorlogs; status=$$?; \
	python3 tests/summarize_junit.py $(BUILD)/meson-logs/testlog.junit.xml; exit $$status

# $(call install_missing,PACKAGES): installs only the Debian packages not yet installed, so a
# prepared machine never touches apt.
define install_missing
	@missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi
endef

deps:
	$(call install_missing,$(APT_PACKAGES))

configure: deps
	@[ -f $(BUILD)/build.ninja ] || meson setup $(BUILD) $(MESON_ARGS)

build: configure
	ninja -C $(BUILD)

# Benchmarks: engine events/s and simulated MoE layers/s, then the scale table (DeepSeek-V3 on
# 16 ... 1,024 GPUs, both network backends; SCALE_ARGS=--large adds the flow model at 128/256 GPUs),
# then serving speed against its targets and the serving scale table (SERVING_ARGS: --budget S
# per case, default 300; --only targets|scale), then `moesim plan` on its two cases (PLAN_ARGS: --only
# mixtral|deepseek, --budget S).
# Figures recorded in docs/benchmarks.md.
bench: build
	MOESIM_SOURCE_ROOT=$(CURDIR) ./$(BUILD)/tests/bench_engine
	python3 tests/bench/scale_table.py --moesim ./$(BUILD)/moesim $(SCALE_ARGS)
	python3 tests/bench/serving_speed.py --moesim ./$(BUILD)/moesim $(SERVING_ARGS)
	python3 tests/bench/plan_speed.py --moesim ./$(BUILD)/moesim $(PLAN_ARGS)

# Paper reproductions: every scenario under scenarios/papers/ over its paper's grid (tables in
# results/papers/summary.md) and the claims table computed from those runs (results/papers/claims.md,
# and the generated sections of scenarios/papers/README.md and README.md's status).
papers: build
	python3 scenarios/papers/reproduce.py --moesim ./$(BUILD)/moesim

# Validation against real serving: one scenario per measured configuration of
# validation/serving/measurements.csv (generated into validation/serving/scenarios/), each run once
# (outputs in results/validation/), then the per-case table validation/serving/results.md and the
# summary block of docs/validation.md (median |error| per metric against the issue's targets).
# Then the measured serving points (data/kernels/serving_points.csv, issue 48): every point becomes a
# scenario or a listed reason (results/validation-points/), and a stratified sample (four points of every
# model x system x engine x mode, fixed by a seed) runs; `make validate-all` runs every point.
POINTS = data/kernels/serving_points.csv
validate: build
	python3 validation/kernels/kernel_table.py --moesim ./$(BUILD)/moesim
	python3 validation/serving/make_scenarios.py && python3 validation/serving/validate.py --moesim ./$(BUILD)/moesim
	python3 validation/serving/make_scenarios.py --points $(POINTS) --per-group 4
	python3 validation/serving/validate.py --moesim ./$(BUILD)/moesim --cases results/validation-points/cases.json \
		--sample --timeout 150 --results-dir results/validation-points/runs --results-md validation/serving/points_sample.md \
		--doc-block points-sample
	python3 validation/serving/fit_serving.py --cases results/validation-points/cases.json --sample \
		--results-dir results/validation-points/runs --out validation/serving/serving_fit.md --doc-block serving-fit

validate-all: build
	python3 validation/serving/make_scenarios.py --points $(POINTS)
	python3 validation/serving/validate.py --moesim ./$(BUILD)/moesim --cases results/validation-points/cases.json \
		--results-dir results/validation-points/runs --results-md validation/serving/points_all.md --doc-block points-all

# The built-in kernel profiles (hardware/profiles/*.yaml, compiled into moesim): every GEMM and
# attention family and every NCCL collective of data/kernels/ fitted on all its rows, for H100 and
# B200; then the build that embeds them.
KERNEL_TABLES = data/kernels/gemm.csv data/kernels/generation_attention.csv data/kernels/context_attention.csv \
	data/kernels/generation_mla.csv data/kernels/context_mla.csv data/kernels/nccl.csv data/kernels/custom_allreduce.csv \
	data/kernels/deepep_ll.csv data/kernels/deepep_normal.csv
profiles: build
	./$(BUILD)/moesim calibrate fit $(KERNEL_TABLES) --base dgx-h100 --holdout 0 --out hardware/profiles/h100_sxm.yaml
	./$(BUILD)/moesim calibrate fit $(KERNEL_TABLES) --base dgx-b200 --holdout 0 --out hardware/profiles/b200_sxm.yaml
	ninja -C $(BUILD)

# Every notebook executed headless: executed copies in results/notebooks/, PNGs in results/plots/.
# Each runs moesim for data it lacks under results/. MOESIM_NOTEBOOK_QUICK=1 shrinks the grids
# (seconds), MOESIM_NOTEBOOK_REFRESH=1 reruns moesim; all notebooks run, and any failure fails.
plots: build
	@mkdir -p results/notebooks results/plots; failed=""; \
	for nb in $(NOTEBOOKS); do \
	  echo "executing $$nb"; \
	  MOESIM_SOURCE_ROOT="$(CURDIR)" MOESIM_BIN="$(abspath $(BUILD))/moesim" PYDEVD_DISABLE_FILE_VALIDATION=1 \
	    $(NOTEBOOK_PYTHON) -m nbconvert --to notebook --execute --ExecutePreprocessor.timeout=600 \
	    --output-dir results/notebooks "$$nb" || failed="$$failed $$nb"; \
	done; \
	if [ -n "$$failed" ]; then echo "notebooks failed:$$failed" >&2; exit 1; fi; \
	echo "plots in results/plots/, executed notebooks in results/notebooks/"

# The test suite under AddressSanitizer and UBSan, in its own build directory (.ci/run runs it after
# `make test`). -O1 with line tables only (-g1) builds in less than half the time of -O2 -g and keeps
# symbolised reports; any UBSan finding fails its test (halt_on_error).
SANITIZE_BUILD ?= build-sanitize
sanitize: deps
	@[ -f $(SANITIZE_BUILD)/build.ninja ] || meson setup $(SANITIZE_BUILD) -Db_sanitize=address,undefined -Db_lundef=false \
	  -Doptimization=1 -Ddebug=false -Dcpp_args=-g1 -Dbenchmarks=disabled
	ninja -C $(SANITIZE_BUILD)
	ASAN_OPTIONS=halt_on_error=1:abort_on_error=1:detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  meson test -C $(SANITIZE_BUILD) --print-errorlogs

# Fuzzing (tests/fuzz/): a clang build with libFuzzer, ASan and UBSan in build-fuzz/, then each
# target for FUZZ_SECONDS from a scratch corpus seeded with scenarios/, tests/data/ and
# tests/fuzz/seeds/<target>/ (the seed folders are only read). Crashing inputs land in
# build-fuzz/findings/; any finding fails the run.
# Reproduce one with ./build-fuzz/tests/fuzz/<target> <file>. FUZZ_TARGETS="..." runs only those.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := fuzz_scenario fuzz_measurements fuzz_trace fuzz_lengths fuzz_json
FUZZ_APT_PACKAGES := clang libclang-rt-14-dev
FUZZ_FLAGS := -max_len=16384 -timeout=30 -rss_limit_mb=4096 -print_final_stats=1
fuzz: deps
	$(call install_missing,$(FUZZ_APT_PACKAGES))
	@[ -f build-fuzz/build.ninja ] || CC=clang CXX=clang++ meson setup build-fuzz -Dfuzz=enabled \
	  -Db_sanitize=address,undefined -Db_lundef=false -Doptimization=2 -Ddebug=false -Dcpp_args=-g1 \
	  -Dtests=disabled -Dbenchmarks=disabled -Dcuda=disabled
	ninja -C build-fuzz
	@mkdir -p build-fuzz/findings $(addprefix build-fuzz/corpus/,fuzz_scenario fuzz_measurements fuzz_trace fuzz_lengths fuzz_json); \
	for f in $$(find scenarios -name '*.yaml') tests/fuzz/seeds/fuzz_scenario/*; do \
	  cp "$$f" build-fuzz/corpus/fuzz_scenario/$$(echo "$$f" | tr / _); \
	done; \
	for f in $$(find tests/data -type f); do \
	  for i in 0 1 2 3 4 5 6 7 8 9; do \
	    { printf "\\$$(printf %03o $$i)"; cat "$$f"; } > build-fuzz/corpus/fuzz_measurements/$$i$$(echo "$$f" | tr / _); \
	  done; \
	done; \
	for t in fuzz_trace fuzz_lengths fuzz_json; do \
	  for f in tests/fuzz/seeds/$$t/*; do cp "$$f" build-fuzz/corpus/$$t/seed_$$(basename "$$f"); done; \
	done; \
	for f in $$(find scenarios -name '*.csv'); do cp "$$f" build-fuzz/corpus/fuzz_trace/$$(echo "$$f" | tr / _); done; \
	grep -rhE '^ *(prompt|output)_tokens: ' scenarios --include='*.yaml' | sed -E 's/^ *[a-z_]+: //' | sort -u | \
	  awk '{ f = sprintf("build-fuzz/corpus/fuzz_lengths/scenarios_%d", NR); printf "0%s", $$0 > f; close(f) }'; \
	failed=""; for t in $(FUZZ_TARGETS); do \
	  echo "fuzzing $$t for $(FUZZ_SECONDS) s (log: build-fuzz/$$t.log)"; \
	  ./build-fuzz/tests/fuzz/$$t $(FUZZ_FLAGS) -max_total_time=$(FUZZ_SECONDS) -dict=tests/fuzz/$$t.dict \
	    -artifact_prefix=build-fuzz/findings/$$t- build-fuzz/corpus/$$t > build-fuzz/$$t.log 2>&1 \
	    || failed="$$failed $$t"; \
	  grep -E '^#[0-9]+ +(INITED|DONE)|^==[0-9]+==|^SUMMARY|^stat::|internal error|Test unit written' build-fuzz/$$t.log; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzzing found problems in:$$failed (inputs in build-fuzz/findings/, logs in build-fuzz/<target>.log)" >&2; exit 1; fi; \
	echo "fuzzing found nothing; logs in build-fuzz/<target>.log"

clean:
	rm -rf $(BUILD) build-asan $(SANITIZE_BUILD) build-fuzz
