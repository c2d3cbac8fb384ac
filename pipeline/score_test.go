package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/parquet-go/parquet-go"
	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/pipeline/internal/pipelinetest"
	"github.com/mvml/mvml/schemas"
	"github.com/mvml/mvml/sink"
)

func TestScoreOrderAndValues(t *testing.T) {
	spec := testSpec(t)
	d := makeData(spec, 700, 4)
	m := trainTestModel(t, spec, d)
	dir := t.TempDir()
	pipelinetest.WriteCSV(t, filepath.Join(dir, "in.csv"), spec, d, nil)
	writeParquet(t, filepath.Join(dir, "in.parquet"), spec, d, false)
	wantDec, wantPred := pipelinetest.ExpectedScores(m, d)
	wantContrib := &mat.Dense{}
	m.NewScorer().Score(&mat.Dense{}, wantContrib, d.Matrices())
	tests := []struct {
		name          string
		input         string
		workers       int
		batch, depth  int
		contributions bool
	}{
		{name: "csv one worker", input: "in.csv", workers: 1, batch: 64},
		// Many small batches over several workers finish out of order;
		// the writer must put them back.
		{name: "parquet many workers", input: "in.parquet", workers: 4, batch: 7, depth: 5},
		{name: "contributions", input: "in.parquet", workers: 2, batch: 100, contributions: true},
		{name: "single batch", input: "in.csv", workers: 3, batch: 5000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			out := filepath.Join(t.TempDir(), "scores.jsonl")
			counts, err := Score(context.Background(), ScoreConfig{
				Model: m, Inputs: []string{filepath.Join(dir, tt.input)}, Output: out,
				Contributions: tt.contributions, Workers: tt.workers, QueueDepth: tt.depth,
				Options: Options{BatchSize: tt.batch, Allocator: mem},
			})
			if err != nil {
				t.Fatal(err)
			}
			if want := (Counts{In: 700, Scored: 700}); counts != want {
				t.Fatalf("counts %+v, want %+v", counts, want)
			}
			got := readScores(t, out)
			if len(got) != d.Rows() {
				t.Fatalf("%d output rows, want %d", len(got), d.Rows())
			}
			for i, s := range got {
				if s.ID != d.IDs[i] {
					t.Fatalf("output row %d has id %d, want %d: input order lost", i, s.ID, d.IDs[i])
				}
				if s.ModelVersion != m.Version || s.Prediction != wantPred[i] || !closeTo(s.Decision[0], wantDec.At(i, 0)) {
					t.Fatalf("row %d: %+v, want version %s prediction %v decision %v", i, s, m.Version, wantPred[i], wantDec.At(i, 0))
				}
				if tt.contributions {
					for l, c := range s.Contributions {
						if !closeTo(c, wantContrib.At(i, l)) {
							t.Fatalf("row %d: contributions %v, want row %d of %v", i, s.Contributions, i, mat.Formatted(wantContrib.Slice(i, i+1, 0, 3)))
						}
					}
					if len(s.Contributions) != 3 {
						t.Fatalf("row %d: %d contributions for 3 views", i, len(s.Contributions))
					}
				} else if s.Contributions != nil {
					t.Fatalf("row %d has contributions it was not asked for", i)
				}
			}
		})
	}
}

