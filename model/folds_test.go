package model

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// seqIDs returns the ids lo, lo+1, …, hi−1.
func seqIDs(lo, hi int) []int64 {
	ids := make([]int64, hi-lo)
	for i := range ids {
		ids[i] = int64(lo + i)
	}
	return ids
}

// A row's fold depends on its id and the fold count alone: these values
// are what every build and every process computes, and consecutive ids
// spread evenly over the folds.
func TestFoldOf(t *testing.T) {
	for _, tc := range []struct {
		id   int64
		k    int
		want int
	}{
		{0, 5, 4}, {1, 5, 2}, {2, 5, 2}, {3, 5, 0}, {-1, 5, 4}, {1 << 40, 5, 0},
		{12345, 1, 0}, {12345, 0, 0}, {7, 100, 38},
	} {
		if got := FoldOf(tc.id, tc.k); got != tc.want {
			t.Errorf("FoldOf(%d, %d) = %d, want %d", tc.id, tc.k, got, tc.want)
		}
	}
	count := make([]int, 5)
	for id := range int64(10_000) {
		f := FoldOf(id, 5)
		if f < 0 || f >= 5 {
			t.Fatalf("FoldOf(%d, 5) = %d", id, f)
		}
		count[f]++
	}
	for f, c := range count {
		if c < 1850 || c > 2150 { // ±3.75 standard deviations
			t.Errorf("fold %d holds %d of 10,000 consecutive ids, want about 2,000", f, c)
		}
	}
}

// foldToy is trainedToy's model with a 5-fold accumulator of its rows,
// some of them decayed, and the rows with their ids.
func foldToy(t testing.TB) (*Model, *Accumulator, []*mat.Dense, []float64) {
	t.Helper()
	m, views := trainedToy(t)
	labels := toyLabels()
	acc, err := m.NewFoldAccumulator(5)
	if err != nil {
		t.Fatal(err)
	}
	v, l := rowsOf(views, labels, 0, 70)
	if err := acc.AddFolds(seqIDs(0, 70), v, l); err != nil {
		t.Fatal(err)
	}
	acc.Decay(0.75)
	var u mat.Dense
	v, l = rowsOf(views, labels, 70, 120)
	m.Project(&u, v)
	if err := acc.AddProjectedFolds(seqIDs(70, 120), &u, l); err != nil {
		t.Fatal(err)
	}
	return m, acc, views, labels
}

