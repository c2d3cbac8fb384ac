package statsbus

import (
	"fmt"
	"slices"
)

// The bounds of a Ledger, so that a refitter that runs for months keeps a
// checkpoint of bounded size.
const (
	// MaxLedgerRuns is the most runs of label offsets a Ledger keeps per
	// partition. Beyond it the gaps between the oldest runs are filled:
	// a label of such a gap (one that waited longer than thousands of
	// later gaps) would be refused as merged before.
	MaxLedgerRuns = 4096
	// MaxLedgerEpochs is the most replica epochs (process starts) a Ledger
	// remembers the deltas of; the epochs seen least recently are
	// forgotten first. A repeat of a forgotten epoch's delta is still
	// refused by its label offsets.
	MaxLedgerEpochs = 1024
)

// Ledger is what a refitter has merged of one lineage: every delta (by
// ID) and every label offset, so that a delta delivered twice (a
// producer's retry) is dropped and one whose labels were merged before is
// refused. It travels in the refitter's checkpoint. The zero value is
// empty.
type Ledger struct {
	// Merged are the label offsets of the deltas merged.
	Merged Ranges `json:"merged"`
	// Seen are the sequence numbers merged per replica and epoch, the
	// epoch seen last at the end.
	Seen []Seen `json:"seen"`
}

// Seen are the sequence numbers of the deltas of one replica's epoch that
// were merged, as runs.
type Seen struct {
	Replica string `json:"replica"`
	Epoch   string `json:"epoch"`
	Seqs    Runs   `json:"seqs"`
}

// Verdict is what a refitter does with a delta.
type Verdict int

const (
	// Merge: the delta and its labels are new.
	Merge Verdict = iota
	// Repeat: the delta (its replica, epoch and sequence number) was
	// merged before; drop it.
	Repeat
	// Overlap: the delta is new but some of its labels were merged
	// before, in another delta; refuse it.
	Overlap
)

func (v Verdict) String() string {
	switch v {
	case Merge:
		return "merge"
	case Repeat:
		return "repeat"
	case Overlap:
		return "overlap"
	}
	return "unknown verdict"
}

// Judge says what to do with the delta of header h and, for an Overlap,
// which labels were merged before.
func (l *Ledger) Judge(h *Header) (Verdict, Range) {
	if i := l.find(h.Replica, h.Epoch); i >= 0 && l.Seen[i].Seqs.Contains(int64(h.Seq)) {
		return Repeat, Range{}
	}
	if r, ok := l.Merged.Overlap(h.Ranges); ok {
		return Overlap, r
	}
	return Merge, Range{}
}

// Add records the delta of header h as merged.
func (l *Ledger) Add(h *Header) {
	i := l.find(h.Replica, h.Epoch)
	s := Seen{Replica: h.Replica, Epoch: h.Epoch}
	if i >= 0 {
		s = l.Seen[i]
		l.Seen = slices.Delete(l.Seen, i, i+1)
	}
	s.Seqs.Add(int64(h.Seq))
	l.Seen = append(l.Seen, s)
	if len(l.Seen) > MaxLedgerEpochs {
		l.Seen = slices.Delete(l.Seen, 0, len(l.Seen)-MaxLedgerEpochs)
	}
	l.Merged.AddAll(h.Ranges)
	for i := range l.Merged {
		l.Merged[i].Runs = l.Merged[i].Runs.bound(MaxLedgerRuns)
	}
}

// find returns the index of the epoch's entry in Seen, or -1.
func (l *Ledger) find(replica, epoch string) int {
	return slices.IndexFunc(l.Seen, func(s Seen) bool { return s.Replica == replica && s.Epoch == epoch })
}

// Clone returns an independent copy.
func (l *Ledger) Clone() Ledger {
	c := Ledger{Merged: make(Ranges, len(l.Merged)), Seen: make([]Seen, len(l.Seen))}
	for i, r := range l.Merged {
		c.Merged[i] = Range{Topic: r.Topic, Partition: r.Partition, Runs: slices.Clone(r.Runs)}
	}
	for i, s := range l.Seen {
		c.Seen[i] = Seen{Replica: s.Replica, Epoch: s.Epoch, Seqs: slices.Clone(s.Seqs)}
	}
	return c
}

// check says why a ledger read from a checkpoint is not one Add makes.
func (l *Ledger) check() error {
	if err := l.Merged.check(); err != nil {
		return err
	}
	for i, s := range l.Seen {
		switch {
		case s.Replica == "" || s.Epoch == "":
			return fmt.Errorf("seen entry %d has no replica or epoch", i)
		case slices.IndexFunc(l.Seen[:i], func(o Seen) bool { return o.Replica == s.Replica && o.Epoch == s.Epoch }) >= 0:
			return fmt.Errorf("replica %s epoch %s seen twice", s.Replica, s.Epoch)
		}
		if err := s.Seqs.check(); err != nil {
			return fmt.Errorf("replica %s epoch %s: sequence numbers: %v", s.Replica, s.Epoch, err)
		}
	}
	return nil
}

// bound fills the gaps between the oldest runs until at most n remain.
func (rs Runs) bound(n int) Runs {
	if len(rs) <= n {
		return rs
	}
	cut := len(rs) - n
	rs[cut].From = rs[0].From
	return slices.Delete(rs, 0, cut)
}
