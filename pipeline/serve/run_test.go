package serve

import (
	"context"
	"errors"
	"io"
	"maps"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline/internal/metrics"
	"github.com/mvml/mvml/pipeline/internal/pipelinetest"
	"github.com/mvml/mvml/sink"
)

// Swap cancels a refit under way on the old model's features: its model
// is neither handed to OnRefit (which would publish it over the swapped
// one) nor served, and it counts as no failure.
func TestServeSwapCancelsRefit(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	spec := testSpec(t)
	m1 := trainTestModel(t, spec, makeData(spec, 150, 1))
	m2 := trainTestModel(t, spec, makeData(spec, 150, 2))
	src := make(chanSource)
	refitting, cancelled := make(chan struct{}), make(chan error, 1)
	svc, err := NewService(Config{Model: m1, Source: src, Output: sink.NewJSONL(io.Discard), DeadLetters: sink.NewRejects(io.Discard),
		Refit: RefitPolicy{Rows: 50},
		OnRefit: func(ctx context.Context, _ *model.Model) error {
			close(refitting)
			select {
			case <-ctx.Done():
				cancelled <- ctx.Err()
			case <-time.After(20 * time.Second):
				cancelled <- errors.New("not cancelled")
			}
			return ctx.Err()
		},
		Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	src <- labelledBatch(mem, spec, makeData(spec, 60, 7), 0, 60) // a refit starts
	<-refitting
	if err := svc.Swap(ctx, m2); err != nil {
		t.Fatal(err)
	}
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Errorf("the refit under way at the swap: %v, want it cancelled", err)
	}
	src <- labelledBatch(mem, spec, makeData(spec, 10, 8), 0, 10) // the cancelled refit's result is in by now
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{refitCancelled: 1}
	if st := svc.Stats(); st.Refits != 0 || st.RefitFailures != 0 || st.ModelVersion != m2.Version || !maps.Equal(st.RefitOutcomes, want) {
		t.Errorf("stats %+v: want no refit, no failure, %s in service, outcomes %v", st, m2.Version, want)
	}
}

// slowSink takes delay to write, or gives up when its context ends.
type slowSink struct {
	sink.Sink
	delay time.Duration
}

func (s slowSink) Write(ctx context.Context, rec arrow.Record) error {
	select {
	case <-time.After(s.delay):
		return s.Sink.Write(ctx, rec)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// The shutdown grace counts from the cancellation: a running service gives
// a slow write (a sink retrying through a broker's restart) all the time it
// takes, and a cancelled one stops after the grace however slow the write.
func TestServeGraceCountsFromCancellation(t *testing.T) {
	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 120, 1))
	d := makeData(spec, 20, 3)
	for _, tt := range []struct {
		name        string
		delay       time.Duration
		cancelAfter time.Duration // 0: once the batch is scored
		wantScored  int64
		wantErr     error
	}{
		{"running", 500 * time.Millisecond, 0, 20, nil},
		{"cancelled", time.Hour, 100 * time.Millisecond, 0, context.Canceled},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			src := make(chanSource, 1)
			svc, err := NewService(Config{Model: m, Source: src, Output: slowSink{sink.NewJSONL(io.Discard), tt.delay},
				DeadLetters: sink.NewRejects(io.Discard), ShutdownGrace: 200 * time.Millisecond, Allocator: mem})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			src <- labelledBatch(mem, spec, d, 0, 20)
			if tt.cancelAfter > 0 {
				time.AfterFunc(tt.cancelAfter, cancel)
			} else {
				when(t, "the batch scored", func() bool { return svc.Stats().Scored == 20 }, cancel)
			}
			start := time.Now()
			err = svc.Run(ctx)
			if tt.wantErr == nil && err != nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("Run: %v, want %v", err, tt.wantErr)
			}
			if st := svc.Stats(); st.Scored != tt.wantScored || time.Since(start) > 10*time.Second {
				t.Errorf("stats %+v after %v, want %d scored", st, time.Since(start), tt.wantScored)
			}
		})
	}
}

