# mvml — build, test, benchmark and demo targets. `make help` lists them.
GO        ?= go
PKGS      := ./...
BENCHTIME ?= 3x
FUZZTIME  ?= 10s
COUNT     ?= 6
BENCHSTAT ?= $(GO) run golang.org/x/perf/cmd/benchstat@latest

.PHONY: help build test vet fmt-check bench bench-score bench-arrow demo fuzz reproduce clean

help:
	@echo "make demo       run the main job on the embedded default (no files, no network)"
	@echo "make test       gofmt check, go vet, go test -race (the CI command)"
	@echo "make build      build bin/mvml"
	@echo "make bench      run the benchmarks and print a table (BENCHTIME=$(BENCHTIME))"
	@echo "make bench-score  end-to-end Parquet scoring of 1M and 4M rows: rows/s and peak RSS"
	@echo "make bench-arrow  serve on Arrow IPC input against kafka-go's bare consumer, in one run (COUNT=$(COUNT))"
	@echo "make fuzz       short runs of every fuzz target (FUZZTIME=$(FUZZTIME) each)"
	@echo "make reproduce  the paper's experiments on ../shared/data (see REPRODUCTION.md)"

build:
	$(GO) build -o bin/mvml ./cmd/mvml

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

test: fmt-check vet
	$(GO) test -race -count=1 -timeout 30m $(PKGS)

demo:
	$(GO) run ./cmd/mvml demo

bench:
	@$(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) -benchmem $(PKGS) | tee bench.out | \
	awk 'BEGIN { printf "%-58s %14s  %s\n", "benchmark", "ns/op", "metrics" } \
	     /^pkg:/ { pkg = $$2 } \
	     /^Benchmark/ { m = ""; for (i = 5; i < NF; i += 2) m = m sprintf("%s %s  ", $$i, $$(i+1)); \
	                    printf "%-58s %14s  %s\n", substr(pkg, index(pkg, "/mvml/") + 6) "." $$1, $$3, m }'

bench-score:
	./scripts/bench-score.sh

# The service and the bare consumer alternate within every run, so that
# their ratio is measured under the same load; benchstat summarises COUNT runs.
bench-arrow:
	@mkdir -p bin
	$(GO) test -c -o bin/pipeline.test ./pipeline
	bin/pipeline.test -test.run '^$$' -test.bench 'BenchmarkServeKafkaArrow' -test.benchtime 1x -test.count $(COUNT) | tee bench-arrow.out
	$(BENCHSTAT) bench-arrow.out

fuzz:
	@for pkg in $$($(GO) list $(PKGS)); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

reproduce:
	MVML_REPRODUCE=1 $(GO) test -count=1 -run 'Reproduce' -v -timeout 3h ./eval | grep --line-buffered -v '^=== \|^--- \|^PASS\|^ok'


clean:
	rm -rf bin bench.out bench-arrow.out
