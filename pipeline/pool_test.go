package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"unsafe"

	"github.com/apache/arrow/go/v15/arrow/memory"
)

func TestBufferPool(t *testing.T) {
	tests := []struct {
		size, capacity int
	}{
		{0, 0},
		{100, 100}, // below the smallest class: the Go heap's
		{minPooled - 1, minPooled - 1},
		{minPooled, minPooled},
		{minPooled + 1, 2 * minPooled},
		{6 << 20, 8 << 20}, // a batch's view of 4096 rows × 192 features
	}
	var p bufferPool
	for _, tc := range tests {
		// A buffer handed out again comes back zeroed, whatever it held.
		for round := range 3 {
			b := p.Allocate(tc.size)
			if len(b) != tc.size || cap(b) != tc.capacity {
				t.Fatalf("size %d, round %d: len %d cap %d, want %d and %d", tc.size, round, len(b), cap(b), tc.size, tc.capacity)
			}
			if tc.size > 0 && uintptr(unsafe.Pointer(&b[0]))%alignment != 0 {
				t.Fatalf("size %d: buffer at %p is not aligned to %d bytes", tc.size, &b[0], alignment)
			}
			for i, x := range b {
				if x != 0 {
					t.Fatalf("size %d, round %d: byte %d is %d, want 0", tc.size, round, i, x)
				}
			}
			for i := range b {
				b[i] = 0xff
			}
			p.Free(b)
		}
	}
	for size, want := range map[int]int{minPooled - 1: -1, minPooled: 0, minPooled + 1: 1, 1 << 30: pooledClasses - 1, 1<<30 + 1: -1} {
		if c := poolClass(size); c != want {
			t.Errorf("poolClass(%d) = %d, want %d", size, c, want)
		}
	}
	t.Run("reallocate", func(t *testing.T) {
		b := p.Allocate(5000)
		for i := range b {
			b[i] = byte(i)
		}
		if same := p.Reallocate(6000, b); &same[0] != &b[0] || len(same) != 6000 {
			t.Fatal("growing within the capacity moved the buffer")
		}
		grown := p.Reallocate(9000, b)
		if len(grown) != 9000 || cap(grown) != 4*minPooled {
			t.Fatalf("grown to len %d cap %d, want 9000 and %d", len(grown), cap(grown), 4*minPooled)
		}
		for i := range 5000 {
			if grown[i] != byte(i) {
				t.Fatalf("byte %d is %d after growing, want %d", i, grown[i], byte(i))
			}
		}
		for i, x := range grown[5000:] {
			if x != 0 {
				t.Fatalf("byte %d past the old length is %d, want 0", 5000+i, x)
			}
		}
	})
}

// A scoring job with no allocator given recycles its buffers (bufferPool):
// with many batches of pooled sizes on several workers, and rows rejected
// along the way, its output and rejects are those of a job on a plain Go
// allocator, whose buffers are never reused.
func TestScoreRecycledBuffersSameOutput(t *testing.T) {
	spec := testSpec(t)
	d := makeData(spec, 3000, 8)
	m := trainTestModel(t, spec, d)
	dir := t.TempDir()
	writeCSV(t, filepath.Join(dir, "in.csv"), spec, d, badInput)
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
