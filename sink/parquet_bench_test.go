package sink

import (
	"context"
	"io"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/mvml/mvml/schemas"
)

// benchRows is the batch each benchmark iteration writes, in records of
// benchRecordRows as a pipeline would hand them over.
const (
	benchRows       = 1 << 16
	benchRecordRows = 4096
)

func benchmarkParquet(b *testing.B, recs []arrow.Record, opts ParquetOptions) {
	b.Helper()
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		s, err := NewParquet(io.Discard, recs[0].Schema(), opts)
		if err != nil {
			b.Fatal(err)
		}
		for _, rec := range recs {
			if err := s.Write(ctx, rec); err != nil {
				b.Fatal(err)
			}
		}
		if err := s.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*benchRows)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkParquetOutput writes scores of an 8-class model.
func BenchmarkParquetOutput(b *testing.B) {
	mem := memory.NewGoAllocator()
	var recs []arrow.Record
	for start := 0; start < benchRows; start += benchRecordRows {
		recs = append(recs, outputRecord(mem, start, benchRecordRows, 8, false))
	}
	defer releaseAll(recs)
	for _, compression := range []string{"snappy", "zstd", "none"} {
		b.Run(compression, func(b *testing.B) {
			benchmarkParquet(b, recs, ParquetOptions{Compression: compression})
		})
	}
}

// BenchmarkParquetInput writes canonical input of 3 views × 64 features.
func BenchmarkParquetInput(b *testing.B) {
	spec := &schemas.ViewSpec{Task: schemas.Classification}
	for _, name := range []string{"x", "y", "z"} {
		spec.Views = append(spec.Views, schemas.View{Name: name, Prefix: name + "_", Dim: 64})
	}
	// Sensor-like noise: smooth synthetic values would flatter compression.
	rng := rand.New(rand.NewPCG(1, 2))
	noise := func(int, int, int) float64 { return rng.NormFloat64() }
	mem := memory.NewGoAllocator()
	var recs []arrow.Record
	for start := 0; start < benchRows; start += benchRecordRows {
		recs = append(recs, inputRecord(mem, spec, start, benchRecordRows, noise))
	}
	defer releaseAll(recs)
	flatten := map[string][]string{}
	for _, v := range spec.Views {
		flatten[v.Name] = v.ColumnNames()
	}
	for _, tc := range []struct {
		name string
		opts ParquetOptions
	}{
		{"flat-float32", ParquetOptions{Flatten: flatten, Float32: true}},
		{"flat-float64", ParquetOptions{Flatten: flatten}},
		{"list-float64", ParquetOptions{}},
	} {
		b.Run(tc.name+"-"+strconv.Itoa(len(spec.Views))+"x64", func(b *testing.B) {
			benchmarkParquet(b, recs, tc.opts)
		})
	}
}
