package statsbus

import (
	"fmt"
	"slices"
	"testing"
)

func header(replica, epoch string, seq uint64, runs ...Run) *Header {
	h := &Header{Replica: replica, Epoch: epoch, Seq: seq}
	for _, r := range runs {
		h.Ranges.add("labels", 0, Runs{r})
	}
	return h
}

// A ledger merges a delta once: its repeat is dropped, another delta
// holding one of its labels is refused with the labels in both.
func TestLedgerJudge(t *testing.T) {
	var l Ledger
	steps := []struct {
		name    string
		h       *Header
		want    Verdict
		overlap Runs
	}{
		{"first", header("a", "e1", 1, Run{0, 10}), Merge, nil},
		{"next of the replica", header("a", "e1", 2, Run{10, 20}), Merge, nil},
		{"another replica", header("b", "f1", 1, Run{30, 40}), Merge, nil},
		{"a producer's retry", header("a", "e1", 2, Run{10, 20}), Repeat, nil},
		{"a repeat, whatever its labels", header("b", "f1", 1), Repeat, nil},
		{"new, with labels merged before", header("a", "e2", 1, Run{15, 25}), Overlap, Runs{{15, 20}}},
		{"new, between merged labels", header("c", "g1", 1, Run{20, 30}), Merge, nil},
		{"no labels (in-record)", header("c", "g1", 2), Merge, nil},
		{"that one again", header("c", "g1", 2), Repeat, nil},
	}
	for _, s := range steps {
		v, r := l.Judge(s.h)
		if v != s.want || !slices.Equal(r.Runs, s.overlap) {
			t.Fatalf("%s: %v %v, want %v %v", s.name, v, r, s.want, s.overlap)
		}
		if v == Merge {
			l.Add(s.h)
		}
	}
	if got := l.Merged.Runs("labels", 0); !slices.Equal(got, Runs{{0, 40}}) {
		t.Errorf("merged %v, want [0,40)", got)
	}
	if err := l.check(); err != nil {
		t.Errorf("a ledger made by Add fails its check: %v", err)
	}
	c := l.Clone()
	c.Add(header("z", "z1", 1, Run{100, 101}))
	if len(l.Seen) != 3 || len(l.Merged.Runs("labels", 0)) != 1 {
		t.Errorf("adding to a clone changed the original: %+v", l)
	}
}

// A ledger stays bounded: the oldest gaps are filled, the epochs seen
// least recently forgotten.
func TestLedgerBounds(t *testing.T) {
	var l Ledger
	for i := range MaxLedgerRuns + 10 {
		l.Add(header("a", "e", uint64(i+1), Run{int64(2 * i), int64(2*i + 1)}))
	}
	runs := l.Merged.Runs("labels", 0)
	if len(runs) != MaxLedgerRuns || runs[0] != (Run{0, 21}) || runs[len(runs)-1] != (Run{2 * (MaxLedgerRuns + 9), 2*(MaxLedgerRuns+9) + 1}) {
		t.Errorf("%d runs from %v to %v", len(runs), runs[0], runs[len(runs)-1])
	}
	if v, _ := l.Judge(header("b", "f", 1, Run{3, 4})); v != Overlap {
		t.Errorf("a label of a filled gap: %v, want overlap", v)
	}
	for i := range MaxLedgerEpochs + 5 {
		l.Add(header("r", fmt.Sprint("epoch", i), 1))
	}
	l.Add(header("r", "epoch6", 2)) // seen again: now the most recent
	if len(l.Seen) != MaxLedgerEpochs || l.Seen[0].Epoch != "epoch5" || l.Seen[len(l.Seen)-1].Epoch != "epoch6" {
		t.Errorf("%d epochs, first %s, last %s", len(l.Seen), l.Seen[0].Epoch, l.Seen[len(l.Seen)-1].Epoch)
	}
	if v, _ := l.Judge(header("r", "epoch6", 1)); v != Repeat {
		t.Errorf("a delta of an epoch seen again: %v, want repeat", v)
	}
	if v, _ := l.Judge(header("r", "epoch4", 1)); v != Merge {
		t.Errorf("a delta of a forgotten epoch without labels: %v, want merge", v)
	}
}
