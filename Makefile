# mvml — build, test, benchmark and demo targets. `make help` lists them.
GO        ?= go
PKGS      := ./...
BENCHTIME ?= 3x
FUZZTIME  ?= 10s
COUNT     ?= 6
ROUNDS    ?= 3

# The numeric packages whose tests run again on OpenBLAS (make test-openblas).
OPENBLAS_PKGS := ./internal/blasimpl ./transform ./model ./eval ./pipeline/...

.PHONY: help build build-openblas test test-short test-noasm test-openblas vet lint fmt-check static bench bench-blas bench-score bench-stream bench-kernels bench-train bench-tune bench-arrow bench-serve bench-fleet demo fuzz reproduce docs clean

help:
	@echo "make demo            run the main job on the embedded default (no files, no network)"
	@echo "make test            gofmt check, go vet, staticcheck, go test -race (the CI command)"
	@echo "make test-short      the edit loop: go test -short ./... (no race, no mvml processes, no data sets)"
	@echo "make test-noasm      go vet and go test with -tags noasm: every hand-written kernel's Go twin (CI runs it too)"
	@echo "make test-openblas   go vet, staticcheck and the numeric packages' tests on OpenBLAS, and a CLI smoke test (CI runs it too)"
	@echo "make build           build bin/mvml"
	@echo "make static          build bin/mvml-static as deploy/Dockerfile does (CGO_ENABLED=0) and check it is static"
	@echo "make build-openblas  build bin/mvml on the machine's OpenBLAS (cgo; Debian: libopenblas-dev)"
	@echo "make bench           run the benchmarks and print a table (BENCHTIME=$(BENCHTIME))"
	@echo "make bench-blas      gonum's BLAS, the default build's (mvml's Dgemm) and OpenBLAS in one run: Dgemm, kernel products, scoring, fits"
	@echo "make bench-score     end-to-end Parquet scoring of 1M and 4M rows: rows/s, CPU time and peak RSS;"
	@echo "                     BUILDS=\"default openblas\" scores every file with both builds in turn,"
	@echo "                     BASE=REV with that revision's default build too"
	@echo "make bench-stream    mvml train --stream on 1M rows: seconds, rows/s and peak RSS (BASE=REV compares)"
	@echo "make bench-kernels   each hand-written kernel's share of mvml score, train --stream and train (builds without it in turn)"
	@echo "make bench-train     mvml train with default flags on 1M rows of 3 × 64: seconds, peak RSS, held or streamed"
	@echo "make bench-tune      train and refit --once on uWave with and without --tune (5 λ, 5 folds): CPU and ratios (ROUNDS=$(ROUNDS))"
	@echo "make bench-arrow     serve on Arrow IPC input against kafka-go's bare consumer, in one run (COUNT=$(COUNT))"
	@echo "make bench-serve     serve on JSON and on Arrow IPC input against the bare consumer, and labelled"
	@echo "                     against unlabelled records (COUNT=$(COUNT));"
	@echo "                     BASE=REV measures the service built at REV too, in turn with this one;"
	@echo "                     BUILDS=\"default openblas\" measures both builds in turn"
	@echo "make bench-fleet     three serve processes on the in-process broker: the longest stall of a rolling restart"
	@echo "                     and the recovery after a kill -9, in ROUNDS=$(ROUNDS) rounds (BASE=REV compares)"
	@echo "make fuzz            short runs of every fuzz target (FUZZTIME=$(FUZZTIME) each)"
	@echo "make reproduce       the paper's experiments on ../shared/data (see REPRODUCTION.md)"
	@echo "make docs            rewrite docs/configuration.md's configuration keys and metrics tables from the code"


build:
	$(GO) build -o bin/mvml ./cmd/mvml

build-openblas:
	$(GO) build -tags openblas -o bin/mvml ./cmd/mvml

# The container image's binary (deploy/Dockerfile): no C library, so that it
# runs on distroless static or scratch. No container engine runs in CI; this
# builds and checks the binary the image would hold.
static:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags="-s -w" -o bin/mvml-static ./cmd/mvml
	@$(GO) version -m bin/mvml-static | grep -q 'CGO_ENABLED=0' || { echo "bin/mvml-static was built with cgo"; exit 1; }
	@if command -v file >/dev/null 2>&1; then file bin/mvml-static | grep -q 'statically linked' || { file bin/mvml-static; exit 1; }; fi
	@echo "bin/mvml-static: static"

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