func TestScoreParquetOutput(t *testing.T) {
	spec := testSpec(t)
	d := makeData(spec, 300, 5)
	m := trainTestModel(t, spec, d)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.parquet")
	writeParquet(t, in, spec, d, true)
	out := filepath.Join(dir, "scores.parquet")
	if _, err := Score(context.Background(), ScoreConfig{Model: m, Inputs: []string{in}, Output: out, Options: Options{BatchSize: 64}}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	info, _ := f.Stat()
	pf, err := parquet.OpenFile(f, info.Size())
	if err != nil {
		t.Fatal(err)
	}
	if pf.NumRows() != 300 {
		t.Fatalf("%d rows in the Parquet output, want 300", pf.NumRows())
	}
	var fields []string
	for _, f := range pf.Schema().Fields() {
		fields = append(fields, f.Name())
	}
	if want := []string{schemas.FieldID, schemas.FieldModelVersion, schemas.FieldPrediction, schemas.FieldDecision}; !slices.Equal(fields, want) {
		t.Errorf("the Parquet output has columns %v, want %v", fields, want)
	}
	if got := dirEntries(t, dir); !slices.Equal(got, []string{"in.parquet", "scores.parquet"}) {
		t.Fatalf("files left: %v", got)
	}
}

// badInput plants rows that ingest rejects and rows that CheckRecord
// refuses in a CSV of 200 rows.
var badInput = map[int]map[string]string{
	0:   {"a_0": "NaN"},
	13:  {"b_2": "not-a-number"},
	14:  {"c_1": "+Inf"},
	15:  {"a_1": ""},
	150: {"b_0": "-Inf", "a_0": "zzz"},
	199: {"c_0": "NaN"},
}

func TestScoreSkipAccounting(t *testing.T) {
	spec := testSpec(t)
	d := makeData(spec, 200, 6)
	m := trainTestModel(t, spec, d)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.csv")
	pipelinetest.WriteCSV(t, in, spec, d, badInput)
	for _, batch := range []int{1, 16, 1000} {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		out := filepath.Join(dir, "scores.jsonl")
		rejects := filepath.Join(dir, "rejects.jsonl")
		counts, err := Score(context.Background(), ScoreConfig{
			Model: m, Inputs: []string{in}, Output: out, OnError: OnErrorSkip, Rejects: rejects,
			Workers: 2, Options: Options{BatchSize: batch, Allocator: mem},
		})
		if err != nil {
			t.Fatal(err)
		}
		mem.AssertSize(t, 0)
		if counts.In != counts.Scored+counts.Rejected {
			t.Fatalf("batch %d: in %d != scored %d + rejected %d", batch, counts.In, counts.Scored, counts.Rejected)
		}
		if want := (Counts{In: 200, Scored: 194, Rejected: 6}); counts != want {
			t.Fatalf("batch %d: counts %+v, want %+v", batch, counts, want)
		}
		bad := readRejects(t, rejects)
		var rows []int64
		for _, e := range bad {
			if e.Source != in || e.Reason == "" {
				t.Fatalf("batch %d: reject %+v lacks its source or reason", batch, e)
			}
			rows = append(rows, e.Row)
		}
		if want := []int64{0, 13, 14, 15, 150, 199}; !slices.Equal(rows, want) {
			t.Fatalf("batch %d: rejected rows %v, want %v in input order", batch, rows, want)
		}
		var ids []int64
		for _, s := range readScores(t, out) {
			ids = append(ids, s.ID)
		}
		var wantIDs []int64
		for i, id := range d.IDs {
			if badInput[i] == nil {
				wantIDs = append(wantIDs, id)
			}
		}
		if !slices.Equal(ids, wantIDs) {
			t.Fatalf("batch %d: output ids are not the good rows in input order", batch)
		}
	}
}

func TestScoreFailStopsAtFirstBadRow(t *testing.T) {
	spec := testSpec(t)
	d := makeData(spec, 200, 7)
	m := trainTestModel(t, spec, d)
	tests := []struct {
		name    string
		edit    map[int]map[string]string
		wantErr string
	}{
		{name: "NaN", edit: map[int]map[string]string{120: {"b_1": "NaN"}, 150: {"a_0": "x"}}, wantErr: "in.csv: row 120, column b_1: view b feature 1 is NaN"},
		{name: "undecodable", edit: map[int]map[string]string{77: {"c_1": "x"}, 78: {"c_1": "NaN"}}, wantErr: "in.csv: row 77, column c_1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			in := filepath.Join(dir, "in.csv")
			pipelinetest.WriteCSV(t, in, spec, d, tt.edit)
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			counts, err := Score(context.Background(), ScoreConfig{
				Model: m, Inputs: []string{in}, Output: filepath.Join(dir, "scores.parquet"),
				Workers: 3, Options: Options{BatchSize: 10, Allocator: mem},
			})
			var rowErr *schemas.RowError
			if !errors.As(err, &rowErr) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want a row error containing %q", err, tt.wantErr)
			}
			// The bad row was read; the discarded output holds nothing.
			if counts.In != counts.NotWritten || counts.Scored != 0 || counts.Rejected != 0 || counts.In <= rowErr.Row {
				t.Fatalf("counts %+v: the rows up to row %d must be read and none written", counts, rowErr.Row)
			}
			if got := dirEntries(t, dir); !slices.Equal(got, []string{"in.csv"}) {
				t.Fatalf("a failed job left %v", got)
			}
		})
	}
}

