package serve

import (
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/mvml/mvml/ingest"
)

// joinStep is one change of a join store in TestJoinStore: a record or a
// label of partition 0 with an id, at a time in seconds after t0 (also
// the time of the change), or just the time passing.
type joinStep struct {
	record, label, expire bool
	// again reads the label before it again, at its offset.
	again bool
	id    int64
	at    int
	// want are the labels (by offset) joined and unmatched (reason by
	// offset) by the step.
	joined    []int64
	unmatched map[int64]string
}

func TestJoinStore(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const dim = 4
	// budget holds three records of dim features and the note of one
	// evicted.
	budget := 3*(8*dim+joinEntryOverhead) + joinEntryOverhead
	tests := []struct {
		name  string
		steps []joinStep
		// waiting is what the store holds in the end.
		records, labels int
		oldest          int64 // the oldest waiting label's offset, -1 for none
	}{
		{"label after its record", []joinStep{
			{record: true, id: 1, at: 0},
			{label: true, id: 1, at: 10, joined: []int64{100}},
		}, 0, 0, -1},
		{"record after its label", []joinStep{
			{label: true, id: 1, at: 0},
			{record: true, id: 1, at: 5, joined: []int64{100}},
		}, 0, 0, -1},
		{"a second label of a joined record is a duplicate", []joinStep{
			{record: true, id: 1, at: 0},
			{label: true, id: 1, at: 1, joined: []int64{100}},
			{label: true, id: 1, at: 2, unmatched: map[int64]string{101: unmatchedDuplicate}},
		}, 0, 0, -1},
		{"a label read again waits once", []joinStep{
			{label: true, id: 1, at: 0},
			{label: true, id: 1, at: 1, again: true},
			{record: true, id: 1, at: 2, joined: []int64{100}},
		}, 0, 0, -1},
		{"two labels waiting for one record: the later stands", []joinStep{
			{label: true, id: 1, at: 0},
			{label: true, id: 1, at: 1, unmatched: map[int64]string{100: unmatchedDuplicate}},
			{record: true, id: 1, at: 2, joined: []int64{101}},
		}, 0, 0, -1},
		{"a record older than the window has expired", []joinStep{
			{record: true, id: 1, at: 0},
			{expire: true, at: 61},
			{label: true, id: 1, at: 62, unmatched: map[int64]string{100: unmatchedExpired}},
		}, 0, 0, -1},
		{"a record within the window waits", []joinStep{
			{record: true, id: 1, at: 0},
			{expire: true, at: 60},
			{label: true, id: 1, at: 60, joined: []int64{100}},
		}, 0, 0, -1},
		{"a label waiting a whole window: its record was never seen", []joinStep{
			{label: true, id: 1, at: 0},
			{label: true, id: 2, at: 30},
			{expire: true, at: 61, unmatched: map[int64]string{100: unmatchedNeverSeen}},
		}, 0, 1, 101},
		{"the oldest record is evicted first", []joinStep{
			{record: true, id: 1, at: 0},
			{record: true, id: 2, at: 1},
			{record: true, id: 3, at: 2},
			{record: true, id: 4, at: 3},
			{label: true, id: 1, at: 4, unmatched: map[int64]string{100: unmatchedEvicted}},
			{label: true, id: 2, at: 4, joined: []int64{101}},
		}, 2, 0, -1},
		{"a waiting label is evicted too, oldest first", []joinStep{
			{label: true, id: 7, at: 0},
			{record: true, id: 1, at: 1},
			{record: true, id: 2, at: 2},
			{record: true, id: 3, at: 3},
			{record: true, id: 4, at: 4, unmatched: map[int64]string{100: unmatchedEvicted}},
			{label: true, id: 1, at: 5, unmatched: map[int64]string{101: unmatchedEvicted}},
			{label: true, id: 2, at: 5, joined: []int64{102}},
		}, 2, 0, -1},
		{"a record scored again waits anew", []joinStep{
			{record: true, id: 1, at: 0},
			{label: true, id: 1, at: 1, joined: []int64{100}},
			{record: true, id: 1, at: 2},
			{label: true, id: 1, at: 3, joined: []int64{101}},
		}, 0, 0, -1},
		{"a timestamp in the future counts as now", []joinStep{
			{record: true, id: 1, at: 1000},
			{expire: true, at: 61},
			{label: true, id: 1, at: 62, joined: []int64{100}},
		}, 0, 0, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newJoinStore(time.Minute, int64(budget))
			offset, recOffset := int64(100), int64(0)
			for i, st := range tt.steps {
				at := t0.Add(time.Duration(st.at) * time.Second)
				now := at
				var out joinOutcome
				switch {
				case st.record:
					recOffset++
					now = t0.Add(time.Duration(min(st.at, 2+i)) * time.Second)
					out = s.addRecord(0, &joinEntry{id: st.id, at: at, offset: recOffset, u: make([]float64, dim)}, now)
				case st.label:
					if st.again {
						offset--
					}
					out = s.addLabel(0, ingest.Label{Partition: 0, Offset: offset, ID: st.id, Time: at}, now)
					offset++
				case st.expire:
					out = s.expire(now)
				}
				var joinedOffsets []int64
				for _, j := range out.joined {
					if j.record.id != j.label.ID {
						t.Errorf("step %d: label of id %d joined record %d", i, j.label.ID, j.record.id)
					}
					joinedOffsets = append(joinedOffsets, j.label.Offset)
				}
				got := map[int64]string{}
				for _, u := range out.unmatched {
					got[u.label.Offset] = u.reason
				}
				if !slices.Equal(joinedOffsets, st.joined) || len(got) != len(st.unmatched) {
					t.Fatalf("step %d: joined %v and unmatched %v, want %v and %v", i, joinedOffsets, got, st.joined, st.unmatched)
				}
				for off, reason := range st.unmatched {
					if got[off] != reason {
						t.Fatalf("step %d: unmatched %v, want %v", i, got, st.unmatched)
					}
				}
				if s.used > s.budget {
					t.Fatalf("step %d: %d bytes used of %d", i, s.used, s.budget)
				}
			}
			records, labels := s.counts()
			oldest, ok := s.oldestWaiting(0)
			if !ok {
				oldest = -1
			}
			if records != tt.records || labels != tt.labels || oldest != tt.oldest {
				t.Errorf("the store holds %d records and %d labels, the oldest at %d; want %d, %d, %d",
					records, labels, oldest, tt.records, tt.labels, tt.oldest)
			}
		})
	}
}