# Every staticcheck check but ST1005 (staticcheck.conf); the OpenBLAS
# build's files are checked by test-openblas, which has the C library.
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
lint:
	$(STATICCHECK) $(PKGS)

test: fmt-check vet lint
	$(GO) test -race -count=1 -timeout 30m $(PKGS)

# The edit-test loop: no race detector, and -short skips the tests that run
# mvml as processes of its own and the runs on ../shared/data. CI runs `test`.
test-short:
	$(GO) test -short -count=1 -timeout 10m $(PKGS)

# The Go twins of the hand-written kernels (internal/asm) in place of the
# assembly, mvml's and gonum's alike (gonum honours the same tag): what a
# processor without the kernels runs.
test-noasm:
	$(GO) vet -tags noasm $(PKGS)
	$(GO) test -tags noasm -count=1 -timeout 30m $(PKGS)

test-openblas:
	$(GO) vet -tags openblas $(PKGS)
	$(STATICCHECK) -tags openblas $(PKGS)
	$(GO) test -tags openblas -count=1 -timeout 20m $(OPENBLAS_PKGS)
	$(GO) test -tags openblas -count=1 -run 'TestOpenBLASTrainAndScore|TestHelp' ./cmd/mvml

demo:
	$(GO) run ./cmd/mvml demo

# BENCH_TABLE turns go test -bench output into a table: package.benchmark, ns/op, metrics.
BENCH_TABLE = awk 'BEGIN { printf "%-64s %14s  %s\n", "benchmark", "ns/op", "metrics" } \
	     /^pkg:/ { pkg = $$2 } \
	     /^Benchmark/ { m = ""; for (i = 5; i < NF; i += 2) m = m sprintf("%s %s  ", $$i, $$(i+1)); \
	                    printf "%-64s %14s  %s\n", substr(pkg, index(pkg, "/mvml/") + 6) "." $$1, $$3, m }'

bench:
	@$(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) -benchmem $(PKGS) | tee bench.out | $(BENCH_TABLE)

# Every pure-Go/OpenBLAS pair runs side by side, BLAS_COUNT times; benchstat then sets the
# two columns side by side with their ratio.
BLAS_BENCHTIME ?= 10x
BLAS_COUNT     ?= 6
BENCHSTAT      ?= $(GO) run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
bench-blas:
	@$(GO) test -tags openblas -run '^$$' -bench . -benchtime $(BLAS_BENCHTIME) -count $(BLAS_COUNT) ./internal/blasimpl | \
	tee bench-blas.out | $(BENCH_TABLE)
	@$(BENCHSTAT) -col /blas bench-blas.out

bench-score:
	./scripts/bench-score.sh

bench-stream:
	./scripts/bench-stream.sh

bench-kernels:
	./scripts/bench-kernels.sh

bench-train:
	./scripts/bench-train.sh

bench-tune:
	ROUNDS=$(ROUNDS) ./scripts/bench-tune.sh

# The service and the bare consumer alternate within every run, so that
# their ratio is measured under the same load; benchstat summarises COUNT runs.
bench-arrow:
	@mkdir -p bin
	$(GO) test -c -o bin/serve.test ./pipeline/serve
	bin/serve.test -test.run '^$$' -test.bench 'BenchmarkServeKafkaArrow' -test.benchtime 1x -test.count $(COUNT) | tee bench-arrow.out
	$(BENCHSTAT) bench-arrow.out

bench-serve:
	COUNT=$(COUNT) BENCHSTAT="$(BENCHSTAT)" ./scripts/bench-serve.sh

# A rolling restart of three serve replicas and a kill -9 (TestFleetRollingRestart).
bench-fleet:
	ROUNDS=$(ROUNDS) ./scripts/bench-fleet.sh

fuzz:
	@for pkg in $$($(GO) list $(PKGS)); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

# The figures are checked against eval/reproduce_targets_test.go: a missed
# target fails the run (pipefail: the filter must not hide go test's status).
reproduce:
	bash -o pipefail -c "MVML_REPRODUCE=1 $(GO) test -count=1 -run 'Reproduce' -v -timeout 4h ./eval | grep --line-buffered -v '^=== \\|^PASS\\|^ok'"

docs:
	$(GO) test -count=1 -run '^TestConfigReferenceInREADME$$' ./cmd/mvml -update-readme
	$(GO) test -count=1 -run '^TestMetricsTableInREADME$$' ./pipeline/serve -update-readme

clean:
	rm -rf bin bench.out bench-blas.out bench-arrow.out bench-serve*.out
