package serve

import (
	"container/heap"
	"time"

	"github.com/mvml/mvml/ingest"
)

// joinEntryOverhead is what an entry of the join store costs beyond the
// projected features of a record: the entry itself, its map slot and its
// place in the heap (measured by TestJoinStoreBytes), so that
// --label-cache-bytes bounds the memory the store really holds.
const joinEntryOverhead = 320

// Why a label found no record (mvml_labels_unmatched_total{reason}).
const (
	// unmatchedExpired: its record was scored, but longer ago than the
	// label window.
	unmatchedExpired = "expired"
	// unmatchedEvicted: its record, or the label waiting for it, was
	// pushed out of the store by newer entries (--label-cache-bytes).
	unmatchedEvicted = "evicted"
	// unmatchedNeverSeen: the label waited a whole window and no record of
	// its id came.
	unmatchedNeverSeen = "never_seen"
	// unmatchedDuplicate: its record was joined with an earlier label.
	unmatchedDuplicate = "duplicate"
)

// servedModel is the model a record was scored by, as the join keeps it:
// the version whose quality its label measures and the lineage whose
// statistics it may join.
type servedModel struct {
	version, lineage string
}

type joinKind uint8

const (
	// joinRecord is a scored record waiting for its label.
	joinRecord joinKind = iota
	// joinLabel is a label waiting for its record.
	joinLabel
	// joinGone remembers, for a window, why a record left the store, so
	// that its label is counted by the right reason.
	joinGone
)

// joinEntry is one entry of the join store.
type joinEntry struct {
	kind      joinKind
	partition int
	id        int64
	// at is the entry's time: the record's or label's timestamp (never in
	// the future), or when a record left; it leaves the store a window
	// later.
	at    time.Time
	index int // in the heap
	bytes int64

	// A record: its offset in the input topic, projected features,
	// prediction and model.
	offset int64
	u      []float64
	pred   float64
	served *servedModel
	// A label waiting.
	label ingest.Label
	// Why a record is gone: unmatchedExpired, unmatchedEvicted or
	// unmatchedDuplicate.
	reason string
}

// joinPartition is the store of one partition: records, waiting labels
// and gone records by id.
type joinPartition struct {
	records, labels, gone map[int64]*joinEntry
}

func newJoinPartition() *joinPartition {
	return &joinPartition{records: map[int64]*joinEntry{}, labels: map[int64]*joinEntry{}, gone: map[int64]*joinEntry{}}
}

func (p *joinPartition) of(kind joinKind) map[int64]*joinEntry {
	switch kind {
	case joinRecord:
		return p.records
	case joinLabel:
		return p.labels
	}
	return p.gone
}

// joinStore joins the records a replica scored with the labels that
// arrive apart from them, per partition of the input and labels topics
// (co-partitioned, keyed by id): a scored record waits for its label, or
// a label for its record, at most a window (by their timestamps) and
// within a budget of bytes for all partitions together, the oldest entry
// leaving first. It is a data structure, not safe for concurrent use.
type joinStore struct {
	window time.Duration
	budget int64
	used   int64
	parts  map[int]*joinPartition
	// byAge orders every entry by time, the oldest first.
	byAge joinHeap
	// evictedRecords counts the records pushed out unjoined.
	evictedRecords int64
}

func newJoinStore(window time.Duration, budget int64) *joinStore {
	return &joinStore{window: window, budget: budget, parts: map[int]*joinPartition{}}
}

// joined is a label and the record it labels.
type joined struct {
	record *joinEntry
	label  ingest.Label
}

// unmatched is a label used up without a record, and why.
type unmatched struct {
	label  ingest.Label
	reason string
}

// joinOutcome is what a change of the store did to the labels.
type joinOutcome struct {
	joined    []joined
	unmatched []unmatched
}

func (o *joinOutcome) merge(x joinOutcome) {
	o.joined = append(o.joined, x.joined...)
	o.unmatched = append(o.unmatched, x.unmatched...)
}

func (s *joinStore) partition(p int) *joinPartition {
	jp := s.parts[p]
	if jp == nil {
		jp = newJoinPartition()
		s.parts[p] = jp
	}
	return jp
}

// clamp is the time of an entry stamped t, seen at now: a timestamp in the
// future (a producer's clock) counts as now, and so does none.
func clamp(t, now time.Time) time.Time {
	if t.IsZero() || t.After(now) {
		return now
	}
	return t
}

func (s *joinStore) insert(e *joinEntry) {
	e.bytes = int64(8*len(e.u)) + joinEntryOverhead
	s.partition(e.partition).of(e.kind)[e.id] = e
	heap.Push(&s.byAge, e)
	s.used += e.bytes
}

func (s *joinStore) remove(e *joinEntry) {
	delete(s.parts[e.partition].of(e.kind), e.id)
	heap.Remove(&s.byAge, e.index)
	s.used -= e.bytes
}

// bury replaces a record leaving the store by a note of why it left.
func (s *joinStore) bury(e *joinEntry, reason string, now time.Time) {
	s.remove(e)
	s.note(e.partition, e.id, reason, now)
}

// note notes why the record of id left partition p, for a window from
// now.
func (s *joinStore) note(p int, id int64, reason string, now time.Time) {
	if old := s.parts[p].gone[id]; old != nil {
		s.remove(old)
	}
	s.insert(&joinEntry{kind: joinGone, partition: p, id: id, at: now, reason: reason})
}

