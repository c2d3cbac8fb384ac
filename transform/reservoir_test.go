package transform

import (
	"math"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// rowsNumbered returns two views of n rows whose values say which row they
// are: view 0 holds i, view 1 holds i and −i.
func rowsNumbered(from, n int) []*mat.Dense {
	a, b := mat.NewDense(n, 1, nil), mat.NewDense(n, 2, nil)
	for i := range n {
		a.Set(i, 0, float64(from+i))
		b.SetRow(i, []float64{float64(from + i), -float64(from + i)})
	}
	return []*mat.Dense{a, b}
}

// offer adds rows [0, n) in batches of the given size and returns the
// reservoir and, per slot, the row the last report put there.
func offer(t *testing.T, n, batch, size int, seed uint64) (*Reservoir, []int) {
	t.Helper()
	r := NewReservoir([]int{1, 2}, size, seed)
	var bySlot []int
	for from := 0; from < n; from += batch {
		k := min(batch, n-from)
		slots := make([]int, k)
		r.Add(slots, rowsNumbered(from, k))
		for i, s := range slots {
			switch {
			case s == len(bySlot):
				bySlot = append(bySlot, from+i)
			case s >= 0:
				bySlot[s] = from + i
			}
		}
	}
	return r, bySlot
}

// The sample holds at most its size of rows, every view of a row in the
// same slot, the slots the caller was told of; it does not depend on how
// the rows were batched, only on the seed.
func TestReservoir(t *testing.T) {
	for _, tc := range []struct {
		name           string
		n, batch, size int
		seed           uint64
		wantKept       int
		wantInOrder    bool // every row kept, slot i holding row i
	}{
		{"fewer rows than the size", 40, 7, 50, 1, 40, true},
		{"as many rows as the size", 50, 50, 50, 1, 50, true},
		{"more rows, one batch", 1000, 1000, 50, 1, 50, false},
		{"more rows, small batches", 1000, 3, 50, 1, 50, false},
		{"more rows, other seed", 1000, 64, 50, 2, 50, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, bySlot := offer(t, tc.n, tc.batch, tc.size, tc.seed)
			if r.Seen() != int64(tc.n) {
				t.Errorf("seen %d rows, offered %d", r.Seen(), tc.n)
			}
			sample := r.Sample()
			kept, _ := sample[0].Dims()
			if kept != tc.wantKept || len(bySlot) != kept {
				t.Fatalf("kept %d rows, %d slots reported; want %d", kept, len(bySlot), tc.wantKept)
			}
			for slot, row := range bySlot {
				if a, b := sample[0].At(slot, 0), sample[1].RawRowView(slot); a != float64(row) || b[0] != float64(row) || b[1] != -float64(row) {
					t.Fatalf("slot %d holds %v and %v, want row %d in both views", slot, a, b, row)
				}
				if tc.wantInOrder && row != slot {
					t.Fatalf("slot %d holds row %d", slot, row)
				}
			}
			_, oneBatch := offer(t, tc.n, tc.n, tc.size, tc.seed)
			if !slices.Equal(bySlot, oneBatch) {
				t.Errorf("batches of %d sample other rows than one batch", tc.batch)
			}
		})
	}
}

// Every row is kept with probability size/n: over many seeds, the rows of
// each tenth of the stream fill about a tenth of the sample.
func TestReservoirUniform(t *testing.T) {
	const n, size, seeds = 2000, 100, 200
	var tenths [10]float64
	for seed := range uint64(seeds) {
		_, bySlot := offer(t, n, 128, size, seed)
		for _, row := range bySlot {
			tenths[row*10/n]++
		}
	}
	want := float64(size*seeds) / 10
	for i, got := range tenths {
		// The count is binomial: sd = sqrt(n p (1-p)) ≈ 42 here; allow 5 sd.
		if math.Abs(got-want) > 5*math.Sqrt(want*0.9) {
			t.Errorf("tenth %d of the stream: %v sampled rows, want about %v", i, got, want)
		}
	}
}
