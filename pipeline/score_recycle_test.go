package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/mvml/mvml/pipeline/internal/pipelinetest"
)

// A scoring job with no allocator given recycles its buffers (arrowalloc.Recycler):
// with many batches of pooled sizes on several workers, and rows rejected
// along the way, its output and rejects are those of a job on a plain Go
// allocator, whose buffers are never reused.
func TestScoreRecycledBuffersSameOutput(t *testing.T) {
	spec := testSpec(t)
	d := makeData(spec, 3000, 8)
	m := trainTestModel(t, spec, d)
	dir := t.TempDir()
	pipelinetest.WriteCSV(t, filepath.Join(dir, "in.csv"), spec, d, badInput)
	writeParquet(t, filepath.Join(dir, "in.parquet"), spec, d, true)
	tests := []struct {
		name, input   string
		contributions bool
	}{
		{"csv with bad rows", "in.csv", false},
		{"parquet with contributions", "in.parquet", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			run := func(name string, mem memory.Allocator) (scores, rejects []byte) {
				out, rej := filepath.Join(dir, name+".jsonl"), filepath.Join(dir, name+"-rejects.jsonl")
				_, err := Score(context.Background(), ScoreConfig{
					Model: m, Inputs: []string{filepath.Join(dir, tc.input)}, Output: out,
					Contributions: tc.contributions, OnError: OnErrorSkip, Rejects: rej, Workers: 3,
					Options: Options{BatchSize: 512, Allocator: mem},
				})
				if err != nil {
					t.Fatal(err)
				}
				return readFile(t, out), readFile(t, rej)
			}
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			wantScores, wantRejects := run("go", mem)
			mem.AssertSize(t, 0)
			gotScores, gotRejects := run("pool", nil)
			if len(readScores(t, filepath.Join(dir, "pool.jsonl"))) < 2900 {
				t.Fatal("too few rows scored for the comparison to mean anything")
			}
			if !reflect.DeepEqual(gotScores, wantScores) || !reflect.DeepEqual(gotRejects, wantRejects) {
				t.Error("scores or rejects differ from those of a Go allocator")
			}
		})
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
