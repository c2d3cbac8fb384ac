package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/model"
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
	writeCSV(t, path, spec, stream, map[int]map[string]string{17: {"b_1": "abc"}, 230: {"a_0": "NaN"}})
	src, err := ingest.Open(context.Background(), spec, []string{path}, ingest.Options{BatchSize: 64, Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var out, dead bytes.Buffer
	var saved []*model.Model
	svc, err := NewService(ServeConfig{
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
	if st.Labelled != 298 || st.Refits < 1 || st.RefitFailures != 0 || len(saved) != int(st.Refits) || st.Accumulated != 298 || st.LastRefitSeconds <= 0 || st.Pending != 0 {
		t.Errorf("stats %+v, %d models saved: want 298 labelled rows and at least one refit, each saved", st, len(saved))
	}
	if st.ModelVersion == m.Version || svc.Model() != saved[len(saved)-1] {
		t.Error("the last refitted model is not in service at the end of the input")
	}
	lines := decodeLines[serveLine](t, out.Bytes())
	if len(lines) != 298 {
		t.Fatalf("%d output rows, want 298", len(lines))
	}
	_, wantPred := expectedScores(m, stream)
	for i, l := range lines[:64] { // the first batch is scored by the initial model
		row := i
		if i >= 17 {
			row++
		}
		if l.ID != stream.ids[row] || l.Version != m.Version || l.Pred != wantPred[row] {
			t.Fatalf("output row %d = %+v, want id %d, version %s, prediction %v", i, l, stream.ids[row], m.Version, wantPred[row])
		}
	}
	rejects := decodeLines[schemas.RowError](t, dead.Bytes())
	if len(rejects) != 2 || rejects[0].Row != 17 || rejects[0].Column != "b_1" || rejects[1].Row != 230 || rejects[1].Column != "a_0" {
		t.Errorf("dead letters %+v, want rows 17 (b_1) and 230 (a_0)", rejects)
	}
	// The refitted model learned the same rule from the streamed labels.
	correct := 0
	dec, _ := expectedScores(svc.Model(), train)
	for i := range train.rows() {
		if svc.Model().Predict(dec.RawRowView(i)) == train.labels[i] {
			correct++
		}
	}
	if acc := float64(correct) / float64(train.rows()); acc < 0.85 {
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
	writeCSV(t, path, spec, makeData(spec, 100, 3), nil)
	inner, err := ingest.Open(context.Background(), spec, []string{path}, ingest.Options{BatchSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	src := &ackSource{Source: inner}
	out := &failingSink{Sink: sink.NewJSONL(io.Discard), failFrom: 4}
	svc, err := NewService(ServeConfig{Model: m, Source: src, Output: out, DeadLetters: sink.NewRejects(io.Discard)})
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
	if st := svc.Stats(); st.Scored != 30 || st.In != 40 || st.Running {
		t.Errorf("stats %+v: want 30 scored of 40 taken (one batch in hand), not running", st)
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

func TestServeHealthAndMetrics(t *testing.T) {
	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 120, 1))
	svc, err := NewService(ServeConfig{Model: m, Source: blockingSource{}, Output: sink.NewJSONL(io.Discard), DeadLetters: sink.NewRejects(io.Discard)})
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
	code, body := get("/metrics")
	for _, want := range []string{"mvml_records_in_total 0", "# TYPE mvml_refits_total counter", "# TYPE mvml_batches_pending gauge",
		"mvml_refit_rows 0", `mvml_model_info{version="` + m.Version + `"} 1`} {
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
	ok := ServeConfig{Model: m, Source: blockingSource{}, Output: sink.NewJSONL(io.Discard), DeadLetters: sink.NewRejects(io.Discard)}
	for name, edit := range map[string]func(*ServeConfig){
		"no model":       func(c *ServeConfig) { c.Model = nil },
		"no source":      func(c *ServeConfig) { c.Source = nil },
		"no output":      func(c *ServeConfig) { c.Output = nil },
		"no dead letter": func(c *ServeConfig) { c.DeadLetters = nil },
		"decay above 1":  func(c *ServeConfig) { c.Refit.Decay = 1.5 },
		"negative rows":  func(c *ServeConfig) { c.Refit.Rows = -1 },
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
	svc, err := NewService(ServeConfig{Model: m1, Source: src, Output: sink.NewJSONL(&out), DeadLetters: sink.NewRejects(io.Discard),
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
		src <- ingest.Batch{Record: inputRecord(mem, spec, d, lo, hi), Source: "test", Rows: rows}
	}
	send(0, 50)
	other, err := schemas.ParseViewSpec([]byte(`{"task": "classification", "views": [{"name": "a", "prefix": "a_", "dim": 2}]}`))
	if err != nil {
		t.Fatal(err)
	}
	alien := trainTestModel(t, other, &dataset{ids: d.ids[:60], labels: d.labels[:60], views: [][]float64{d.views[0][:120]}, dims: []int{2}})
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
	writeCSV(t, path, spec, makeData(spec, 95, 3), nil)
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
	svc, err := NewService(ServeConfig{Model: m, Source: src, Output: committing, DeadLetters: sink.NewRejects(io.Discard)})
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