// Every row lands in its id's fold, the folds add up to the rows' sums
// and the accumulator's rows; rows without ids, or ids of another count,
// are refused and add nothing.
func TestFoldAccumulator(t *testing.T) {
	m, views := trainedToy(t)
	labels := toyLabels()
	ids := seqIDs(1000, 1120)
	acc, err := m.NewFoldAccumulator(4)
	if err != nil {
		t.Fatal(err)
	}
	if err := acc.AddFolds(ids, views, labels); err != nil {
		t.Fatal(err)
	}
	one := m.NewAccumulator()
	if err := one.Add(views, labels); err != nil {
		t.Fatal(err)
	}
	var want [4]float64
	for _, id := range ids {
		want[FoldOf(id, 4)]++
	}
	for f, n := range acc.FoldRows() {
		if n != want[f] {
			t.Errorf("fold %d holds %v rows, want %v", f, n, want[f])
		}
		// Fold f alone is the rows of its ids.
		sep := m.NewAccumulator()
		var fv []*mat.Dense
		var fl []float64
		for i, id := range ids {
			if FoldOf(id, 4) != f {
				continue
			}
			v, l := rowsOf(views, labels, i, i+1)
			if fv == nil {
				fv = []*mat.Dense{mat.DenseCopyOf(v[0]), mat.DenseCopyOf(v[1])}
			} else {
				for j := range fv {
					var s mat.Dense
					s.Stack(fv[j], v[j])
					fv[j] = &s
				}
			}
			fl = append(fl, l...)
		}
		if err := sep.Add(fv, fl); err != nil {
			t.Fatal(err)
		}
		if diff := statsDiffer(acc.FoldStats(f), sep.stats); diff != "" && exactBLAS {
			t.Errorf("fold %d: %s", f, diff)
		}
	}
	if acc.Rows() != 120 || acc.Folds() != 4 {
		t.Errorf("%v rows in %d folds, want 120 in 4", acc.Rows(), acc.Folds())
	}
	if exactBLAS {
		if diff := statsDiffer(acc.Stats(), one.stats); diff != "" {
			t.Errorf("the folds merged differ from one pass: %s", diff)
		}
	}
	a, err := acc.RefitCold(context.Background(), m.Config.Fit)
	if err != nil {
		t.Fatal(err)
	}
	b, err := one.RefitCold(context.Background(), m.Config.Fit)
	if err != nil {
		t.Fatal(err)
	}
	if exactBLAS && a.Version != b.Version {
		t.Errorf("refit of 4 folds is version %s, of one pass %s", a.Version, b.Version)
	}

	for _, tc := range []struct {
		name string
		add  func() error
		want string
	}{
		{"rows without ids", func() error { return acc.Add(views, labels) }, "add rows with their ids"},
		{"projected rows without ids", func() error {
			var u mat.Dense
			m.Project(&u, views)
			return acc.AddProjected(&u, labels)
		}, "add rows with their ids"},
		{"ids short", func() error { return acc.AddFolds(ids[1:], views, labels) }, "120 rows but 120 labels and 119 ids"},
		{"an unknown class", func() error {
			return acc.AddFolds(ids[:1], []*mat.Dense{mat.DenseCopyOf(views[0].Slice(0, 1, 0, 2)), mat.DenseCopyOf(views[1].Slice(0, 1, 0, 3))}, []float64{7})
		}, "not one of the model's classes"},
		{"other folds", func() error {
			other, _ := m.NewFoldAccumulator(5)
			return acc.Merge(other)
		}, "statistics of 5 folds cannot merge into statistics of 4 folds"},
		{"one fold", func() error { return acc.Merge(m.NewAccumulator()) }, "of 1 folds cannot merge"},
	} {
		if err := tc.add(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
	if acc.Rows() != 120 {
		t.Errorf("%v rows after refused additions, want 120", acc.Rows())
	}
	for _, k := range []int{0, -1, MaxFolds + 1} {
		if _, err := m.NewFoldAccumulator(k); err == nil {
			t.Errorf("%d folds accepted", k)
		}
	}
}

// Fold statistics merged from four replicas, each holding a quarter of
// the rows, are the fold statistics of one pass, bit for bit in the
// default build, and decay alike.
func TestMergedFoldsEqualOnePass(t *testing.T) {
	m, views := trainedToy(t)
	labels := toyLabels()
	ids := seqIDs(500, 620)
	one, _ := m.NewFoldAccumulator(5)
	if err := one.AddFolds(ids, views, labels); err != nil {
		t.Fatal(err)
	}
	merged, _ := copyOf(t, m).NewFoldAccumulator(5)
	for r := range 4 {
		if err := merged.Merge(replicaFoldDelta(t, m, merged.m, ids, views, labels, r*30, (r+1)*30)); err != nil {
			t.Fatal(err)
		}
	}
	one.Decay(0.5)
	merged.Decay(0.5)
	for f := range 5 {
		if diff := statsDiffer(merged.folds[f], one.folds[f]); diff != "" && exactBLAS {
			t.Errorf("fold %d: %s", f, diff)
		}
	}
	if diff := statsDiffer(merged.Stats(), one.Stats()); diff != "" && exactBLAS {
		t.Errorf("all folds: %s", diff)
	}
	if merged.Rows() != 60 {
		t.Errorf("%v rows, want 60", merged.Rows())
	}
}

// Statistics of five folds read back on a copy of their model are the
// folds written, bit for bit, encode to the same bytes, and refit to the
// same model; one fold is still written in format 2; damaged fold counts
// are refused.
func TestFoldAccumulatorRoundTrip(t *testing.T) {
	m, acc, _, _ := foldToy(t)
	data, err := acc.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if v := binary.LittleEndian.Uint32(data[8:]); v != StatsFormatFolds {
		t.Errorf("format %d, want %d", v, StatsFormatFolds)
	}
	one, err := m.NewAccumulator().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if want := len(one) + 4 + 4*8*statsValues(acc.folds[0].Dim(), acc.folds[0].Outputs(), StatsFormatVersion); len(data) != want {
		t.Errorf("%d bytes for 5 folds, want %d", len(data), want)
	}
	back, err := UnmarshalAccumulator(data, copyOf(t, m))
	if err != nil {
		t.Fatal(err)
	}
	if back.Folds() != 5 || back.Rows() != acc.Rows() {
		t.Fatalf("%d folds of %v rows, want 5 of %v", back.Folds(), back.Rows(), acc.Rows())
	}
	for f := range 5 {
		if diff := statsDiffer(back.folds[f], acc.folds[f]); diff != "" {
			t.Errorf("fold %d: %s", f, diff)
		}
	}
	again, err := back.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, data) {
		t.Error("fold statistics read back encode to other bytes")
	}
	a, err := acc.RefitCold(context.Background(), m.Config.Fit)
	if err != nil {
		t.Fatal(err)
	}
	b, err := back.RefitCold(context.Background(), m.Config.Fit)
	if err != nil {
		t.Fatal(err)
	}
	if a.Version != b.Version {
		t.Errorf("refit of the folds read back is version %s, of the original %s", b.Version, a.Version)
	}
	if c := acc.Clone(); c.Folds() != 5 || statsDiffer(c.Stats(), acc.Stats()) != "" {
		t.Error("a clone's folds differ")
	}

	// One fold is today's accumulator, bytes and all.
	views, labels := toyViews(7, 120)
	plain, single := m.NewAccumulator(), must(m.NewFoldAccumulator(1))
	if err := plain.Add(views, labels); err != nil {
		t.Fatal(err)
	}
	if err := single.AddFolds(seqIDs(0, 120), views, labels); err != nil {
		t.Fatal(err)
	}
	if p, s := must(plain.MarshalBinary()), must(single.MarshalBinary()); !bytes.Equal(p, s) || binary.LittleEndian.Uint32(s[8:]) != StatsFormatVersion {
		t.Errorf("one fold written in format %d, %d bytes; the plain accumulator's are %d bytes", binary.LittleEndian.Uint32(s[8:]), len(s), len(p))
	}

	foldsAt := 16 + 16 + 4 + 8 + 4 // magic, version, lineage length, lineage, views, ranks, outputs
	patched := func(folds uint32) []byte {
		out := bytes.Clone(data)
		binary.LittleEndian.PutUint32(out[foldsAt:], folds)
		return resum(out)
	}
	nanFold := bytes.Clone(data)
	// The S[0,0] of fold 2 lies after N of fold 2.
	at := foldsAt + 4 + 2*8*statsValues(acc.folds[0].Dim(), acc.folds[0].Outputs(), StatsFormatVersion) + 8
	binary.LittleEndian.PutUint64(nanFold[at:], 0x7ff8000000000001)
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"one fold in format 3", patched(1), "1 folds, format 3 holds 2 to 100"},
		{"too many folds", patched(MaxFolds + 1), "101 folds"},
		{"fewer folds than the values", patched(4), "bytes of values, the shape needs"},
		{"NaN in a fold", resum(nanFold), "fold 2: S[0,0] is NaN"},
	} {
		if _, err := UnmarshalAccumulator(tc.data, m); !errors.Is(err, ErrCorruptStats) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want ErrCorruptStats with %q", tc.name, err, tc.want)
		}
	}
}

