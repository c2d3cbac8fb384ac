package sink

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/mvml/mvml/schemas"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func writeJSONL(t *testing.T, recs ...arrow.Record) []byte {
	t.Helper()
	var buf bytes.Buffer
	s := NewJSONL(&buf)
	for _, rec := range recs {
		if err := s.Write(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestJSONLGolden(t *testing.T) {
	spec := testSpec(t)
	tests := []struct {
		golden  string
		records func(mem memory.Allocator) []arrow.Record
	}{
		{"output.jsonl", func(mem memory.Allocator) []arrow.Record {
			return []arrow.Record{outputRecord(mem, 0, 4, 3, true), outputRecord(mem, 4, 8, 3, true)}
		}},
		{"input.jsonl", func(mem memory.Allocator) []arrow.Record {
			return sliced(inputRecord(mem, spec, 0, 6, smoothFeature), 1, 6)
		}},
		{"nullable.jsonl", func(mem memory.Allocator) []arrow.Record {
			return []arrow.Record{nullableRecord(mem, 4)}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			recs := tt.records(mem)
			defer releaseAll(recs)
			got := writeJSONL(t, recs...)
			path := filepath.Join("testdata", tt.golden)
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("output differs from %s (run with -update to accept):\n%s", path, got)
			}
			checkJSONLMatches(t, got, recs)
		})
	}
}

// checkJSONLMatches decodes every line with encoding/json and compares it
// with the records: same keys in schema order, same values, NaN and ±Inf
// as null.
func checkJSONLMatches(t *testing.T, out []byte, recs []arrow.Record) {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(out))
	for _, rec := range recs {
		for i := 0; i < int(rec.NumRows()); i++ {
			if !sc.Scan() {
				t.Fatalf("output ends before row %d", i)
			}
			line := sc.Bytes()
			dec := json.NewDecoder(bytes.NewReader(line))
			dec.UseNumber()
			var obj map[string]any
			if err := dec.Decode(&obj); err != nil {
				t.Fatalf("line %q: %v", line, err)
			}
			if len(obj) != int(rec.NumCols()) {
				t.Fatalf("line %q has %d keys, want %d", line, len(obj), rec.NumCols())
			}
			for c, f := range rec.Schema().Fields() {
				if at := bytes.Index(line, []byte(`"`+f.Name+`":`)); at < 0 {
					t.Fatalf("line %q lacks key %q", line, f.Name)
				}
				want := jsonExpected(arrayValue(t, rec.Column(c), i))
				if !jsonMatches(obj[f.Name], want) {
					t.Fatalf("line %q: %s = %v, want %v", line, f.Name, obj[f.Name], want)
				}
			}
		}
	}
	if sc.Scan() {
		t.Fatalf("extra line %q", sc.Text())
	}
}

// jsonExpected is v as JSON can hold it: NaN and ±Inf become nil.
func jsonExpected(v any) any {
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil
		}
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = jsonExpected(x[i])
		}
		return out
	}
	return v
}

// jsonMatches reports whether a decoded JSON value (numbers as
// json.Number) equals want as arrayValue gives it.
func jsonMatches(got, want any) bool {
	switch w := want.(type) {
	case nil:
		return got == nil
	case int64:
		n, ok := got.(json.Number)
		i, err := n.Int64()
		return ok && err == nil && i == w
	case float64:
		n, ok := got.(json.Number)
		f, err := n.Float64()
		return ok && err == nil && f == w
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !jsonMatches(g[i], w[i]) {
				return false
			}
		}
		return true
	default:
		return got == want
	}
}

func TestJSONLFloatsMatchEncodingJSON(t *testing.T) {
	for _, v := range []float64{0, math.Copysign(0, -1), 1, -1.5, 1e-7, 1.234e-7, 1e-6, 123456789, 1e20, 1e21, 1.5e300, -2.5e-300, math.MaxFloat64, math.SmallestNonzeroFloat64, 1.0 / 3} {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendJSONFloat(nil, v); string(got) != string(want) {
			t.Errorf("%v: got %s, want %s", v, got, want)
		}
	}
}

func TestJSONLStringsMatchEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", `quo"te`, `back\slash`, "tab\tnew\nline\rcr", "\x00\x01\x1f\x7f", "héllo wörld ✓", "bad \xff utf8 \xe2\x82", "\u2028\u2029", "<html>&"} {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		if got := appendJSONString(nil, s); string(got) != strings.TrimSuffix(want.String(), "\n") {
			t.Errorf("%q: got %s, want %s", s, got, want.String())
		}
	}
}

func TestJSONLRejects(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	b := array.NewInt32Builder(mem)
	defer b.Release()
	b.Append(1)
	col := b.NewArray()
	unsupported := newRecord(arrow.NewSchema([]arrow.Field{{Name: "small", Type: arrow.PrimitiveTypes.Int32}}, nil), []arrow.Array{col}, 1)
	defer unsupported.Release()
	rec := outputRecord(mem, 0, 2, 2, false)
	defer rec.Release()
	canceled, cancel := context.WithCancel(context.Background())
	cancel()

	s := NewJSONL(io.Discard)
	if err := s.Write(context.Background(), unsupported); err == nil || !strings.Contains(err.Error(), `field "small": Arrow type int32 is not supported`) {
		t.Errorf("unsupported type: %v", err)
	}
	if err := s.Write(canceled, rec); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled context: %v", err)
	}
	if err := s.Write(context.Background(), rec); err != nil {
		t.Errorf("valid record after a rejected one: %v", err)
	}
	if err := (NewJSONL(&failingWriter{n: 10})).Write(context.Background(), rec); !errors.Is(err, errDiskFull) {
		t.Errorf("failing writer: %v", err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(context.Background(), rec); !errors.Is(err, errClosed) {
		t.Errorf("Write after Close: %v", err)
	}
}

func TestJSONLSchemaChangesBetweenRecords(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	a := outputRecord(mem, 0, 2, 2, false)
	defer a.Release()
	b := outputRecord(mem, 2, 2, 3, true)
	defer b.Release()
	checkJSONLMatches(t, writeJSONL(t, a, b, a), []arrow.Record{a, b, a})
}

// FuzzJSONL checks that any string, float and id come out as one line of
// valid JSON that decodes to the same values, as encoding/json reads them.
func FuzzJSONL(f *testing.F) {
	f.Add(int64(7), "v1", 0.5)
	f.Add(int64(-1), "quo\"te\n\x00", math.NaN())
	f.Add(int64(math.MaxInt64), "\xff\xfe\u2028", math.Inf(-1))
	f.Add(int64(math.MinInt64), "", 1e-300)
	f.Fuzz(func(t *testing.T, id int64, version string, value float64) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		rec := scoreRecord(mem, id, version, value)
		defer rec.Release()
		out := writeJSONL(t, rec)
		if bytes.Count(out, []byte("\n")) != 1 || out[len(out)-1] != '\n' {
			t.Fatalf("not one line: %q", out)
		}
		var got struct {
			ID       int64      `json:"id"`
			Version  string     `json:"model_version"`
			Pred     *float64   `json:"prediction"`
			Decision []*float64 `json:"decision"`
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%q: %v", out, err)
		}
		var wantVersion string
		roundTrip, _ := json.Marshal(version)
		if err := json.Unmarshal(roundTrip, &wantVersion); err != nil {
			t.Fatal(err)
		}
		if got.ID != id || got.Version != wantVersion {
			t.Fatalf("%q: id %d version %q, want %d %q", out, got.ID, got.Version, id, wantVersion)
		}
		finite := !math.IsNaN(value) && !math.IsInf(value, 0)
		for _, p := range []*float64{got.Pred, got.Decision[0]} {
			if (p != nil) != finite || finite && *p != value {
				t.Fatalf("%q: value decoded as %v, want %v", out, p, value)
			}
		}
	})
}

// scoreRecord is one output row with a single-column decision.
func scoreRecord(mem memory.Allocator, id int64, version string, value float64) arrow.Record {
	b := schemas.NewOutputBuilder(mem, schemas.OutputSchema(1, 0, false))
	defer b.Release()
	b.Append(id, version, value, []float64{value}, nil)
	return b.NewRecord()
}

// BenchmarkJSONL writes scores of an 8-class model with contributions.
func BenchmarkJSONL(b *testing.B) {
	mem := memory.NewGoAllocator()
	var recs []arrow.Record
	for start := 0; start < benchRows; start += benchRecordRows {
		recs = append(recs, outputRecord(mem, start, benchRecordRows, 8, true))
	}
	defer releaseAll(recs)
	ctx := context.Background()
	s := NewJSONL(io.Discard)
	b.ResetTimer()
	for range b.N {
		for _, rec := range recs {
			if err := s.Write(ctx, rec); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N*benchRows)/b.Elapsed().Seconds(), "rows/s")
}
