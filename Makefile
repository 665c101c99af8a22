# Spindle's build. `make help` lists the targets.

GO      ?= go
PYTHON  ?= /usr/bin/python3
# The venv of PyPI packages some tests need (tensorflow-cpu), made by
# scripts/install-deps.sh; tests find it through this variable.
export SPINDLE_TEST_VENV ?= $(HOME)/.cache/spindle-test-venv
# The venv of the Python API's tests (pyspark, cloudpickle, pyarrow and
# tensorboard beside Debian's torch and numpy), also made by install-deps.sh.
export SPINDLE_PY_VENV ?= $(HOME)/.cache/spindle-py-venv
BIN     := bin
DEMO    := data/demo
# A cold build compiles Arrow and gRPC; keep CI well inside its limit.
TEST_TIMEOUT ?= 45m
# What spindle version prints: the release or git describe, and the commit.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)

.DEFAULT_GOAL := help
.PHONY: help build wheel test test-go test-python test-hadoop run bench chaos fuzz lint proto proto-check clean deps

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

build: ## build bin/spindle and the example programs
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/spindle ./cmd/spindle
	$(GO) build -o $(BIN)/datagen ./examples/datagen
	$(GO) build -o $(BIN)/logreg ./examples/logreg

wheel: ## build the spindle-ml wheel (the spindle binary and the Python package) into dist/; GOARCH=arm64 cross-builds
	@scripts/build-wheel.sh

deps: ## install what tests and examples need (Debian packages), when missing
	@scripts/install-deps.sh

run: build ## generate data and run a 2-rank local training job on it
	$(BIN)/datagen --out $(DEMO) --rows 200000 --features 16 --files 4 --row-group-rows 10000 --format parquet --seed 7
	$(BIN)/spindle submit --master 'local[2]' --name demo \
		--input '$(DEMO)/*.parquet' --label-column label \
		--feed tensor --batch-rows 256 --epochs 3 --shuffle --seed 7 \
		-- $(BIN)/logreg --lr 0.5

test: deps test-python test-go test-hadoop ## run every test (installs python3-torch, Java, Maven and Hadoop when missing)

# The real-Hadoop tier runs once, in test-hadoop, without the race detector
# (its time goes to Hadoop's JVMs, not to Go).
test-go:
	SPINDLE_SKIP_HADOOP=1 $(GO) test -race -timeout $(TEST_TIMEOUT) ./...

test-hadoop: ## the YARN/HDFS tests against real Apache Hadoop (a mini cluster from Maven Central)
	$(GO) test -timeout 20m ./yarn/... ./internal/hadoop/hadooprpc/...
	$(GO) test -timeout 10m -run TestRealHDFS ./fsys

test-python:
	$(PYTHON) -m unittest discover -s python/tests
	@# The feed's pyarrow path, with the test venv's pyarrow (make deps).
	if [ -x $(SPINDLE_TEST_VENV)/bin/python ]; then cd python/tests && $(SPINDLE_TEST_VENV)/bin/python -m unittest test_arrow; fi
	@# spindle.run with cloudpickle, spindle.spark with real pyspark, TensorBoard files (make deps).
	if [ -x $(SPINDLE_PY_VENV)/bin/python ]; then cd python/tests && $(SPINDLE_PY_VENV)/bin/python -m unittest test_submit test_spark; fi

bench: deps build ## feed, collectives, HDFS and standalone benchmarks, each beside its baseline
	@scripts/bench.sh

chaos: deps ## kill training ranks, executors, parameter servers, drivers, standalone workers and masters, test-HDFS datanodes, YARN containers and NodeManagers of real jobs at random, and cut the driver link; report recoveries (docs/reliability.md)
	SPINDLE_CHAOS=1 $(GO) test -count=1 -v -timeout 30m -run TestChaos ./e2e/chaos

fuzz: ## fuzz the decoders of untrusted bytes (Arrow IPC and Parquet footers), FUZZTIME each (default 2m); crashers land in testdata/fuzz
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

clean: ## remove build outputs and demo data
	rm -rf $(BIN) data dist