// A job that stops still accounts for every row it read: in = scored +
// rejected + not written, where the rows of a discarded output file are
// not written, and the rows already on stdout or in the rejects file are.
func TestScoreCountsBalanceWhenStopped(t *testing.T) {
	spec := testSpec(t)
	d := makeData(spec, 400, 12)
	m := trainTestModel(t, spec, d)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.csv")
	pipelinetest.WriteCSV(t, bad, spec, d, map[int]map[string]string{30: {"a_0": "x"}, 250: {"b_1": "NaN"}})
	tests := []struct {
		name     string
		cfg      ScoreConfig
		cancelAt int64 // rows done when the job is cancelled; 0: not cancelled
		stdout   bool  // the rows scored are on stdout, not in a discarded file
	}{
		{name: "bad row, file output", cfg: ScoreConfig{Output: filepath.Join(dir, "s.parquet")}},
		{name: "bad row, stdout", cfg: ScoreConfig{Output: sink.Stdout}, stdout: true},
		{name: "cancelled while skipping", cfg: ScoreConfig{Output: filepath.Join(dir, "s.jsonl"), OnError: OnErrorSkip, Rejects: filepath.Join(dir, "r.jsonl")}, cancelAt: 300},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var stdout bytes.Buffer
			cfg := tt.cfg
			cfg.Model, cfg.Inputs, cfg.Stdout, cfg.Workers = m, []string{bad}, &stdout, 2
			cfg.Options = Options{BatchSize: 20, Progress: func(rows int64) {
				if tt.cancelAt > 0 && rows >= tt.cancelAt {
					cancel()
				}
			}}
			counts, err := Score(ctx, cfg)
			if err == nil {
				t.Fatal("the job did not stop")
			}
			if counts.In != counts.Scored+counts.Rejected+counts.NotWritten || counts.NotWritten == 0 {
				t.Fatalf("counts %+v do not balance", counts)
			}
			if lines := int64(strings.Count(stdout.String(), "\n")); tt.stdout && (counts.Scored == 0 || counts.Scored != lines) {
				t.Fatalf("counts %+v, %d rows on stdout", counts, lines)
			}
			if !tt.stdout && counts.Scored != 0 {
				t.Fatalf("counts %+v: the discarded output holds no row", counts)
			}
			if cfg.OnError == OnErrorSkip && (counts.Rejected != int64(len(readRejects(t, cfg.Rejects))) || counts.In < tt.cancelAt) {
				t.Fatalf("counts %+v: the rejects file holds %d rows", counts, len(readRejects(t, cfg.Rejects)))
			}
		})
	}
}

