# Spindle's build. `make help` lists the targets.

SHELL   := /bin/bash
GO      ?= go
PYTHON  ?= /usr/bin/python3
# The venv of PyPI packages some tests need (tensorflow-cpu), made by
# scripts/install-deps.sh; tests find it through this variable.
export SPINDLE_TEST_VENV ?= $(HOME)/.cache/spindle-test-venv
# The venv of the Python API's tests (pyspark, cloudpickle, pyarrow and
# tensorboard beside Debian's torch and numpy), also made by install-deps.sh.
export SPINDLE_PY_VENV ?= $(HOME)/.cache/spindle-py-venv
# numpy and venv-pack in a venv of their own, packed and shipped by the
# real-Hadoop tests (install-deps.sh).
export SPINDLE_PACK_VENV ?= $(HOME)/.cache/spindle-pack-venv
# make bench's Petastorm baseline: pyspark 3.5, pyarrow 14 and petastorm
# beside Debian's torch (scripts/install-bench-deps.sh, make bench-deps).
export SPINDLE_BASELINE_VENV ?= $(HOME)/.cache/spindle-baseline-venv
BIN     := bin
DEMO    := data/demo
# A cold build compiles Arrow and gRPC; keep CI well inside its limit.
TEST_TIMEOUT ?= 45m
# What spindle version prints: the release or git describe, and the commit.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)

# Test tiers (docs/testing.md). Packages whose tests mostly wait on child
# processes (jobs, clusters of masters, the test YARN) run in the e2e
# tier without the race detector; the real-Hadoop tests in the hadoop
# tier; every other package in the unit tier, with it.
E2E_PKGS    := ./e2e ./testbed/yarntest ./standalone/e2e ./e2e/chaos
HADOOP_PKGS := ./yarn/e2e ./yarn/client ./testbed/hadooptest
# Unit packages left out of `make check` for their time (they run in
# `make test`).
SLOW_PKGS   := ./feed ./ps/client
# Unit tests the race detector has nothing to find in: feed's and
# internal/inflate's that decode in one goroutine (inflate, the flat
# Parquet column reader) and keep a core busy, slowed 15 to 60 times by
# it (164 s against 5 s); and collective's that start copies of the test
# binary as ranks and wait on them (the detector sees no further than
# one process; the same code runs in-process under it in the other
# tests). The unit tier skips them under it and runs them without it.
# Whole names: a prefix would skip another package's test
# (TestProcessFailureOverUCX).
NORACE_TESTS := ^(TestGunzipInto|TestGunzipIntoDamaged|TestFlatColumnsDirect|TestFlatColumnsSharePages|TestFlatColumnsMatchPqarrow|TestProcessFailure|TestProcessRejoin|TestProcessShrink|TestSharedMemoryProcesses|TestGunzipDecodesGoGzip|TestGunzipRefusesDamage)\z
NORACE_PKGS  := ./feed ./collective ./internal/inflate
# Sweeps over many cases (every world size of an allreduce, tensor
# sizes, round trips, the parameter-server client's tests again over each
# UCX transport) that take a sample of them under the race detector
# (testutil.RaceDetector): races show in the small cases, which the unit
# tier runs; the unit-cpu tier runs every case without the detector.
# Whole names: TestAllReduce is a prefix of others.
RACE_SAMPLED_TESTS := ^(TestAllReduceTree|TestAllReduceEveryWorld|TestAllReduce|TestAllReduceLarge|TestAllReduceHierarchical|TestMemLinkRing|TestSharedMemoryPingPong|TestPeerCrashMidTree|TestMismatchedCallsTree|TestOverUCX)\z
RACE_SAMPLED_PKGS  := ./collective ./ps/client
# Each tier appends its line here; `make test` prints them at the end.
SUMMARY     ?= $(BIN)/test-summary.txt
TESTREPORT  := $(BIN)/testreport
# The race detector's slowdown is paid by the unit tier only. A race
# binary sleeps a second at exit for goroutines still running to report
# (atexit_sleep_ms): a second per package, tests over by then.
RACE        ?= -race
export GORACE ?= atexit_sleep_ms=0
# Test binaries and the programs tests run link without DWARF (-w: stack
# traces and race reports keep their file:line, from the symbol table)
# and, where gold is installed, with it for the external link that cgo
# (zstd, UCX) needs: a race test binary of ./executor links in 3.1 CPU-s
# instead of 6.4, and make test links about a hundred.
GOLD         := $(shell command -v ld.gold >/dev/null 2>&1 && echo -extldflags=-fuse-ld=gold)
TEST_LDFLAGS ?= -w $(GOLD)
# Every test build: -trimpath leaves the module's directory out of what
# is compiled, so a clone or worktree at another path reuses the build
# cache's packages (the unit tier in a new clone: 414 -> 261 CPU-s); -count=1
# runs the tests even where go test has a result cached for that build.
TEST_FLAGS  ?= -trimpath -count=1 -ldflags='$(TEST_LDFLAGS)'
# How many packages of a tier build and run at once (go test -p; the
# default is the cores). Most wait on processes, timers or sockets and
# would hold a core's slot idle (docs/testing.md).
TEST_P      ?= 4
# Stretches every timing in the tests (internal/testutil): set it above 1
# on a machine slower or busier than a 2-core laptop.
export SPINDLE_TEST_TIMESCALE ?= 1

