package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/internal/syncbuf"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline/internal/pipelinetest"
	"github.com/mvml/mvml/registry"
	"github.com/mvml/mvml/schemas"
	"github.com/mvml/mvml/sink"
)

// serveLine is one output row of the JSON Lines sink.
type serveLine struct {
	ID      int64   `json:"id"`
	Version string  `json:"model_version"`
	Pred    float64 `json:"prediction"`
}

func decodeLines[T any](t *testing.T, b []byte) []T {
	t.Helper()
	var out []T
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var v T
		if err := json.Unmarshal(line, &v); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		out = append(out, v)
	}
	return out
}

// A finite file source through a Service: every row is scored or dead-lettered
// (the undecodable and the NaN row), the labelled rows refit the model, and
// at the end of the input the refitted model is in service.
func TestServeFileSourceRefits(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	spec := testSpec(t)
	train := makeData(spec, 200, 1)
	m := trainTestModel(t, spec, train)
	stream := makeData(spec, 300, 2)
	path := tempPath(t, "stream.csv")
	pipelinetest.WriteCSV(t, path, spec, stream, map[int]map[string]string{17: {"b_1": "abc"}, 230: {"a_0": "NaN"}})
	src, err := ingest.Open(context.Background(), spec, []string{path}, ingest.Options{BatchSize: 64, Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var out, dead bytes.Buffer
	var saved []*model.Model
	svc, err := NewService(Config{
		Model: m, Source: src, Output: sink.NewJSONL(&out), DeadLetters: sink.NewRejects(&dead),
		Refit:     RefitPolicy{Rows: 100, MinRows: 50},
		OnRefit:   func(_ context.Context, m *model.Model) error { saved = append(saved, m); return nil },
		Allocator: mem,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := svc.Stats()
	if st.In != 300 || st.Scored != 298 || st.DeadLettered != 2 || st.In != st.Scored+st.DeadLettered {
		t.Errorf("stats %+v: want in 300 = scored 298 + dead-lettered 2", st)
	}
	if st.Labelled != 298 || st.Refits < 1 || st.RefitFailures != 0 || len(saved) != int(st.Refits) || st.Accumulated != 298 || st.LastRefitSeconds <= 0 || st.Pending != 0 ||
		st.RefitOutcomes[refitServed] != st.Refits {
		t.Errorf("stats %+v, %d models saved: want 298 labelled rows and at least one refit, each saved", st, len(saved))
	}
	if st.ModelVersion == m.Version || svc.Model() != saved[len(saved)-1] {
		t.Error("the last refitted model is not in service at the end of the input")
	}
	lines := decodeLines[serveLine](t, out.Bytes())
	if len(lines) != 298 {
		t.Fatalf("%d output rows, want 298", len(lines))
	}
	_, wantPred := pipelinetest.ExpectedScores(m, stream)
	for i, l := range lines[:64] { // the first batch is scored by the initial model
		row := i
		if i >= 17 {
			row++
		}
		if l.ID != stream.IDs[row] || l.Version != m.Version || l.Pred != wantPred[row] {
			t.Fatalf("output row %d = %+v, want id %d, version %s, prediction %v", i, l, stream.IDs[row], m.Version, wantPred[row])
		}
	}
	rejects := decodeLines[schemas.RowError](t, dead.Bytes())
	if len(rejects) != 2 || rejects[0].Row != 17 || rejects[0].Column != "b_1" || rejects[1].Row != 230 || rejects[1].Column != "a_0" {
		t.Errorf("dead letters %+v, want rows 17 (b_1) and 230 (a_0)", rejects)
	}
	// The refitted model learned the same rule from the streamed labels.
	correct := 0
	dec, _ := pipelinetest.ExpectedScores(svc.Model(), train)
	for i := range train.Rows() {
		if svc.Model().Predict(dec.RawRowView(i)) == train.Labels[i] {
			correct++
		}
	}
	if acc := float64(correct) / float64(train.Rows()); acc < 0.85 {
		t.Errorf("refitted model: accuracy %.3f on the training rows, want ≥ 0.85", acc)
	}
}

// ackSource wraps a Source and records, per batch, whether it was acked.
type ackSource struct {
	ingest.Source
	acked []int
	next  int
}

func (a *ackSource) Next(ctx context.Context) (ingest.Batch, error) {
	b, err := a.Source.Next(ctx)
	if err != nil {
		return b, err
	}
	seq := a.next
	a.next++
	b.Ack = func(context.Context) error { a.acked = append(a.acked, seq); return nil }
	return b, nil
}

// failingSink fails from its nth Write on.
type failingSink struct {
	sink.Sink
	writes, failFrom int
}

func (f *failingSink) Write(ctx context.Context, rec arrow.Record) error {
	f.writes++
	if f.writes >= f.failFrom {
		return errors.New("disk full")
	}
	return f.Sink.Write(ctx, rec)
}

// A batch is acknowledged only once its output is written, in order; a
// failing output stops the service without acknowledging the batch.
func TestServeAcksAfterWrite(t *testing.T) {
	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 120, 1))
	path := tempPath(t, "stream.csv")
	pipelinetest.WriteCSV(t, path, spec, makeData(spec, 100, 3), nil)
	inner, err := ingest.Open(context.Background(), spec, []string{path}, ingest.Options{BatchSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	src := &ackSource{Source: inner}
	out := &failingSink{Sink: sink.NewJSONL(io.Discard), failFrom: 4}
	svc, err := NewService(Config{Model: m, Source: src, Output: out, DeadLetters: sink.NewRejects(io.Discard)})
	if err != nil {
		t.Fatal(err)
	}
	err = svc.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Run: %v, want the output's failure", err)
	}
	if want := []int{0, 1, 2}; !equalInts(src.acked, want) {
		t.Errorf("acked batches %v, want %v", src.acked, want)
	}
	if st := svc.Stats(); st.Scored != 30 || st.In != 40 || st.NotCommitted != 10 || st.In != st.Scored+st.DeadLettered+st.NotCommitted || st.Running {
		t.Errorf("stats %+v: want in 40 = scored 30 + dead-lettered 0 + not committed 10 (the batch in hand), not running", st)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// blockingSource yields nothing until its context is cancelled, like an
// idle topic.
type blockingSource struct{}

func (blockingSource) Next(ctx context.Context) (ingest.Batch, error) {
	<-ctx.Done()
	return ingest.Batch{}, ctx.Err()
}
func (blockingSource) Close() error { return nil }

// readySource is an idle source that says whether it is consuming.
type readySource struct {
	blockingSource
	mu       sync.Mutex
	notReady error
}

func (r *readySource) set(notReady error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notReady = notReady
}

func (r *readySource) Ready() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.notReady
}

func TestServeHealthAndMetrics(t *testing.T) {
	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 120, 1))
	src := &readySource{}
	svc, err := NewService(Config{Model: m, Source: src, Output: sink.NewJSONL(io.Discard), DeadLetters: sink.NewRejects(io.Discard)})
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		svc.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code, rec.Body.String()
	}
	if code, _ := get("/healthz"); code != 503 {
		t.Errorf("healthz before Run: %d, want 503", code)
	}
	if code, _ := get("/readyz"); code != 503 {
		t.Errorf("readyz before Run: %d, want 503", code)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- svc.Run(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for !svc.Stats().Running && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if code, body := get("/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("healthz while running: %d %q", code, body)
	}
	// Readiness follows the source: not consuming is not ready, but alive.
	src.set(errors.New("joining consumer group g"))
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "joining consumer group g") {
		t.Errorf("readyz of a source not consuming: %d %q, want 503 with the reason", code, body)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("healthz of a source not consuming: %d, want 200", code)
	}
	src.set(nil)
	if code, body := get("/readyz"); code != 200 || body != "ok\n" {
		t.Errorf("readyz of a source consuming: %d %q", code, body)
	}
	code, body := get("/metrics")
	for _, want := range []string{"mvml_records_in_total 0", "# TYPE mvml_refits_total counter", "# TYPE mvml_batches_pending gauge",
		"mvml_refit_rows 0", `mvml_model_info{version="` + m.Version + `"} 1`, "mvml_labels_rejected_total 0", "mvml_model_reloads_total 0",
		"mvml_model_reload_failures_total 0", "# TYPE mvml_records_not_committed gauge"} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("metrics (%d) lack %q:\n%s", code, want, body)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run after cancel: %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if code, _ := get("/nope"); code != 404 {
		t.Errorf("unknown path: %d", code)
	}
}

func TestNewServiceErrors(t *testing.T) {
	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 120, 1))
	ok := Config{Model: m, Source: blockingSource{}, Output: sink.NewJSONL(io.Discard), DeadLetters: sink.NewRejects(io.Discard)}
	for name, edit := range map[string]func(*Config){
		"no model":                     func(c *Config) { c.Model = nil },
		"no source":                    func(c *Config) { c.Source = nil },
		"no output":                    func(c *Config) { c.Output = nil },
		"no dead letter":               func(c *Config) { c.DeadLetters = nil },
		"decay above 1":                func(c *Config) { c.Refit.Decay = 1.5 },
		"negative rows":                func(c *Config) { c.Refit.Rows = -1 },
		"negative workers":             func(c *Config) { c.Workers = -1 },
		"negative in flight":           func(c *Config) { c.InFlight = -2 },
		"fewer in flight than workers": func(c *Config) { c.Workers, c.InFlight = 4, 3 },
	} {
		c := ok
		edit(&c)
		if _, err := NewService(c); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := NewService(ok); err != nil {
		t.Errorf("valid config: %v", err)
	}
}

// chanSource yields the batches sent on it, like a topic fed by a test.
type chanSource chan ingest.Batch

func (c chanSource) Next(ctx context.Context) (ingest.Batch, error) {
	select {
	case b, ok := <-c:
		if !ok {
			return ingest.Batch{}, io.EOF
		}
		return b, nil
	case <-ctx.Done():
		return ingest.Batch{}, ctx.Err()
	}
}

func (c chanSource) Close() error { return nil }

// A model published by a retraining job replaces the one in service
// between two batches; refits then gather on its features.
func TestServeSwap(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	spec := testSpec(t)
	d := makeData(spec, 400, 5)
	m1 := trainTestModel(t, spec, makeData(spec, 150, 1))
	m2 := trainTestModel(t, spec, makeData(spec, 150, 2))
	src := make(chanSource)
	var out bytes.Buffer
	var refitted []*model.Model
	svc, err := NewService(Config{Model: m1, Source: src, Output: sink.NewJSONL(&out), DeadLetters: sink.NewRejects(io.Discard),
		Refit:     RefitPolicy{Rows: 100},
		OnRefit:   func(_ context.Context, m *model.Model) error { refitted = append(refitted, m); return nil },
		Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := svc.Swap(ctx, m2); err == nil {
		t.Error("Swap before Run: no error")
	}
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	send := func(lo, hi int) {
		rows := make([]int64, hi-lo)
		src <- ingest.Batch{Record: pipelinetest.InputRecord(mem, spec, d, lo, hi), Source: "test", Rows: rows}
	}
	send(0, 50)
	// Swap takes effect between two batches of the run loop, which may not
	// have taken the first one yet when the source has handed it over.
	pipelinetest.WaitFor(t, "the first batch scored", func() bool { return svc.Stats().Scored == 50 })
	other, err := schemas.ParseViewSpec([]byte(`{"task": "classification", "views": [{"name": "a", "prefix": "a_", "dim": 2}]}`))
	if err != nil {
		t.Fatal(err)
	}
	alien := trainTestModel(t, other, &dataset{IDs: d.IDs[:60], Labels: d.Labels[:60], Views: [][]float64{d.Views[0][:120]}, Dims: []int{2}})
	if err := svc.Swap(ctx, alien); err == nil || !strings.Contains(err.Error(), "other views") {
		t.Errorf("Swap of a model of other views: %v", err)
	}
	if err := svc.Swap(ctx, m2); err != nil {
		t.Fatal(err)
	}
	if svc.Model() != m2 {
		t.Fatal("the swapped model is not in service")
	}
	send(50, 160) // 110 labelled rows on m2's features: a refit
	close(src)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := svc.Swap(ctx, m1); err == nil {
		t.Error("Swap after Run: no error")
	}
	versions := map[string]int{}
	for _, l := range decodeLines[serveLine](t, out.Bytes()) {
		versions[l.Version]++
	}
	if versions[m1.Version] != 50 || versions[m2.Version] != 110 {
		t.Errorf("rows per model version %v: want 50 by %s and 110 by %s", versions, m1.Version, m2.Version)
	}
	if len(refitted) != 1 || svc.Model() != refitted[0] || refitted[0].Features != m2.Features {
		t.Errorf("%d refits; want one on the swapped model's features, in service", len(refitted))
	}
	if st := svc.Stats(); st.In != 160 || st.Scored != 160 || st.Labelled != 160 {
		t.Errorf("stats %+v", st)
	}
}

// With an output that commits (a directory of Parquet files), a batch is
// acknowledged only once the file holding its scores is committed.
func TestServeAcksAfterCommit(t *testing.T) {
	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 120, 1))
	path := tempPath(t, "stream.csv")
	pipelinetest.WriteCSV(t, path, spec, makeData(spec, 95, 3), nil)
	inner, err := ingest.Open(context.Background(), spec, []string{path}, ingest.Options{BatchSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	src := &ackSource{Source: inner}
	dir := t.TempDir()
	out, err := sink.NewRollingParquet(dir, "scores", schemas.OutputSchema(m.Outputs(), len(spec.Views), false), sink.ParquetOptions{},
		sink.RollingPolicy{Rows: 25, Every: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	committing := &commitSpy{RollingParquet: out, acked: &src.acked}
	svc, err := NewService(Config{Model: m, Source: src, Output: committing, DeadLetters: sink.NewRejects(io.Discard)})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Files roll at 30, 60 and 90 rows; the last 5 rows are committed at
	// the end of the input.
	if want := [][]int{nil, {0, 1, 2}, {0, 1, 2, 3, 4, 5}, {0, 1, 2, 3, 4, 5, 6, 7, 8}}; !slices.EqualFunc(committing.ackedAtCommit, want, slices.Equal) {
		t.Errorf("batches acked when each file was committed: %v, want %v", committing.ackedAtCommit, want)
	}
	if len(src.acked) != 10 || len(out.Files()) != 4 || svc.Stats().Batches != 10 {
		t.Errorf("%d batches acked, %d files, stats %+v: want 10, 4", len(src.acked), len(out.Files()), svc.Stats())
	}
}

type commitSpy struct {
	*sink.RollingParquet
	acked         *[]int
	ackedAtCommit [][]int
}

func (c *commitSpy) Commit(ctx context.Context) error {
	c.ackedAtCommit = append(c.ackedAtCommit, slices.Clone(*c.acked))
	return c.RollingParquet.Commit(ctx)
}

// labelledBatch is rows [lo, hi) of d as a batch at offsets 100+lo...
func labelledBatch(mem memory.Allocator, spec *schemas.ViewSpec, d *dataset, lo, hi int) ingest.Batch {
	rows := make([]int64, hi-lo)
	for i := range rows {
		rows[i] = int64(100 + lo + i)
	}
	return ingest.Batch{Record: pipelinetest.InputRecord(mem, spec, d, lo, hi), Source: "in", Rows: rows}
}

// A label the model cannot learn from (not a class, not finite) costs the
// refit that label alone: its record is scored, the other labels of its
// batch refit the model, and it is counted and logged with its offset.
func TestServeRejectsLabelsOneByOne(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 150, 1))
	d := makeData(spec, 60, 6)
	d.Labels[5], d.Labels[17] = 99, math.NaN()
	src := make(chanSource, 1)
	var log syncbuf.Buffer
	var refitted []*model.Model
	svc, err := NewService(Config{Model: m, Source: src, Output: sink.NewJSONL(io.Discard), DeadLetters: sink.NewRejects(io.Discard),
		Refit:     RefitPolicy{Rows: 50},
		OnRefit:   func(_ context.Context, m *model.Model) error { refitted = append(refitted, m); return nil },
		Allocator: mem, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	src <- labelledBatch(mem, spec, d, 0, 60)
	close(src)
	if err := svc.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := svc.Stats()
	if st.In != 60 || st.Scored != 60 || st.Labelled != 58 || st.LabelsRejected != 2 || st.Refits != 1 {
		t.Errorf("stats %+v: want 60 scored, 58 labels learned, 2 rejected, one refit", st)
	}
	if len(refitted) != 1 || refitted[0].Meta.Rows != 58 {
		t.Errorf("%d refits; want one, on the 58 usable labels", len(refitted))
	}
	for _, want := range []string{"labels not used for refits", "source=in", "rows=2", "offsets=\"[105 117]\"", "ids=\"[1005 1017]\"", "label 99 is not one of the model's classes"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, log.String())
		}
	}
	rec := httptest.NewRecorder()
	svc.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if !strings.Contains(rec.Body.String(), "mvml_labels_rejected_total 2\n") {
		t.Errorf("metrics lack the rejected labels:\n%s", rec.Body)
	}
}

// A refit that becomes due while another runs starts as soon as that one
// ends, without waiting for more records.
func TestServeRefitDueWhileRefitting(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 150, 1))
	d := makeData(spec, 120, 7)
	src := make(chanSource)
	release := make(chan struct{})
	refits := make(chan int, 2)
	var calls atomic.Int32
	svc, err := NewService(Config{Model: m, Source: src, Output: sink.NewJSONL(io.Discard), DeadLetters: sink.NewRejects(io.Discard),
		Refit: RefitPolicy{Rows: 50},
		OnRefit: func(ctx context.Context, m *model.Model) error {
			n := calls.Add(1)
			if n == 1 { // the first refit runs until the test lets it end
				select {
				case <-release:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			refits <- m.Meta.Rows
			return nil
		},
		Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	src <- labelledBatch(mem, spec, d, 0, 60)   // a refit starts
	src <- labelledBatch(mem, spec, d, 60, 120) // due again while it runs
	pipelinetest.WaitFor(t, "the second batch", func() bool { return svc.Stats().In == 120 })
	close(release)
	for i, want := range []int{60, 120} { // statistics keep every row (no decay)
		select {
		case rows := <-refits:
			if rows != want {
				t.Errorf("refit %d on %d rows, want %d", i+1, rows, want)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("refit %d did not happen; %d OnRefit calls", i+1, calls.Load())
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// FollowModels serves the model a retraining job publishes to a file, counts the files
// it cannot serve and logs a file that disappears; the model in service
// stays through both.
func TestServeFollowModelFile(t *testing.T) {
	spec := testSpec(t)
	m1 := trainTestModel(t, spec, makeData(spec, 150, 1))
	m2 := trainTestModel(t, spec, makeData(spec, 150, 2))
	store, err := registry.OpenDir(t.TempDir(), registry.DirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Publish(context.Background(), m1, registry.Meta{Role: registry.RoleTrain}, true); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(store.Path(), registry.CurrentModel)
	var log syncbuf.Buffer
	svc, err := NewService(Config{Model: m1, Source: blockingSource{}, Output: sink.NewJSONL(io.Discard), DeadLetters: sink.NewRejects(io.Discard),
		Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		if err := svc.FollowModels(ctx, registry.WatchFile(path, 5*time.Millisecond, svc.cfg.Logger)); err != nil {
			t.Error(err)
		}
	}()

	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, good[:len(good)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	pipelinetest.WaitFor(t, "the damaged file counted", func() bool { return svc.Stats().ReloadFailures > 0 })
	if _, err := store.Publish(context.Background(), m2, registry.Meta{Role: registry.RoleTrain}, true); err != nil {
		t.Fatal(err)
	}
	pipelinetest.WaitFor(t, "the published model in service", func() bool { return svc.Model().Version == m2.Version })
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	pipelinetest.WaitFor(t, "the missing file logged", func() bool { return strings.Contains(log.String(), "model file is gone") })
	cancel()
	<-watching
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := svc.Stats(); st.Reloads != 1 || st.ReloadFailures < 1 || st.ModelVersion != m2.Version {
		t.Errorf("stats %+v: want one reload, the damaged file counted as failed, %s in service", st, m2.Version)
	}
	if n := strings.Count(log.String(), "model file is gone"); n != 1 {
		t.Errorf("the missing file logged %d times, want once:\n%s", n, log.String())
	}
}

// A refit due by time starts when the interval has passed, also while no
// record arrives.
func TestServeRefitIntervalWhileIdle(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 150, 1))
	src := make(chanSource)
	refitted := make(chan *model.Model, 1)
	svc, err := NewService(Config{Model: m, Source: src, Output: sink.NewJSONL(io.Discard), DeadLetters: sink.NewRejects(io.Discard),
		Refit:     RefitPolicy{Interval: 500 * time.Millisecond},
		OnRefit:   func(_ context.Context, m *model.Model) error { refitted <- m; return nil },
		Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	src <- labelledBatch(mem, spec, makeData(spec, 60, 8), 0, 60) // before the interval has passed
	select {
	case r := <-refitted:
		if r.Meta.Rows != 60 {
			t.Errorf("refit on %d rows, want 60", r.Meta.Rows)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no refit while the source was idle")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
