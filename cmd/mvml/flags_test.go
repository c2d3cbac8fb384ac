package main

import (
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/model"
)

func TestParseLandmarks(t *testing.T) {
	tests := []struct {
		in   string
		want float64
		ok   bool
	}{
		{"0.12", 0.12, true},
		{"1", 1, true},
		{"64", 64, true},
		{" 8 ", 8, true},
		{"1e2", 100, true},
		{"0", 0, false},
		{"-3", 0, false},
		{"1.5", 0, false},
		{"NaN", 0, false},
		{"+Inf", 0, false},
		{"ten", 0, false},
	}
	for _, tt := range tests {
		got, err := parseLandmarks(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseLandmarks(%q) = %v, %v; want %v, ok %t", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestParseGrid(t *testing.T) {
	tests := []struct {
		in     string
		name   string
		values []float64
		ok     bool
	}{
		{"lambda=1e-6,1e-4,1e-2", "lambda", []float64{1e-6, 1e-4, 1e-2}, true},
		{" eta = 0.01, 1 ,100", "eta", []float64{0.01, 1, 100}, true},
		{"landmarks=0.06", "landmarks", []float64{0.06}, true},
		{"lambda", "", nil, false},
		{"=1,2", "", nil, false},
		{"lambda=", "", nil, false},
		{"lambda=1,,2", "", nil, false},
		{"lambda=1,x", "", nil, false},
		{"lambda=NaN", "", nil, false},
	}
	for _, tt := range tests {
		name, values, err := parseGrid(tt.in)
		if (err == nil) != tt.ok || name != tt.name || !slices.Equal(values, tt.values) {
			t.Errorf("parseGrid(%q) = %q, %v, %v; want %q, %v, ok %t", tt.in, name, values, err, tt.name, tt.values, tt.ok)
		}
	}
}

func FuzzParseGrid(f *testing.F) {
	for _, s := range []string{"lambda=1e-6,1e-4", "eta=0.01,1,100", "mu=", "=", "a=1,,2", "x=NaN,Inf"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		name, values, err := parseGrid(s)
		if err != nil {
			return
		}
		if name == "" || strings.ContainsAny(name, "=") || len(values) == 0 {
			t.Fatalf("parseGrid(%q) accepted name %q values %v", s, name, values)
		}
		for _, v := range values {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("parseGrid(%q) accepted %v", s, v)
			}
		}
		// What it accepted, written back, reads the same.
		name2, values2, err := parseGrid(name + "=" + joinFloats(values))
		if err != nil || name2 != name || !slices.Equal(values2, values) {
			t.Fatalf("round trip of %q: %q %v %v", s, name2, values2, err)
		}
	})
}

func FuzzParseLandmarks(f *testing.F) {
	for _, s := range []string{"0.12", "1", "64", "1.5", "-1", "0", "1e300", "0x10"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseLandmarks(s)
		if err != nil {
			return
		}
		if !(v > 0) || math.IsInf(v, 0) || (v > 1 && v != math.Trunc(v)) {
			t.Fatalf("parseLandmarks(%q) accepted %v", s, v)
		}
	})
}

func TestProgressLine(t *testing.T) {
	tests := []struct {
		name    string
		done    int64
		total   int64
		elapsed time.Duration
		want    string
	}{
		{"known total", 50_000, 200_000, 2 * time.Second,
			"score [======                  ]  25% 50,000/200,000 rows  25,000 rows/s  ETA 6s"},
		{"done", 200_000, 200_000, 4 * time.Second,
			"score [========================] 100% 200,000/200,000 rows  50,000 rows/s  4s"},
		{"unknown total", 1234, 0, 500 * time.Millisecond,
			"score 1,234 rows  2,468 rows/s  500ms"},
	}
	for _, tt := range tests {
		b := &progress{label: "score", unit: "rows", total: tt.total, done: tt.done}
		if got := b.line(tt.elapsed); got != tt.want {
			t.Errorf("%s:\n got %q\nwant %q", tt.name, got, tt.want)
		}
	}
}

func TestCount(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -5: "-5"} {
		if got := count(n); got != want {
			t.Errorf("count(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestParseTime(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"", time.Time{}, true},
		{"2026-11-25T08:30:00Z", time.Date(2026, 11, 25, 8, 30, 0, 0, time.UTC), true},
		{"2026-11-25T08:30:00+01:00", time.Date(2026, 11, 25, 7, 30, 0, 0, time.UTC), true},
		{"24h", now.Add(-24 * time.Hour), true},
		{"90m", now.Add(-90 * time.Minute), true},
		{"-1h", time.Time{}, false},
		{"yesterday", time.Time{}, false},
		{"2026-11-25", time.Time{}, false},
	} {
		got, err := parseTime("from", tc.in, now)
		if (err == nil) != tc.ok || !got.Equal(tc.want) {
			t.Errorf("parseTime(%q) = %v, %v; want %v (ok %t)", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// The flags' defaults are the library's: not one copied as a literal that
// could drift from it.
func TestFlagDefaultsAreTheLibrarys(t *testing.T) {
	fs := newFlagSet("train")
	fit, read := registerFit(fs), registerRead(fs)
	cfg, err := fit.config(3)
	if err != nil {
		t.Fatal(err)
	}
	if want := model.DefaultTrainConfig(); !reflect.DeepEqual(cfg, want) {
		t.Errorf("fit flags' defaults give %+v, model's are %+v", cfg, want)
	}
	if read.batchSize != ingest.DefaultBatchSize {
		t.Errorf("--batch-size defaults to %d, ingest's default is %d", read.batchSize, ingest.DefaultBatchSize)
	}
}