// Every number of Stats is defined once, and /metrics shows each
// with its help and type, and the value Stats gives, as Prometheus' own
// parser reads it.
func TestServeMetricsDefinedOnce(t *testing.T) {
	var st Stats
	numeric := map[uintptr]string{}
	v := reflect.ValueOf(&st).Elem()
	for _, sf := range reflect.VisibleFields(v.Type()) {
		switch f := v.FieldByIndex(sf.Index); f.Interface().(type) {
		case int64, float64, map[string]int64, Histogram:
			numeric[f.Addr().Pointer()] = sf.Name
		}
	}
	names := map[string]bool{}
	for i, def := range serveMetricDefs {
		var addr uintptr
		kind := def.kind.Type
		// Rows of one label's values follow the first, which has the help.
		labelRow := false
		switch field := def.field(&st).(type) {
		case *int64, *float64:
			addr = reflect.ValueOf(field).Pointer()
			if len(def.kind.Labels) > 0 || kind == "histogram" {
				t.Errorf("%s: a single number of kind %+v", def.name, def.kind)
			}
		case *map[string]int64:
			addr = reflect.ValueOf(field).Pointer()
		case metrics.LabelledInt:
			addr = reflect.ValueOf(field.Value).Pointer()
			labelRow = i > 0 && serveMetricDefs[i-1].name == def.name
			if len(def.kind.Labels) != 1 {
				t.Errorf("%s: a row of one label's value, kind %+v", def.name, def.kind)
			}
			if len(def.kind.Labels) != 1 {
				t.Errorf("%s: counts by one label, kind %+v", def.name, def.kind)
			}
		case *Histogram:
			addr = reflect.ValueOf(field).Pointer()
			if kind != "histogram" || !slices.IsSorted(def.kind.Buckets) {
				t.Errorf("%s: a histogram of kind %+v", def.name, def.kind)
			}
		case []metrics.Sample:
			if len(def.kind.Labels) == 0 {
				t.Errorf("%s: samples without labels", def.name)
			}
		default:
			t.Errorf("%s: field of type %T", def.name, field)
			continue
		}
		if addr != 0 {
			if _, ok := numeric[addr]; !ok {
				t.Errorf("%s: not a numeric field of Stats, or one defined twice", def.name)
			}
			delete(numeric, addr)
		}
		if !labelRow && (names[def.name] || def.help == "") || kind != "counter" && kind != "gauge" && kind != "histogram" ||
			kind == "counter" && !strings.HasSuffix(def.name, "_total") || kind == "histogram" && !strings.HasSuffix(def.name, "_seconds") {
			t.Errorf("%s: duplicate name, no help, or a type that does not fit", def.name)
		}
		names[def.name] = true
	}
	for _, name := range numeric {
		t.Errorf("Stats.%s has no metric", name)
	}

	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 120, 1))
	svc, err := NewService(Config{Model: m, Source: blockingSource{}, Output: sink.NewJSONL(io.Discard), DeadLetters: sink.NewRejects(io.Discard)})
	if err != nil {
		t.Fatal(err)
	}
	svc.metrics.add(metricIn, 1234567)
	svc.metrics.setFloat(metricAccumulated, 12.5)
	svc.metrics.addTo(metricRefitOutcomes, refitFailed, 2)
	svc.metrics.observe(metricScoreSeconds, 0.003)
	svc.metrics.observe(metricScoreSeconds, 7)
	svc.metrics.add(metricUnmatchedEvicted, 7)
	svc.join = newLabelJoin(svc, LateLabels{QualityWindow: 10}, m)
	svc.join.quality.add("v1", 1, 1)
	svc.join.quality.add("v1", 0, 1)
	rec := httptest.NewRecorder()
	svc.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	families := pipelinetest.ParseMetrics(t, rec.Body)
	for i, def := range serveMetricDefs {
		if i > 0 && serveMetricDefs[i-1].name == def.name {
			continue // a row of one label value: the first row has the help
		}
		f := families[def.name]
		if f == nil {
			// A metric with labels and no series yet (no Kafka partition
			// here) is left out, as Prometheus does.
			if len(def.kind.Labels) == 0 {
				t.Errorf("/metrics lacks %s", def.name)
			}
			continue
		}
		if f.GetHelp() != def.help || !strings.EqualFold(f.GetType().String(), def.kind.Type) {
			t.Errorf("%s: help %q, type %v; want %q, %s", def.name, f.GetHelp(), f.GetType(), def.help, def.kind.Type)
		}
	}
	if f := families["mvml_labels_unmatched_total"]; f == nil || len(f.GetMetric()) != 4 {
		t.Errorf("mvml_labels_unmatched_total: %v, want a series for each of the four reasons", f)
	}
	if f := families["mvml_prequential_accuracy"]; f == nil || len(f.GetMetric()) != 1 || f.GetMetric()[0].GetGauge().GetValue() != 0.5 {
		t.Errorf("mvml_prequential_accuracy: %v, want 0.5 for version v1", f)
	}
	for name, want := range map[string]float64{"mvml_records_in_total": 1234567, "mvml_refit_rows": 12.5, "mvml_records_scored_total": 0} {
		if got := pipelinetest.MetricValue(t, families, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if got := pipelinetest.MetricValue(t, families, "mvml_model_info", "version", m.Version); got != 1 {
		t.Errorf("mvml_model_info{version=%q} = %v, want 1", m.Version, got)
	}
	if got := pipelinetest.MetricValue(t, families, "mvml_refit_outcomes_total", "outcome", refitFailed); got != 2 {
		t.Errorf("refits failed %v, want 2", got)
	}
	h := families["mvml_batch_score_seconds"].GetMetric()[0].GetHistogram()
	if h.GetSampleCount() != 2 || h.GetSampleSum() != 7.003 || h.GetBucket()[3].GetUpperBound() != 0.005 || h.GetBucket()[3].GetCumulativeCount() != 1 {
		t.Errorf("mvml_batch_score_seconds: %v", h)
	}
	// The Go runtime and the process are there too.
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes"} {
		if families[name] == nil {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	if st := svc.Stats(); st.In != 1234567 || st.Accumulated != 12.5 || st.ScoreSeconds.Count != 2 || st.RefitOutcomes[refitFailed] != 2 {
		t.Errorf("stats %+v", st)
	}
}
