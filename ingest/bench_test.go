package ingest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"

	"github.com/mvml/mvml/schemas"
)

// The benchmarks read 200k rows of 3 views × 64 float32 features (plus id
// and label) through Open, as a pipeline would; each file is written once
// per test binary into a directory removed by TestMain.
const (
	benchRows  = 200_000
	benchViews = 3
	benchDim   = 64
)

var (
	benchDir     string
	benchFiles   = map[string]string{}
	benchFilesMu sync.Mutex
)

func TestMain(m *testing.M) {
	code := m.Run()
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}

// benchFile returns the path of the named benchmark file, writing it on
// first use.
func benchFile(b *testing.B, name string, write func(w io.Writer)) string {
	b.Helper()
	benchFilesMu.Lock()
	defer benchFilesMu.Unlock()
	if p, ok := benchFiles[name]; ok {
		return p
	}
	if benchDir == "" {
		dir, err := os.MkdirTemp("", "ingest-bench-")
		if err != nil {
			b.Fatal(err)
		}
		benchDir = dir
	}
	path := filepath.Join(benchDir, name)
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	write(w)
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	benchFiles[name] = path
	return path
}

// benchCell is the benchmark data: float32 features, an id and a label.
func benchCell(list bool) pqCell {
	return func(r int, column string) any {
		switch column {
		case "id":
			return int64(r)
		case "label":
			return float64(r % 8)
		}
		l := int(column[0] - 'a')
		if list {
			vals := make([]float32, benchDim)
			for j := range vals {
				vals[j] = float32(value(r, l, j))
			}
			return vals
		}
		j, _ := strconv.Atoi(column[2:])
		return float32(value(r, l, j))
	}
}

// benchParquet reads the file uncompressed and compressed with snappy.
func benchParquet(b *testing.B, list bool) {
	spec := testSpec(b, list, benchDim, benchDim, benchDim)
	name := "flat"
	group := flatGroup(spec, parquet.Leaf(parquet.FloatType), true)
	if list {
		name = "list"
		group = parquet.Group{"id": parquet.Int(64), "label": parquet.Optional(parquet.Leaf(parquet.DoubleType))}
		for _, v := range spec.Views {
			group[v.List] = parquet.List(parquet.Leaf(parquet.FloatType))
		}
	}
	for _, codec := range []compress.Codec{&parquet.Uncompressed, &parquet.Snappy} {
		b.Run(codec.String(), func(b *testing.B) {
			path := benchFile(b, name+"-"+codec.String()+".parquet", func(w io.Writer) {
				writeParquet(b, w, group, benchRows, benchCell(list), parquet.MaxRowsPerRowGroup(65536), parquet.Compression(codec))
			})
			info, err := os.Stat(path)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(info.Size())
			b.ResetTimer()
			for range b.N {
				drain(b, spec, path)
			}
			b.ReportMetric(float64(benchRows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

func drain(b *testing.B, spec *schemas.ViewSpec, path string) {
	src, err := Open(context.Background(), spec, []string{path}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	rows := 0
	for {
		batch, err := src.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		rows += int(batch.Record.NumRows())
		batch.Record.Release()
	}
	if rows != benchRows {
		b.Fatalf("read %d rows, want %d", rows, benchRows)
	}
}

func BenchmarkParquetFlat(b *testing.B) { benchParquet(b, false) }

func BenchmarkParquetList(b *testing.B) { benchParquet(b, true) }

func BenchmarkCSV(b *testing.B) {
	spec := testSpec(b, false, benchDim, benchDim, benchDim)
	path := benchFile(b, "bench.csv", func(w io.Writer) {
		writeCSV(w, spec, benchRows, func(r, l, j int) string {
			return strconv.FormatFloat(float64(float32(value(r, l, j))), 'g', -1, 32)
		})
	})
	info, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(info.Size())
	b.ResetTimer()
	for range b.N {
		drain(b, spec, path)
	}
	b.ReportMetric(float64(benchRows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// writeCSV writes n rows of spec's flat columns: id, label, then the views.
func writeCSV(w io.Writer, spec *schemas.ViewSpec, n int, cell func(r, l, j int) string) {
	bw := bufio.NewWriter(w)
	bw.WriteString("id,label")
	for _, v := range spec.Views {
		for _, c := range v.ColumnNames() {
			bw.WriteString("," + c)
		}
	}
	bw.WriteByte('\n')
	for r := range n {
		bw.WriteString(strconv.Itoa(r))
		bw.WriteString("," + strconv.Itoa(r%8))
		for l, v := range spec.Views {
			for j := range v.Dimension() {
				bw.WriteByte(',')
				bw.WriteString(cell(r, l, j))
			}
		}
		bw.WriteByte('\n')
	}
	bw.Flush()
}

// BenchmarkNumbers converts the numbers of the Kafka benchmark's messages
// (standard normal values in shortest round-trip text, of a float64 or of a
// float32) one by one: with the JSON scanner, with the CSV parser, and with
// strconv.ParseFloat for reference.
func BenchmarkNumbers(b *testing.B) {
	for _, bits := range []int{64, 32} {
		rng := rand.New(rand.NewPCG(1, 2))
		texts := make([][]byte, 4096)
		for i := range texts {
			texts[i] = strconv.AppendFloat(nil, rng.NormFloat64(), 'g', -1, bits)
		}
		// The JSON scanner reads each number where it stands in a message,
		// followed by a comma.
		joined := bytes.Join(texts, []byte{','})
		for _, conv := range []struct {
			name string
			run  func(b *testing.B)
		}{
			{"json", func(b *testing.B) {
				var s jsonScanner
				for range b.N {
					s.reset(joined)
					for {
						if _, _, bad := s.readFloat(); bad != nil {
							b.Fatal(bad.reason)
						}
						if !s.consume(',') {
							break
						}
					}
				}
			}},
			{"csv", func(b *testing.B) {
				for range b.N {
					for _, t := range texts {
						if _, ok := parseFloat(t); !ok {
							b.Fatalf("%s rejected", t)
						}
					}
				}
			}},
			{"strconv", func(b *testing.B) {
				for range b.N {
					for _, t := range texts {
						if _, err := strconv.ParseFloat(string(t), 64); err != nil {
							b.Fatal(err)
						}
					}
				}
			}},
		} {
			b.Run(fmt.Sprintf("float%d/%s", bits, conv.name), func(b *testing.B) {
				b.SetBytes(int64(len(joined)))
				conv.run(b)
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(texts)), "ns/number")
			})
		}
	}
}