func TestScoreCancel(t *testing.T) {
	spec := testSpec(t)
	d := makeData(spec, 2000, 8)
	m := trainTestModel(t, spec, d)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.csv")
	pipelinetest.WriteCSV(t, in, spec, d, nil)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	counts, err := Score(ctx, ScoreConfig{
		Model: m, Inputs: []string{in}, Output: filepath.Join(dir, "scores.jsonl"), Workers: 3,
		Options: Options{BatchSize: 10, Allocator: mem, Progress: func(rows int64) {
			if rows >= 100 {
				cancel()
			}
		}},
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	if counts.In < 100 || counts.In >= 2000 || counts.In != counts.NotWritten || counts.Scored != 0 {
		t.Fatalf("counts %+v after cancelling at 100 rows", counts)
	}
	if got := dirEntries(t, dir); !slices.Equal(got, []string{"in.csv"}) {
		t.Fatalf("a cancelled job left %v", got)
	}
}

// TestScoreMemoryBounded shows that the Arrow memory a job holds at once
// depends on the batch size and queue depth, not on the size of the input.
func TestScoreMemoryBounded(t *testing.T) {
	spec := testSpec(t)
	d := makeData(spec, 4000, 9)
	m := trainTestModel(t, spec, d)
	dir := t.TempDir()
	peak := func(rows int) int64 {
		in := filepath.Join(dir, "in.parquet")
		writeParquet(t, in, spec, &dataset{IDs: d.IDs[:rows], Labels: d.Labels[:rows], Views: pipelinetest.PrefixRows(d, rows), Dims: d.Dims}, false)
		mem := &peakAllocator{Allocator: memory.NewGoAllocator()}
		_, err := Score(context.Background(), ScoreConfig{
			Model: m, Inputs: []string{in}, Output: filepath.Join(dir, "scores.jsonl"), Workers: 2, QueueDepth: 3,
			Options: Options{BatchSize: 50, Allocator: mem},
		})
		if err != nil {
			t.Fatal(err)
		}
		if mem.cur.Load() != 0 {
			t.Fatalf("%d bytes still allocated", mem.cur.Load())
		}
		return mem.peak.Load()
	}
	small, large := peak(400), peak(4000)
	// A batch of 50 rows holds 50×(7+2)×8 input and 50×(1+1)×8+version
	// output bytes; 3 batches in flight plus one being read stay far
	// below what 4000 rows would take (over 290 kB).
	const bound = 4 * 50 * (9 + 2 + 2) * 8 * 2
	if large > bound || large > 2*small {
		t.Fatalf("peak Arrow memory %d bytes for 4000 rows (%d for 400), want at most %d and no growth with the input", large, small, bound)
	}
}

func TestScoreConfigErrors(t *testing.T) {
	spec := testSpec(t)
	d := makeData(spec, 60, 10)
	m := trainTestModel(t, spec, d)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.csv")
	pipelinetest.WriteCSV(t, in, spec, d, nil)
	tests := []struct {
		name    string
		cfg     ScoreConfig
		wantErr string
	}{
		{name: "no model", cfg: ScoreConfig{Inputs: []string{in}, Output: "x.jsonl"}, wantErr: "no model"},
		{name: "skip without rejects", cfg: ScoreConfig{Model: m, Inputs: []string{in}, Output: filepath.Join(dir, "x.jsonl"), OnError: OnErrorSkip}, wantErr: "rejects file"},
		{name: "bad on-error", cfg: ScoreConfig{Model: m, Inputs: []string{in}, Output: filepath.Join(dir, "x.jsonl"), OnError: "ignore"}, wantErr: `on-error "ignore"`},
		{name: "bad extension", cfg: ScoreConfig{Model: m, Inputs: []string{in}, Output: filepath.Join(dir, "x.txt")}, wantErr: "unsupported extension"},
		{name: "missing input", cfg: ScoreConfig{Model: m, Inputs: []string{filepath.Join(dir, "nope.csv")}, Output: filepath.Join(dir, "x.jsonl")}, wantErr: "nope.csv"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Score(context.Background(), tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
			}
			if got := dirEntries(t, dir); !slices.Equal(got, []string{"in.csv"}) {
				t.Fatalf("a refused job left %v", got)
			}
		})
	}
}

func TestParseOnError(t *testing.T) {
	for _, s := range []string{"fail", "skip"} {
		if got, err := ParseOnError(s); err != nil || string(got) != s {
			t.Errorf("ParseOnError(%q) = %q, %v", s, got, err)
		}
	}
	if _, err := ParseOnError("drop"); err == nil {
		t.Error("ParseOnError accepted drop")
	}
}

// TestWriterRestoresOrder hands the writer batches in a scrambled order,
// as workers finishing at different times would.
func TestWriterRestoresOrder(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := schemas.OutputSchema(1, 3, false)
	var buf strings.Builder
	out, err := createOutput("-", &buf, schema, sink.ParquetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	job := &scoreJob{cfg: ScoreConfig{Options: Options{}.WithDefaults()}, out: out, schema: schema}
	order := []int64{3, 1, 0, 4, 2}
	slots := make(chan struct{}, len(order))
	results := make(chan scoredBatch, len(order))
	for _, seq := range order {
		slots <- struct{}{}
		b := schemas.NewOutputBuilder(mem, schema)
		b.Append(10*seq, "v", 0, []float64{-1}, nil)
		b.Append(10*seq+1, "v", 1, []float64{1}, nil)
		rec := b.NewRecord()
		results <- scoredBatch{seq: seq, in: 3, scores: rec, bad: []schemas.RowError{{Row: 10*seq + 2, Reason: "bad"}}}
	}
	close(results)
	job.rejects = &rejectsFile{Rejects: sink.NewRejects(io.Discard)}
	counts, err := job.write(context.Background(), slots, results)
	if err != nil {
		t.Fatal(err)
	}
	if err := out.commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if want := (Counts{In: 15, Scored: 10, Rejected: 5}); counts != want {
		t.Fatalf("counts %+v, want %+v", counts, want)
	}
	if len(slots) != 0 {
		t.Fatalf("%d slots not given back", len(slots))
	}
	var ids []int64
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var s scoreLine
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID)
	}
	if want := []int64{0, 1, 10, 11, 20, 21, 30, 31, 40, 41}; !slices.Equal(ids, want) {
		t.Fatalf("ids written %v, want %v", ids, want)
	}
}
