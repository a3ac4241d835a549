# s3gate — developer entry points. `make help` lists them.
GO       ?= go
BIN      ?= bin/s3gate
VERSION  ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X main.version=$(VERSION)
STATICCHECK_VERSION ?= v0.8.2
GOBIN    ?= $(shell $(GO) env GOPATH)/bin

.PHONY: help build test test-short run lint bench clean

help:
	@echo "make run        build and serve on the embedded default (./data), or on S3GATE_DATABASE_URL"
	@echo "make test       run every test: unit, PostgreSQL-backed, end-to-end (with -race)"
	@echo "make test-short the quick subset (-short, no 1 GiB memory test)"
	@echo "make lint       gofmt, go vet, staticcheck"
	@echo "make bench      throughput/latency against a live gateway on each engine"
	@echo "make build      build $(BIN)"

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/s3gate

# The one test command (README and .ci/run call exactly this). PostgreSQL-backed
# tests start a throwaway server from the installed binaries and skip, saying
# why, where none exist.
test:
	$(GO) test -race -count=1 -timeout 40m ./...

test-short:
	$(GO) test -short -count=1 ./...

run: build
	./$(BIN) serve

lint:
	@bad=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$bad" ]; then echo "gofmt: $$bad"; exit 1; fi
	$(GO) vet ./...
	@test -x $(GOBIN)/staticcheck || $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	$(GOBIN)/staticcheck ./...

bench:
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m ./bench/

clean:
	rm -rf bin