# The programs the e2e, hadoop and chaos tests run as processes, built
# once into TESTBIN for all their packages (internal/testbin links them
# from there; a plain go test builds its own).
TESTBIN      := $(CURDIR)/$(BIN)/testbin
TESTBIN_PKGS := ./cmd/spindle ./examples/datagen ./examples/logreg ./examples/sparse-lr \
	./e2e/feedcheck ./e2e/rolecheck ./e2e/rowcheck ./e2e/shrinkcheck ./e2e/rowshrink ./e2e/linkfault

pkgs_except = $(shell $(GO) list ./... | grep -v -x -F $(foreach p,$(1),-e 'github.com/spindle-ml/spindle/$(patsubst ./%,%,$(p))'))
UNIT_PKGS   = $(call pkgs_except,$(E2E_PKGS) ./yarn/e2e)
CHECK_PKGS  = $(call pkgs_except,$(E2E_PKGS) ./yarn/e2e $(SLOW_PKGS))

.DEFAULT_GOAL := help
.PHONY: help build wheel jar check check-deps test test-go test-unit unit-tier unit-cpu-tier test-e2e e2e-tier testbin timing-tier test-python test-hadoop test-long run bench scale chaos fuzz lint tidy-check proto proto-check clean deps bench-deps

help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

build: ## build bin/spindle and the example programs
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/spindle ./cmd/spindle
	$(GO) build -o $(BIN)/datagen ./examples/datagen
	$(GO) build -o $(BIN)/logreg ./examples/logreg

wheel: ## build the spindle-ml wheel (the spindle binary, the Python package and the Spark pusher's jar) into dist/; GOARCH=arm64 cross-builds
	@scripts/build-wheel.sh

jar: ## build the Spark pusher's jar (jvm/spark-push, against pyspark's Spark) into python/spindle/jars/
	@scripts/build-spark-jar.sh

deps: ## install what tests and examples need (Debian packages), when missing
	@scripts/install-deps.sh

check-deps: ## install the Debian packages make check needs (protoc, the headers cgo builds against), when missing
	@scripts/install-deps.sh --debian-only

bench-deps: deps ## install what only make bench's baselines need (Petastorm's venv, TensorFlowOnSpark), when missing
	@scripts/install-bench-deps.sh

run: build ## generate data and run a 2-rank local training job on it
	$(BIN)/datagen --out $(DEMO) --rows 200000 --features 16 --files 4 --row-group-rows 10000 --format parquet --seed 7
	$(BIN)/spindle submit --master 'local[2]' --name demo \
		--input '$(DEMO)/*.parquet' --label-column label \
		--feed tensor --batch-rows 256 --epochs 3 --shuffle --seed 7 \
		-- $(BIN)/logreg --lr 0.5