// replicaFoldDelta is the delta of rows [lo, hi) as a replica on its own
// copy of m publishes it (five fold sums, encoded), read back on on.
func replicaFoldDelta(t *testing.T, m, on *Model, ids []int64, views []*mat.Dense, labels []float64, lo, hi int) *Accumulator {
	t.Helper()
	replica, _ := copyOf(t, m).NewFoldAccumulator(5)
	v, l := rowsOf(views, labels, lo, hi)
	if err := replica.AddFolds(ids[lo:hi], v, l); err != nil {
		t.Fatal(err)
	}
	return viaBytes(t, replica, on)
}

// viaBytes is acc encoded and read back on the model on, as a delta
// travels from a replica to the refitter.
func viaBytes(t *testing.T, acc *Accumulator, on *Model) *Accumulator {
	t.Helper()
	data, err := acc.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	back, err := UnmarshalAccumulator(data, on)
	if err != nil {
		t.Fatal(err)
	}
	return back
}

// Deltas of five folds merged into an accumulator of one fold give the
// sums one pass keeping one sum gives, as deltas of one fold do: a
// refitter keeping one sum can take deltas of any number of folds.
func TestFoldDeltasMergeIntoOneSum(t *testing.T) {
	m, views := trainedToy(t)
	labels := toyLabels()
	ids := seqIDs(500, 620)
	one := m.NewAccumulator()
	if err := one.Add(views, labels); err != nil {
		t.Fatal(err)
	}
	merged := copyOf(t, m).NewAccumulator()
	for r := range 4 {
		back := replicaFoldDelta(t, m, merged.m, ids, views, labels, r*30, (r+1)*30)
		if err := merged.Merge(back); err != nil {
			t.Fatal(err)
		}
		if back.Folds() != 5 || back.Rows() != 30 {
			t.Errorf("replica %d: merging changed the delta merged", r)
		}
	}
	if diff := statsDiffer(merged.Stats(), one.Stats()); diff != "" && exactBLAS {
		t.Errorf("five-fold deltas merged as one sum against one pass: %s", diff)
	}
	if merged.Rows() != 120 {
		t.Errorf("%v rows, want 120", merged.Rows())
	}
}
