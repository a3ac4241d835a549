# s3gate — developer entry points. `make help` lists them.
GO       ?= go
BIN      ?= bin/s3gate
VERSION  ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X main.version=$(VERSION)
STATICCHECK_VERSION ?= v0.8.2
GOBIN    ?= $(shell $(GO) env GOPATH)/bin
GOTESTSUM_VERSION ?= v1.13.0
# gotestsum runs go test and ends with a summary of every skipped and failed
# test, so that a skip can never pass unseen.
GOTESTSUM := $(GOBIN)/gotestsum --format pkgname-and-test-fails --format-hide-empty-pkg

.PHONY: help build test test-full test-short tools run lint bench scenario pgops bloat fuzz container-check clean rules fleet-soak bench-compare test-versions

help:
	@echo "make run        build and serve on the embedded default (./data), or on S3GATE_DATABASE_URL"
	@echo "make test       run every test: unit, PostgreSQL-backed, end-to-end (with -race)"
	@echo "make test-full  make test with the whole engine x transport matrix in every suite"
	@echo "make test-short the quick subset (-short, no 1 GiB memory test)"
	@echo "make test-versions  the store's versioning cases at full size (300 model steps, 2,500 versions) on every engine, and the gateway's paging over 2,500 versions"
	@echo "make lint       gofmt, go vet, staticcheck"
	@echo "make bench      the fixed workload against a live gateway, as ratios to raw PostgreSQL of the same run (~5 min; BENCH_FULL=1: full sizes)"
	@echo "make bench-compare  the gateway benchmarks of BASE (default main) and the working tree, alternating, as ratios;"
	@echo "                with B_ENDPOINT (+ B_ACCESS_KEY, B_SECRET_KEY): this gateway against that S3 endpoint, A B A B"
	@echo "make scenario   the 2 GiB write/delete/GC scenario on each engine"
	@echo "make fleet-soak the three-instance fleet tests on every engine, with the long histories and lease rounds"
	@echo "make pgops      backup/restore, PITR, replicas and upgrades (pgops/) with more objects"
	@echo "make bloat      table sizes after write/delete/GC/VACUUM on pgchunks and pglo (BLOAT_MIB, default 256)"
	@echo "make fuzz       every fuzz target for FUZZTIME (default 300000x) each"
	@echo "make rules      check the Prometheus alert rules and run their unit tests (promtool)"
	@echo "make build      build $(BIN)"
	@echo "make container-check  the image's layout without Docker (as root) and docker-compose.yml"

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/s3gate

# The one test command (README and .ci/run call exactly this). PostgreSQL-backed
# tests start a throwaway server from the installed binaries and skip, saying
# why, where none exist.
test: tools
	$(GOTESTSUM) --jsonfile-timing-events bin/test-timing.json -- -race -count=1 -timeout 40m ./...
	@# The race detector multiplies memory: the heap high-water tests run without it.
	$(GOTESTSUM) -- -count=1 -timeout 20m -run 'TestLargeObjectMemoryFlat|TestHostileInputRSS' ./conformance/ ./cmd/s3gate/

tools:
	@mkdir -p bin
	@test -x $(GOBIN)/gotestsum || $(GO) install gotest.tools/gotestsum@$(GOTESTSUM_VERSION)

# The whole engine × transport matrix in every conformance suite (make test
# runs it where the transport changes the code path, a lighter cut elsewhere).
test-full:
	S3GATE_FULL_MATRIX=1 $(MAKE) test

test-short:
	$(GO) test -short -count=1 ./...

# make test runs them at a size that fits CI's time under -race.
test-versions:
	S3GATE_VERSION_STEPS=300 S3GATE_VERSION_COUNT=2500 $(GO) test -race -count=1 -timeout 60m -run 'TestStore/.*/Version' ./store/storetest/
	S3GATE_VERSION_COUNT=2500 $(GO) test -race -count=1 -timeout 30m -run 'TestVersioning/.*/.*/PagingModel' ./conformance/

run: build
	./$(BIN) serve

lint:
	@bad=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$bad" ]; then echo "gofmt: $$bad"; exit 1; fi
	$(GO) vet ./...
	@test -x $(GOBIN)/staticcheck || $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	$(GOBIN)/staticcheck ./...

# make test runs the same checks (deploy/rules_test.go); this is the quick loop
# while editing the rules.
rules:
	cd deploy && promtool check rules alerts.yml && promtool test rules alerts_test.yml

# BENCH (a -bench regexp, default Gateway: the issue's workload with its raw
# PostgreSQL pairs; `.` adds BenchmarkBaseline and BenchmarkSmallPath);
# BENCH_FULL=1 for the full sizes: see bench/README.md.
BENCH ?= Gateway
bench:
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchtime 1x -timeout 60m ./bench/

# BASE (a git revision), COUNT (runs of each side), BENCH (a -bench regexp),
# BENCHTIME: see bench/README.md.
BENCHSTAT_VERSION ?= v0.0.0-20260908200009-22c9c6c9d4da
bench-compare:
	@test -x $(GOBIN)/benchstat || $(GO) install golang.org/x/perf/cmd/benchstat@$(BENCHSTAT_VERSION)
	GO=$(GO) BENCHSTAT=$(GOBIN)/benchstat ./bench/compare.sh

# 2 GiB in 1,000 objects per engine, delete all, GC: everything returns to its
# starting counts (S3GATE_SCENARIO_BYTES=64MiB for a quick run).
scenario:
	S3GATE_SCENARIO=1 $(GO) test -count=1 -v -timeout 60m -run TestScenario2GiB ./crashtest/

# The three-instance fleet suite (fleettest/) in full: the 64 MiB stream and
# kill -9 tests on every engine (the default run does pgchunks), and the long
# linearizability histories and lease-contention rounds.
fleet-soak:
	S3GATE_FLEET_SOAK=1 $(GO) test -count=1 -v -timeout 60m ./fleettest/
# The PostgreSQL operations tests (pgops/) with more objects in every set
# than the default run writes.
pgops:
	S3GATE_PGOPS_BIG=1 $(GO) test -race -count=1 -v -timeout 30m ./pgops/

# The bloat scenario: sizes of blob_chunks (+TOAST) and pg_largeobject before,
# after GC, after VACUUM and after writing again (docs/operations.md).
BLOAT_MIB ?= 256
bloat:
	S3GATE_BLOAT=1 S3GATE_BLOAT_MIB=$(BLOAT_MIB) $(GO) test -count=1 -v -timeout 30m -run TestBloat ./pgops/

# Every fuzz target for FUZZTIME each (CI runs a short pass). The budget is a
# count of executions, not a duration: Go 1.26's fuzz coordinator can fail a
# clean run with "context deadline exceeded" when a duration expires while a
# worker is mid-input (go.dev/issue/75804, fixed in 1.27); a count has no
# deadline to race.
FUZZTIME ?= 300000x
fuzz:
	@mkdir -p bin
	@for pkg in ./auth ./policy ./s3api ./store; do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "fuzz $$pkg $$t ($(FUZZTIME))"; \
	    $(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) $$pkg >bin/fuzz.log 2>&1 || { cat bin/fuzz.log; exit 1; }; \
	  done; \
	done

# The Dockerfile's file tree built without Docker and run as its user, and
# docker-compose.yml parsed (deploy/containercheck_test.go; needs root).
container-check:
	$(GO) test -count=1 -v -run 'TestContainerLayout|TestComposeFile' ./deploy/

clean:
	rm -rf bin
