package pipeline

import (
	"bufio"
	"context"
	"encoding/json"
	"math"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline/internal/pipelinetest"
	"github.com/mvml/mvml/schemas"
	"github.com/mvml/mvml/sink"
)

// dataset, testSpec, makeData and trainTestModel are pipelinetest's, by
// the short names the many tests of this package use.
type dataset = pipelinetest.Dataset

func testSpec(t testing.TB) *schemas.ViewSpec { t.Helper(); return pipelinetest.Spec(t) }

func makeData(spec *schemas.ViewSpec, n int, seed uint64) *dataset {
	return pipelinetest.MakeData(spec, n, seed)
}

func trainTestModel(t testing.TB, spec *schemas.ViewSpec, d *dataset) *model.Model {
	t.Helper()
	return pipelinetest.TrainTestModel(t, spec, d)
}

// writeParquet writes d as a Parquet file in the flat input layout, with
// float32 features when f32 (as a feature store would).
func writeParquet(t testing.TB, path string, spec *schemas.ViewSpec, d *dataset, f32 bool) {
	t.Helper()
	schema := schemas.InputSchema(spec)
	flat := make(map[string][]string)
	for l := range spec.Views {
		flat[spec.Views[l].Name] = spec.Views[l].ColumnNames()
	}
	out, err := sink.Create(path, schema, sink.ParquetOptions{Flatten: flat, Float32: f32})
	if err != nil {
		t.Fatal(err)
	}
	const chunk = 16384
	mem := memory.NewGoAllocator()
	for lo := 0; lo < d.Rows(); lo += chunk {
		hi := min(lo+chunk, d.Rows())
		rec := pipelinetest.InputRecord(mem, spec, d, lo, hi)
		err := out.Write(context.Background(), rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := out.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// scoreLine is one row of a JSON Lines score output.
type scoreLine struct {
	ID            int64     `json:"id"`
	ModelVersion  string    `json:"model_version"`
	Prediction    float64   `json:"prediction"`
	Decision      []float64 `json:"decision"`
	Contributions []float64 `json:"contributions"`
}

func readScores(t testing.TB, path string) []scoreLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []scoreLine
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var s scoreLine
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func readRejects(t testing.TB, path string) []schemas.RowError {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []schemas.RowError
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if line == "" {
			continue
		}
		var e schemas.RowError
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("%s: %q: %v", path, line, err)
		}
		out = append(out, e)
	}
	return out
}

func closeTo(a, b float64) bool {
	return math.Abs(a-b) <= 1e-9*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

// dirEntries lists the names in dir, to show that failed jobs leave no
// staging or temporary files behind.
func dirEntries(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// peakAllocator records the most bytes it had allocated at any time.
type peakAllocator struct {
	memory.Allocator
	cur, peak atomic.Int64
}

func (p *peakAllocator) grow(delta int64) {
	now := p.cur.Add(delta)
	for {
		old := p.peak.Load()
		if now <= old || p.peak.CompareAndSwap(old, now) {
			return
		}
	}
}

func (p *peakAllocator) Allocate(size int) []byte {
	p.grow(int64(size))
	return p.Allocator.Allocate(size)
}

func (p *peakAllocator) Reallocate(size int, b []byte) []byte {
	p.grow(int64(size - len(b)))
	return p.Allocator.Reallocate(size, b)
}

func (p *peakAllocator) Free(b []byte) {
	p.grow(-int64(len(b)))
	p.Allocator.Free(b)
}