check: check-deps lint proto-check tidy-check ## the inner loop, a few minutes: gofmt, vet, staticcheck, generated code, go.mod, short fuzzing and the fast packages' unit tests
	@if [ -x scripts/fuzz.sh ]; then scripts/fuzz.sh 2000x; fi
	@mkdir -p $(BIN) && rm -f $(SUMMARY)
	@$(MAKE) --no-print-directory test-tier TIER=check RACE= PKGS='$(CHECK_PKGS)' TIER_ENV=SPINDLE_SKIP_HADOOP=1 TIER_ARGS='-p $(TEST_P)'

# `make test` runs every tier, even after one fails, then prints one line
# per tier and fails if any did. The real-Hadoop and Python tiers mostly
# wait (JVMs, YARN's heartbeats, containers and Spark starting) and run
# long: they start first, beside the unit tier, whose packages also
# mostly wait. The e2e tier (jobs and clusters as processes, 1.5 cores)
# starts when the unit tier ends, with unit-cpu (a core for a minute) and
# what is left of the others beside it. The output of the tiers beside
# is held in $(BIN)/test-*.out and printed after, and the tier lines in
# a fixed order. The timing tier, whose claim is about a known load,
# runs alone at the end. A command the shell puts in the background
# starts with SIGINT ignored (and Python then never raises
# KeyboardInterrupt): the tests of interrupting a job need it back
# (trap -).
test: deps ## run every test: real Hadoop and python beside unit (race), then e2e and unit-cpu, then Raft timing; a line per tier at the end
	@mkdir -p $(BIN) && rm -f $(SUMMARY); status=0; \
	$(MAKE) --no-print-directory testbin $(TESTREPORT) jar || status=1; \
	( trap - INT QUIT; $(MAKE) --no-print-directory test-hadoop ) > $(BIN)/test-hadoop.out 2>&1 & hadoop=$$!; \
	( trap - INT QUIT; $(MAKE) --no-print-directory test-python ) > $(BIN)/test-python.out 2>&1 & python=$$!; \
	$(MAKE) --no-print-directory unit-tier || status=1; \
	$(MAKE) --no-print-directory unit-cpu-tier > $(BIN)/test-unit-cpu.out 2>&1 & unitcpu=$$!; \
	$(MAKE) --no-print-directory e2e-tier || status=1; \
	wait $$unitcpu || status=1; \
	wait $$hadoop || status=1; \
	wait $$python || status=1; \
	$(MAKE) --no-print-directory timing-tier || status=1; \
	for tier in unit-cpu hadoop python; do echo; echo "== the $$tier tier's output"; cat $(BIN)/test-$$tier.out; done; \
	echo; echo "== make test: tests by tier"; \
	for tier in unit unit-cpu e2e hadoop hdfs python timing; do awk -v t=$$tier '/^tier /{p = ($$2 == t)} p' $(SUMMARY); done; exit $$status

test-go: test-unit test-e2e ## the Go tests without real Hadoop

test-unit: unit-tier unit-cpu-tier ## every package's unit tests, with the race detector (but NORACE_TESTS, and every case of RACE_SAMPLED_TESTS, without it)

unit-tier:
	@$(MAKE) --no-print-directory test-tier TIER=unit PKGS='$(UNIT_PKGS)' TIER_ENV=SPINDLE_SKIP_HADOOP=1 TIER_ARGS="-p $(TEST_P) -skip '$(NORACE_TESTS)'"

unit-cpu-tier:
	@$(MAKE) --no-print-directory test-tier TIER=unit-cpu RACE= PKGS='$(NORACE_PKGS) $(RACE_SAMPLED_PKGS)' TIER_ARGS="-p $(TEST_P) -run '$(NORACE_TESTS)|$(RACE_SAMPLED_TESTS)'"

test-e2e: e2e-tier timing-tier ## the packages that run jobs and clusters as processes (no race detector: they wait on children), then Raft's timing

# How many of a package's e2e tests run at once (go test -parallel; the
# default would be the 2 cores). docs/testing.md has the measurement.
E2E_PARALLEL ?= 2
e2e-tier: testbin
	@$(MAKE) --no-print-directory test-tier TIER=e2e RACE= PKGS='$(E2E_PKGS)' TIER_ARGS='-p $(TEST_P) -parallel $(E2E_PARALLEL)' \
		TIER_ENV='SPINDLE_SKIP_HADOOP=1 SPINDLE_TEST_BIN_DIR=$(TESTBIN)'

