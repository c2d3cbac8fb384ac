package pipeline

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/mvml/mvml/model"
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
	svc, err := NewService(ServeConfig{Model: m1, Source: src, Output: sink.NewJSONL(io.Discard), DeadLetters: sink.NewRejects(io.Discard),
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
	if st := svc.Stats(); st.Refits != 0 || st.RefitFailures != 0 || st.ModelVersion != m2.Version {
		t.Errorf("stats %+v: want no refit, no failure, %s in service", st, m2.Version)
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
			svc, err := NewService(ServeConfig{Model: m, Source: src, Output: slowSink{sink.NewJSONL(io.Discard), tt.delay},
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

// Every number of ServeStats is defined once, and /metrics shows each
// with its help and type, and the value Stats gives; a metric with a
// label has a row per label value, or samples (the prequential quality by
// version).
func TestServeMetricsDefinedOnce(t *testing.T) {
	var st ServeStats
	numeric := map[uintptr]string{}
	v := reflect.ValueOf(&st).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Int64 || f.Kind() == reflect.Float64 {
			numeric[f.Addr().Pointer()] = v.Type().Field(i).Name
		}
	}
	names := map[string]bool{}
	for i, def := range serveMetricDefs {
		var addr uintptr
		// Rows of one label's values follow the first, which has the help.
		labelRow := false
		switch field := def.field(&st).(type) {
		case *int64:
			addr = reflect.ValueOf(field).Pointer()
		case *float64:
			addr = reflect.ValueOf(field).Pointer()
		case labelledInt:
			addr = reflect.ValueOf(field.Value).Pointer()
			labelRow = i > 0 && serveMetricDefs[i-1].name == def.name
		case []MetricSample:
		default:
			t.Errorf("%s: field of type %T", def.name, field)
			continue
		}
		if addr != 0 {
			if _, ok := numeric[addr]; !ok {
				t.Errorf("%s: not a numeric field of ServeStats, or one defined twice", def.name)
			}
			delete(numeric, addr)
		}
		if !labelRow && (names[def.name] || def.help == "") || def.kind != counter && def.kind != gauge ||
			def.kind == counter && !strings.HasSuffix(def.name, "_total") {
			t.Errorf("%s: duplicate name, no help, or a type that does not fit", def.name)
		}
		names[def.name] = true
	}
	for _, name := range numeric {
		t.Errorf("ServeStats.%s has no metric", name)
	}

	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 120, 1))
	svc, err := NewService(ServeConfig{Model: m, Source: blockingSource{}, Output: sink.NewJSONL(io.Discard), DeadLetters: sink.NewRejects(io.Discard)})
	if err != nil {
		t.Fatal(err)
	}
	svc.metrics.add(metricIn, 1234567)
	svc.metrics.setFloat(metricAccumulated, 12.5)
	svc.metrics.add(metricUnmatchedEvicted, 7)
	svc.join = newLabelJoin(svc, LateLabels{QualityWindow: 10}, m)
	svc.join.quality.add("v1", 1, 1)
	svc.join.quality.add("v1", 0, 1)
	rec := httptest.NewRecorder()
	svc.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{"# HELP mvml_records_in_total Records taken from the source.\n# TYPE mvml_records_in_total counter\nmvml_records_in_total 1234567\n",
		"# TYPE mvml_refit_rows gauge\nmvml_refit_rows 12.5\n", "# TYPE mvml_model_info gauge\nmvml_model_info{version=\"" + m.Version + "\"} 1\n",
		"# TYPE mvml_labels_unmatched_total counter\nmvml_labels_unmatched_total{reason=\"expired\"} 0\nmvml_labels_unmatched_total{reason=\"evicted\"} 7\n",
		"# TYPE mvml_prequential_accuracy gauge\nmvml_prequential_accuracy{version=\"v1\"} 0.5\n",
		"# TYPE mvml_prequential_nmse gauge\n# HELP", "mvml_prequential_labels{version=\"v1\"} 2\n"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
	if n := strings.Count(body, "# TYPE "); n != len(names)+1 {
		t.Errorf("/metrics has %d metrics, want %d", n, len(names)+1)
	}
	if st := svc.Stats(); st.In != 1234567 || st.Accumulated != 12.5 || st.LabelsUnmatchedEvicted != 7 || len(st.Quality) != 1 || *st.Quality[0].Accuracy != 0.5 {
		t.Errorf("stats %+v", st)
	}
}