// addRecord stores a scored record of partition p, unless the store holds
// one of its id from a later offset (the newer record of an id is the one
// labelled). A label waiting for it is joined with it at once and
// returned, and the record is not kept.
func (s *joinStore) addRecord(p int, rec *joinEntry, now time.Time) joinOutcome {
	jp := s.partition(p)
	rec.kind, rec.partition, rec.at = joinRecord, p, clamp(rec.at, now)
	if l := jp.labels[rec.id]; l != nil {
		s.remove(l)
		s.note(p, rec.id, unmatchedDuplicate, now)
		return joinOutcome{joined: []joined{{record: rec, label: l.label}}}
	}
	if old := jp.records[rec.id]; old != nil {
		if old.offset > rec.offset {
			return joinOutcome{}
		}
		s.remove(old)
	}
	if g := jp.gone[rec.id]; g != nil {
		// Scored again (delivered again, or produced again): it waits anew.
		s.remove(g)
	}
	s.insert(rec)
	return s.fit(now)
}

// addLabel takes a label of partition p: it joins its record if the store
// holds it, is counted unmatched if its record left the store (expired,
// evicted, or joined before), and otherwise waits for its record.
func (s *joinStore) addLabel(p int, l ingest.Label, now time.Time) joinOutcome {
	jp := s.partition(p)
	if rec := jp.records[l.ID]; rec != nil {
		s.bury(rec, unmatchedDuplicate, now)
		return joinOutcome{joined: []joined{{record: rec, label: l}}}
	}
	if g := jp.gone[l.ID]; g != nil {
		return joinOutcome{unmatched: []unmatched{{label: l, reason: g.reason}}}
	}
	var out joinOutcome
	if old := jp.labels[l.ID]; old != nil {
		if old.label.Offset == l.Offset {
			// The same label read again (its offset was not committed).
			return out
		}
		// Two labels wait for one record: the later one stands.
		s.remove(old)
		out.unmatched = append(out.unmatched, unmatched{label: old.label, reason: unmatchedDuplicate})
	}
	s.insert(&joinEntry{kind: joinLabel, partition: p, id: l.ID, at: clamp(l.Time, now), label: l})
	out.merge(s.fit(now))
	return out
}

// forget removes the record of id from partition p, if the store holds
// it: its label was used by a replica before this one.
func (s *joinStore) forget(p int, id int64) {
	if jp := s.parts[p]; jp != nil {
		if rec := jp.records[id]; rec != nil {
			s.remove(rec)
		}
	}
}

// expire removes the entries older than the window at now: a record is
// noted expired, and a label that waited the whole window is unmatched,
// its record never seen.
func (s *joinStore) expire(now time.Time) joinOutcome {
	var out joinOutcome
	for len(s.byAge) > 0 && now.Sub(s.byAge[0].at) > s.window {
		e := s.byAge[0]
		switch e.kind {
		case joinRecord:
			s.bury(e, unmatchedExpired, now)
		case joinLabel:
			s.remove(e)
			out.unmatched = append(out.unmatched, unmatched{label: e.label, reason: unmatchedNeverSeen})
		default:
			s.remove(e)
		}
	}
	return out
}

// fit removes the oldest entries until the store is within its budget: a
// record is noted evicted (the note costs less than the record), and a
// waiting label is unmatched, evicted.
func (s *joinStore) fit(now time.Time) joinOutcome {
	var out joinOutcome
	for s.used > s.budget && len(s.byAge) > 0 {
		e := s.byAge[0]
		switch e.kind {
		case joinRecord:
			s.evictedRecords++
			if e.bytes > joinEntryOverhead {
				s.bury(e, unmatchedEvicted, now)
			} else {
				s.remove(e)
			}
		case joinLabel:
			s.remove(e)
			out.unmatched = append(out.unmatched, unmatched{label: e.label, reason: unmatchedEvicted})
		default:
			s.remove(e)
		}
	}
	return out
}

// giveUpLabels removes the labels of partition p waiting for their record
// from offsets below offset, unmatched, evicted: the committed offset of
// the labels topic may then move past them.
func (s *joinStore) giveUpLabels(p int, offset int64) joinOutcome {
	var out joinOutcome
	jp := s.parts[p]
	if jp == nil {
		return out
	}
	for _, e := range jp.labels {
		if e.label.Offset < offset {
			out.unmatched = append(out.unmatched, unmatched{label: e.label, reason: unmatchedEvicted})
		}
	}
	for _, u := range out.unmatched {
		s.remove(jp.labels[u.label.ID])
	}
	return out
}

// oldestWaiting returns the smallest offset of the labels of partition p
// waiting for their record, if any.
func (s *joinStore) oldestWaiting(p int) (int64, bool) {
	jp := s.parts[p]
	if jp == nil || len(jp.labels) == 0 {
		return 0, false
	}
	oldest := int64(-1)
	for _, l := range jp.labels {
		if oldest < 0 || l.label.Offset < oldest {
			oldest = l.label.Offset
		}
	}
	return oldest, true
}

// drop removes everything of partition p: the partition has another owner
// now, which restores it.
func (s *joinStore) drop(p int) {
	jp := s.parts[p]
	if jp == nil {
		return
	}
	for _, m := range []map[int64]*joinEntry{jp.records, jp.labels, jp.gone} {
		for _, e := range m {
			heap.Remove(&s.byAge, e.index)
			s.used -= e.bytes
		}
	}
	delete(s.parts, p)
}

// counts returns the records and labels waiting.
func (s *joinStore) counts() (records, labels int) {
	for _, jp := range s.parts {
		records += len(jp.records)
		labels += len(jp.labels)
	}
	return records, labels
}

// joinHeap orders entries by time, the oldest first (container/heap).
type joinHeap []*joinEntry

func (h joinHeap) Len() int           { return len(h) }
func (h joinHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h joinHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *joinHeap) Push(x any) {
	e := x.(*joinEntry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *joinHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}