testbin:
	@mkdir -p $(TESTBIN) && $(GO) build -trimpath -ldflags='$(TEST_LDFLAGS)' -o $(TESTBIN)/ $(TESTBIN_PKGS)

# Raft's timing under load, which the unit tier's race detector would
# distort (it skips there).
timing-tier:
	@$(MAKE) --no-print-directory test-tier TIER=timing RACE= PKGS=./standalone/master TIER_ARGS='-run TestNoSpuriousElectionUnderLoad'

# The real-Hadoop tests wait on YARN applications, most of them side by
# side (t.Parallel): HADOOP_PARALLEL of them at once, which the mini
# cluster's three NodeManagers hold. The hdfs tier (fsys against its own
# mini cluster) runs beside them, its output printed after theirs.
HADOOP_PARALLEL ?= 4
test-hadoop: $(TESTREPORT) testbin jar ## the YARN/HDFS tests against real Apache Hadoop (a mini cluster from Maven Central)
	@mkdir -p $(BIN); status=0; \
	$(MAKE) --no-print-directory test-tier TIER=hdfs RACE= PKGS='./fsys' TIER_ARGS='-run TestRealHDFS' TIER_TIMEOUT=10m > $(BIN)/test-hdfs.out 2>&1 & hdfs=$$!; \
	$(MAKE) --no-print-directory test-tier TIER=hadoop RACE= PKGS='$(HADOOP_PKGS)' TIER_ARGS='-parallel $(HADOOP_PARALLEL)' TIER_TIMEOUT=20m TIER_ENV=SPINDLE_TEST_BIN_DIR=$(TESTBIN) || status=1; \
	wait $$hdfs || status=1; \
	cat $(BIN)/test-hdfs.out; exit $$status

# The long forms of real-Hadoop tests whose short form runs in make test:
# the same assertions on more data or more runs.
LONG_REPEAT ?= 10
test-long: deps ## the long forms of the real-Hadoop tests: a 100,000-file archive localizing, each archive job LONG_REPEAT times per deploy mode
	SPINDLE_TEST_LONG=1 SPINDLE_REPEAT=$(LONG_REPEAT) $(GO) test -count=1 -v -timeout 60m \
		-run '^(TestStatusShowsLocalizingRanks|TestArchiveRepeat)$$' ./yarn/e2e

TIER_TIMEOUT ?= $(TEST_TIMEOUT)
test-tier: $(TESTREPORT)
	@set -o pipefail; env $(TIER_ENV) $(GO) test -json $(TEST_FLAGS) $(RACE) -timeout $(TIER_TIMEOUT) $(TIER_ARGS) $(PKGS) \
		| $(TESTREPORT) -tier $(TIER) -summary $(SUMMARY) -times $(BIN)/test-$(TIER)-times.txt

$(TESTREPORT): scripts/testreport/main.go
	@$(GO) build -o $@ ./scripts/testreport

