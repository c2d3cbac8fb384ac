package sink_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/mvml/mvml/schemas"
	"github.com/mvml/mvml/sink"
)

// scores builds a two-row output record of a three-class model.
func scores(mem memory.Allocator) arrow.Record {
	b := schemas.NewOutputBuilder(mem, schemas.OutputSchema(3, 0, false))
	defer b.Release()
	b.Append(17, "2026-11-25.1", 2, []float64{-0.75, 0.125, 1.5}, nil)
	b.Append(18, "2026-11-25.1", 1, []float64{-0.5, 0.25, -1}, nil)
	return b.NewRecord()
}

func ExampleNewJSONL() {
	rec := scores(memory.NewGoAllocator())
	defer rec.Release()
	out := sink.NewJSONL(os.Stdout)
	if err := out.Write(context.Background(), rec); err != nil {
		fmt.Println(err)
	}
	if err := out.Close(context.Background()); err != nil {
		fmt.Println(err)
	}
	// Output:
	// {"id":17,"model_version":"2026-11-25.1","prediction":2,"decision":[-0.75,0.125,1.5]}
	// {"id":18,"model_version":"2026-11-25.1","prediction":1,"decision":[-0.5,0.25,-1]}
}

func ExampleCreate() {
	rec := scores(memory.NewGoAllocator())
	defer rec.Release()
	dir, err := os.MkdirTemp("", "mvml-sink")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "scores.parquet")
	out, err := sink.Create(path, rec.Schema(), sink.ParquetOptions{Compression: "zstd"})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := out.Write(context.Background(), rec); err != nil {
		fmt.Println(err)
	}
	if err := out.Close(context.Background()); err != nil { // the file appears under path only now
		fmt.Println(err)
	}
	_, err = os.Stat(path)
	fmt.Println("written:", err == nil)
	// Output: written: true
}

func ExampleRejects() {
	rejects := sink.NewRejects(os.Stdout)
	err := rejects.Write(
		schemas.RowError{Source: "train.csv.gz", Row: 41, Column: "y_3", Reason: "view y feature 3 is NaN"},
		schemas.RowError{Source: "train.csv.gz", Row: 97, Column: "label", Reason: "label is missing"},
	)
	if err != nil {
		fmt.Println(err)
	}
	fmt.Println(rejects.Count(), "rejected")
	// Output:
	// {"source":"train.csv.gz","row":41,"column":"y_3","reason":"view y feature 3 is NaN"}
	// {"source":"train.csv.gz","row":97,"column":"label","reason":"label is missing"}
	// 2 rejected
}