// Dropping a partition frees its entries and leaves the others.
func TestJoinStoreDrop(t *testing.T) {
	now := time.Now()
	s := newJoinStore(time.Hour, 1<<20)
	for p := range 3 {
		for id := range int64(5) {
			s.addRecord(p, &joinEntry{id: id, at: now, u: make([]float64, 3)}, now)
		}
		s.addLabel(p, ingest.Label{Partition: p, Offset: 7, ID: 99, Time: now}, now)
	}
	used := s.used
	s.drop(1)
	if records, labels := s.counts(); records != 10 || labels != 2 || s.used != used*2/3 || len(s.byAge) != 12 {
		t.Fatalf("after the drop: %d records, %d labels, %d of %d bytes, %d in the heap", records, labels, s.used, used, len(s.byAge))
	}
	if out := s.addLabel(0, ingest.Label{ID: 3, Time: now}, now); len(out.joined) != 1 {
		t.Errorf("partition 0 lost its records: %+v", out)
	}
	if _, ok := s.oldestWaiting(1); ok {
		t.Error("partition 1 still has a label waiting")
	}
}

// joinEntryOverhead is at least what an entry costs beyond its features,
// so that the budget bounds the memory held.
func TestJoinStoreBytes(t *testing.T) {
	const n, dim = 20_000, 16
	now := time.Now()
	measure := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := measure()
	s := newJoinStore(time.Hour, 1<<40)
	for id := range int64(n) {
		s.addRecord(int(id%4), &joinEntry{id: id, at: now, u: make([]float64, dim), served: &servedModel{}}, now)
	}
	held := int64(measure() - before)
	runtime.KeepAlive(s)
	if s.used < held {
		t.Errorf("the store counts %d bytes and holds %d: %d per entry beyond its features, the overhead counted is %d",
			s.used, held, (held-s.used)/n+joinEntryOverhead, joinEntryOverhead)
	}
	t.Logf("%d records of %d features: %d bytes counted, %d held (%.0f per entry beyond its features)", n, dim, s.used, held, float64(held)/n-8*dim)
}