# The Python suites run where their packages are: everything in system
# Python (Debian's torch), the pyarrow, scikit-learn and TensorFlow paths in
# the test venv, spindle.run, Spark and TensorBoard in the py venv.
# scripts/pytests.py records each test's outcome, so the tier line counts a
# test skipped in one interpreter but run in another as run.
PYRESULTS = $(CURDIR)/$(BIN)/test-python.jsonl
PYTESTS   = $(CURDIR)/scripts/pytests.py
# The three interpreters run side by side (each mostly waits on jobs,
# Spark and torch imports), each into a log of its own, printed after.
PYLOG     = $(CURDIR)/$(BIN)/test-python
# They get a TMPDIR of their own, removed after them, for what their jobs
# and sessions leave in it, and the spindle binary linked for the other
# tiers (SPINDLE_BINARY; each interpreter would link its own).
# The Python tier's jobs (started through the Python API, which has no
# test time scale) give a driver starved by a loaded machine longer than
# the default 6 s before their executors give it up, as the Go e2e
# harness's do (testutil.Scale(10s)).
PY_HEARTBEAT_TIMEOUT ?= 30s
test-python: testbin jar ## the Python package's unittest suites, each in the interpreter that has its packages
	@mkdir -p $(BIN); rm -f $(PYRESULTS); set -o pipefail; \
	pytmp=$$(mktemp -d "$${TMPDIR:-/tmp}/spindle-python-XXXXXX") && trap 'rm -rf "$$pytmp"' EXIT && export TMPDIR=$$pytmp; \
	export SPINDLE_BINARY=$${SPINDLE_BINARY:-$(TESTBIN)/spindle}; \
	if [ -z "$${SPINDLE_CONF_DIR:-}" ]; then mkdir "$$pytmp/conf" && export SPINDLE_CONF_DIR=$$pytmp/conf && \
		echo 'spindle.executor.heartbeatTimeout $(PY_HEARTBEAT_TIMEOUT)' > "$$pytmp/conf/spindle-defaults.conf"; fi; \
	{ s=0; cd python/tests; rm -f $(PYLOG)-*.log; \
		run() { label=$$1 py=$$2; shift 2; command -v "$$py" >/dev/null || return 0; \
			( trap - INT QUIT; exec "$$py" $(PYTESTS) run $(PYRESULTS) $$label "$$@" ) > $(PYLOG)-$$label.log 2>&1 & pids="$$pids $$!"; }; \
		run system $(PYTHON); \
		run test-venv $(SPINDLE_TEST_VENV)/bin/python test_arrow test_model test_predict; \
		run py-venv $(SPINDLE_PY_VENV)/bin/python test_submit test_session test_spark test_model; \
		for p in $$pids; do wait $$p || s=1; done; \
		for label in system test-venv py-venv; do [ -f $(PYLOG)-$$label.log ] && { echo "== $$label"; cat $(PYLOG)-$$label.log; }; done; \
		exit $$s; \
	} 2>&1 | tee $(BIN)/test-python.log; status=$$?; \
	$(PYTHON) $(PYTESTS) summarize $(SUMMARY) $(BIN)/test-python-times.txt $(PYRESULTS) || status=1; \
	exit $$status

bench: bench-deps build jar ## feed, collectives, HDFS and standalone benchmarks, each beside its baseline
	@scripts/bench.sh

# SCALE_RANKS and SCALE_FLAGS pass on to testbed/scaletest/scalereport.
SCALE_RANKS ?= 100,500,1000,2000
scale: ## simulate jobs of 100 to 2,000 executors against a real driver, and through the real YARN AM on simulated NodeManagers; print docs/scale.md's tables
	$(GO) build -o $(BIN)/scalereport ./testbed/scaletest/scalereport
	$(BIN)/scalereport -ranks $(SCALE_RANKS) $(SCALE_FLAGS)

chaos: deps testbin ## kill training ranks, executors, parameter servers, drivers, standalone workers and masters, test-HDFS and real Hadoop datanodes, YARN containers and NodeManagers of real jobs at random, and cut, slow or partition the driver link and the links between ranks; report recoveries (docs/reliability.md)
	SPINDLE_CHAOS=1 SPINDLE_TEST_BIN_DIR=$(TESTBIN) $(GO) test -count=1 -v -timeout 60m -run TestChaos ./e2e/chaos

fuzz: ## fuzz the decoders of untrusted bytes (scripts/fuzz.sh lists them), FUZZTIME each (default 2m); crashers land in testdata/fuzz
	@scripts/fuzz.sh $(or $(FUZZTIME),2m)

lint: ## gofmt, go vet, and staticcheck when it can be installed
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@if $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 -version >/dev/null 2>&1; then \
		$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...; \
	else echo "staticcheck not installable here; skipped"; fi

proto: ## regenerate the generated protobuf and gRPC code
	@scripts/protoc.sh

proto-check: ## fail when the committed gRPC code differs from what proto generates
	@scripts/protoc.sh --check

tidy-check: ## fail when go.mod or go.sum is not tidy
	$(GO) mod tidy -diff

clean: ## remove build outputs and demo data
	rm -rf $(BIN) data dist python/spindle/jars jvm/spark-push/target
