package pipelinetest

import (
	"io"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	prommodel "github.com/prometheus/common/model"

	"github.com/prometheus/common/expfmt"
)

// ParseMetrics reads a Prometheus text exposition with Prometheus' own
// parser.
func ParseMetrics(t testing.TB, r io.Reader) map[string]*dto.MetricFamily {
	t.Helper()
	parser := expfmt.NewTextParser(prommodel.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return families
}

// MetricValue is the value of the counter or gauge name whose labels
// include the given name, value pairs; it fails the test when there is
// none.
func MetricValue(t testing.TB, families map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	f := families[name]
	if f == nil {
		t.Fatalf("/metrics lacks %s", name)
	}
next:
	for _, m := range f.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == labels[i] && l.GetValue() == labels[i+1] }) {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("/metrics lacks %s%v", name, labels)
	return 0
}

// WaitFor polls cond until it holds or 20 s have passed, then fails the
// test naming what it waited for.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
