package ingest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/schemas"
)

// groupConfig is the configuration of a member of group "g" in the group
// tests: quick to notice a rebalance and to end its generation.
func groupConfig(c *kafkatest.Cluster, labels string) KafkaConfig {
	return KafkaConfig{
		Conn: kafkaconn.Config{Brokers: c.Brokers}, Topic: "in", LabelsTopic: labels, GroupID: "g",
		// A rebalance must finish within RebalanceTimeout: on a host busy
		// with other builds, 3s let members drop out of every generation.
		MaxWait: 50 * time.Millisecond, HeartbeatInterval: 100 * time.Millisecond, SessionTimeout: 6 * time.Second,
		RebalanceTimeout: 8 * time.Second,
	}
}

// place is where a message is: its partition and offset.
type place struct {
	partition int
	offset    int64
}

// groupEvent is a call of OnAssign ("assign") or OnRevoke ("revoke").
type groupEvent struct {
	kind string
	a    Assignment
}

// member is a member of a group under test. Its hooks record the
// generations; with auto, goroutines take every batch of records (acking
// it) and of labels (committing it), and record what they got.
type member struct {
	t   *testing.T
	src *KafkaSource

	mu       sync.Mutex
	events   []groupEvent
	assigned map[int32]bool // generations whose OnAssign returned
	records  map[int64]place
	dups     int // records delivered more than once
	labels   map[int64]Label
	rejects  []schemas.RowError
	early    []Label // labels delivered before their generation's OnAssign returned

	stop    context.CancelFunc
	running sync.WaitGroup
}

// startMember starts a member of cfg's group. The hooks wait a little in
// OnAssign, as a restore does, so that a label that does not wait for it
// would show.
func startMember(t *testing.T, cfg KafkaConfig, auto bool) *member {
	t.Helper()
	m := &member{t: t, assigned: map[int32]bool{}, records: map[int64]place{}, labels: map[int64]Label{}}
	cfg.OnAssign = func(ctx context.Context, a Assignment) error {
		m.record(groupEvent{"assign", a})
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
		}
		m.mu.Lock()
		m.assigned[a.Generation] = true
		m.mu.Unlock()
		return nil
	}
	cfg.OnRevoke = func(_ context.Context, a Assignment) { m.record(groupEvent{"revoke", a}) }
	src, err := NewKafka(kafkaSpec(t), cfg, Options{BatchSize: 16, Allocator: checkedAllocator(t)})
	if err != nil {
		t.Fatal(err)
	}
	m.src = src
	ctx, cancel := context.WithCancel(context.Background())
	m.stop = cancel
	t.Cleanup(m.close)
	if !auto {
		return m
	}
	m.running.Go(func() { m.takeRecords(ctx) })
	if cfg.LabelsTopic != "" {
		m.running.Go(func() { m.takeLabels(ctx) })
	}
	return m
}

func (m *member) record(e groupEvent) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events = append(m.events, e)
}

// close stops the member's goroutines and closes its source.
func (m *member) close() {
	m.stop()
	m.running.Wait()
	if err := m.src.Close(); err != nil {
		m.t.Error(err)
	}
}

func (m *member) takeRecords(ctx context.Context) {
	for {
		b, err := m.src.Next(ctx)
		if err != nil {
			if ctx.Err() == nil {
				m.t.Errorf("Next: %v", err)
			}
			return
		}
		ids := schemas.IDs(b.Record)
		m.mu.Lock()
		for i := range len(b.Rows) {
			id := ids.Value(i)
			if _, ok := m.records[id]; ok {
				m.dups++
			}
			m.records[id] = place{int(b.Partitions[i]), b.Rows[i]}
		}
		m.mu.Unlock()
		b.Record.Release()
		if err := b.Ack(ctx); err != nil && ctx.Err() == nil {
			m.t.Errorf("Ack: %v", err)
		}
	}
}

func (m *member) takeLabels(ctx context.Context) {
	for {
		b, err := m.src.NextLabels(ctx)
		if err != nil {
			if ctx.Err() == nil {
				m.t.Errorf("NextLabels: %v", err)
			}
			return
		}
		next := map[int]int64{}
		m.mu.Lock()
		for _, l := range b.Labels {
			if !m.assigned[b.Generation] {
				m.early = append(m.early, l)
			}
			m.labels[l.ID] = l
			next[l.Partition] = max(next[l.Partition], l.Offset+1)
		}
		for _, r := range b.Rejects {
			m.rejects = append(m.rejects, r)
			var p int
			fmt.Sscanf(strings.TrimPrefix(r.Source, b.Topic+"/"), "%d", &p)
			next[p] = max(next[p], r.Row+1)
		}
		m.mu.Unlock()
		if err := m.src.CommitLabels(ctx, b.Generation, next); err != nil && ctx.Err() == nil {
			m.t.Errorf("CommitLabels: %v", err)
		}
	}
}

// lastAssignment is the member's assignment in its latest generation, if
// that generation is under way.
func (m *member) lastAssignment() (Assignment, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.events) == 0 || m.events[len(m.events)-1].kind != "assign" {
		return Assignment{}, false
	}
	return m.events[len(m.events)-1].a, true
}

func (m *member) recordCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.records)
}

// waitFor polls cond for up to 30s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitShared waits until the members are in one generation, sharing the
// partitions of the input topic, and returns their assignments.
func waitShared(t *testing.T, partitions int, members ...*member) []Assignment {
	t.Helper()
	var as []Assignment
	waitFor(t, "the members to share the partitions", func() bool {
		as = as[:0]
		var all []int
		for _, m := range members {
			a, ok := m.lastAssignment()
			if !ok || len(a.Records) == 0 || len(as) > 0 && a.Generation != as[0].Generation {
				return false
			}
			as = append(as, a)
			all = append(all, a.Partitions()...)
		}
		slices.Sort(all)
		return len(slices.Compact(all)) == partitions
	})
	return as
}

// produceRecords writes records of ids [from, from+n) to "in", record id
// to partition id%partitions.
func produceRecords(t *testing.T, c *kafkatest.Cluster, partitions, from, n int) {
	t.Helper()
	msgs := make([]kafkatest.Message, n)
	for i := range msgs {
		id := from + i
		msgs[i] = kafkatest.Message{Partition: id % partitions, Value: kafkaMessage(id)}
	}
	c.Produce(t, "in", msgs...)
}

// A second member takes half of the partitions: the first ends its
// generation (OnRevoke) before both start the next (OnAssign), each owning
// its partitions from the offsets the first committed, so that nothing is
// read twice and nothing is missed.
func TestKafkaGroupRebalance(t *testing.T) {
	const partitions = 4
	c := kafkatest.Start(t, partitions, "in")
	produceRecords(t, c, partitions, 0, 20)
	a := startMember(t, groupConfig(c, ""), true)
	waitFor(t, "the first member to commit the first records", func() bool {
		return slices.Equal(c.CommittedOffsets(t, "g", "in"), []int64{5, 5, 5, 5})
	})
	b := startMember(t, groupConfig(c, ""), true)
	shared := waitShared(t, partitions, a, b)
	for _, as := range shared {
		if len(as.Records) != 2 {
			t.Errorf("member %s owns %v, want 2 of the 4 partitions", as.Member, as.Partitions())
		}
		for p, off := range as.Records {
			if off != 5 {
				t.Errorf("member %s: partition %d starts at committed offset %d, want 5", as.Member, p, off)
			}
		}
	}
	// The first member's generations: each assignment is revoked before
	// the next, with what it assigned; the first had every partition and
	// no committed offset.
	a.mu.Lock()
	events := slices.Clone(a.events)
	a.mu.Unlock()
	if len(events) < 3 || events[0].kind != "assign" || !maps.Equal(events[0].a.Records, map[int]int64{0: -1, 1: -1, 2: -1, 3: -1}) {
		t.Fatalf("first member's events %+v, want its first generation to assign every partition, none committed", events)
	}
	for i, e := range events {
		want := "assign"
		if i%2 == 1 {
			want = "revoke"
		}
		if e.kind != want || i%2 == 1 && e.a.Generation != events[i-1].a.Generation {
			t.Errorf("event %d: %s of generation %d, want a %s (revokes name the generation assigned)", i, e.kind, e.a.Generation, want)
		}
	}

	produceRecords(t, c, partitions, 20, 20)
	waitFor(t, "the new records", func() bool { return a.recordCount()+b.recordCount() == 40 })
	owner := map[int]*member{}
	for _, as := range shared {
		for p := range as.Records {
			owner[p] = b
			if isMember(a, as) {
				owner[p] = a
			}
		}
	}
	for id := int64(20); id < 40; id++ {
		p := int(id % partitions)
		for _, m := range []*member{a, b} {
			m.mu.Lock()
			at, ok := m.records[id]
			m.mu.Unlock()
			if ok != (owner[p] == m) || ok && at != (place{p, id / partitions}) {
				t.Errorf("record %d (partition %d): with member %p: %t at %+v; its partition's owner is %p", id, p, m, ok, at, owner[p])
			}
		}
	}
	if a.dups+b.dups > 0 {
		t.Errorf("%d records delivered twice across a clean rebalance", a.dups+b.dups)
	}
	waitFor(t, "the new records to be committed", func() bool {
		return slices.Equal(c.CommittedOffsets(t, "g", "in"), []int64{10, 10, 10, 10})
	})
}

// isMember says whether as is m's latest assignment.
func isMember(m *member, as Assignment) bool {
	last, ok := m.lastAssignment()
	return ok && last.Member == as.Member
}

// Records and labels of one partition go to the same member, labels only
// after OnAssign returned for their generation; labels decode with their
// place and time, bad ones are rejects located like records', and
// CommitLabels commits the labels topic.
func TestKafkaGroupLabels(t *testing.T) {
	const partitions, n = 4, 40
	c := kafkatest.Start(t, partitions, "in", "labels")
	a := startMember(t, groupConfig(c, "labels"), true)
	b := startMember(t, groupConfig(c, "labels"), true)
	waitShared(t, partitions, a, b)
	for _, m := range []*member{a, b} {
		as, _ := m.lastAssignment()
		if !maps.Equal(as.Records, as.Labels) {
			t.Errorf("member %s owns records %v and labels %v, want the same partitions", as.Member, as.Records, as.Labels)
		}
	}

	start := time.Now().Truncate(time.Millisecond)
	var labels []kafkatest.Message
	bad := map[place]string{}
	offsets := make([]int64, partitions)
	for id := range n {
		p := id % partitions
		value := fmt.Sprintf(`{"id":%d,"label":%d,"note":"reviewed"}`, id, id%3)
		switch id {
		case 5:
			value = fmt.Sprintf(`{"label":null,"id":%d}`, id)
		case 9, 30:
			// A bad label message costs that message, not its batch.
			value = fmt.Sprintf(`{"id":%d}`, id)
			bad[place{p, offsets[p]}] = `label field "label" is missing`
		case 14:
			value = fmt.Sprintf(`{"id":%d,"label":1,"label":2}`, id)
			bad[place{p, offsets[p]}] = `field "label" is given twice`
		}
		labels = append(labels, kafkatest.Message{Partition: p, Value: []byte(value), Time: start.Add(time.Duration(id) * time.Second)})
		offsets[p]++
	}
	// Labels may come before their records.
	c.Produce(t, "labels", labels...)
	produceRecords(t, c, partitions, 0, n)
	waitFor(t, "every record and label", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(a.records)+len(b.records) == n && len(a.labels)+len(b.labels)+len(a.rejects)+len(b.rejects) == n
	})
	for _, m := range []*member{a, b} {
		m.mu.Lock()
		for id, l := range m.labels {
			if _, ok := m.records[id]; !ok {
				t.Errorf("label %d went to a member that did not get its record", id)
			}
			wantValue, wantNull := float64(id%3), false
			if id == 5 {
				wantValue, wantNull = 0, true
			}
			p := int(id % partitions)
			if l.Value != wantValue || l.Null != wantNull || l.Partition != p || !l.Time.Equal(start.Add(time.Duration(id)*time.Second)) {
				t.Errorf("label %d: %+v, want value %v (null %t) from partition %d at %v", id, l, wantValue, wantNull, p, start.Add(time.Duration(id)*time.Second))
			}
		}
		for _, r := range m.rejects {
			var at place
			fmt.Sscanf(r.Source, "labels/%d", &at.partition)
			at.offset = r.Row
			if want, ok := bad[at]; !ok || !strings.Contains(r.Reason, want) || r.Source != partitionSource("labels", at.partition) || len(r.Payload) == 0 {
				t.Errorf("reject %+v, want one of %v", r, bad)
			}
			delete(bad, at)
		}
		if len(m.early) > 0 {
			t.Errorf("labels %+v delivered before OnAssign returned", m.early)
		}
		m.mu.Unlock()
	}
	if len(bad) > 0 {
		t.Errorf("no reject for %v", bad)
	}
	waitFor(t, "the labels to be committed", func() bool {
		return slices.Equal(c.CommittedOffsets(t, "g", "labels"), []int64{10, 10, 10, 10})
	})
}

// The labels topic must be co-partitioned with the input topic: a
// different number of partitions, or no such topic, fails the source with
// a clear error before any record is delivered.
func TestKafkaGroupRefusesTopicsNotCoPartitioned(t *testing.T) {
	for _, tt := range []struct {
		name   string
		labels int32 // partitions of the labels topic; 0: none
		want   string
	}{
		{"fewer partitions", 3, `the input topic "in" has 4 partitions and the labels topic "labels" has 3`},
		{"more partitions", 8, `the input topic "in" has 4 partitions and the labels topic "labels" has 8`},
		{"no labels topic", 0, `the labels topic "labels" does not exist`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := kafkatest.Start(t, 4, "in")
			if tt.labels > 0 {
				if err := c.Fake().CreateTopic("labels", tt.labels, nil); err != nil {
					t.Fatal(err)
				}
			}
			produceRecords(t, c, 4, 0, 8)
			src, err := NewKafka(kafkaSpec(t), groupConfig(c, "labels"), Options{Allocator: checkedAllocator(t)})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err = src.Next(ctx)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "same number of partitions") && tt.labels > 0 {
				t.Fatalf("Next: %v, want an error containing %q", err, tt.want)
			}
			if _, err := src.NextLabels(ctx); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("NextLabels: %v, want the same error", err)
			}
		})
	}
}

// A member closed in the middle of a batch leaves its records uncommitted:
// the member that takes over its partitions reads them again (at least
// once), and the batch's Ack after Close fails.
func TestKafkaGroupCloseMidBatch(t *testing.T) {
	const partitions, n = 4, 40
	c := kafkatest.Start(t, partitions, "in")
	stay := startMember(t, groupConfig(c, ""), true)
	leave := startMember(t, groupConfig(c, ""), false)
	shared := waitShared(t, partitions, stay, leave)
	// Produced once the members share the partitions, so each has some.
	produceRecords(t, c, partitions, 0, n)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	batch, err := leave.src.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer batch.Record.Release()
	if len(batch.Rows) == 0 {
		t.Fatal("empty batch")
	}
	waitFor(t, "the other member to read its partitions", func() bool { return stay.recordCount() == n/2 })
	leave.close()
	if err := batch.Ack(ctx); !errors.Is(err, errSourceClosed) {
		t.Errorf("Ack after Close: %v, want errSourceClosed", err)
	}
	waitFor(t, "the remaining member to read every record", func() bool { return stay.recordCount() == n })
	ids := schemas.IDs(batch.Record)
	stay.mu.Lock()
	for i := range len(batch.Rows) {
		if at, ok := stay.records[ids.Value(i)]; !ok || at != (place{int(batch.Partitions[i]), batch.Rows[i]}) {
			t.Errorf("record %d of the unacked batch: read again at %+v (%t), want %d/%d", ids.Value(i), at, ok, batch.Partitions[i], batch.Rows[i])
		}
	}
	stay.mu.Unlock()
	if last, _ := stay.lastAssignment(); len(last.Records) != partitions || last.Generation == shared[0].Generation {
		t.Errorf("remaining member's assignment %+v, want every partition in a later generation", last)
	}
	waitFor(t, "every record to be committed", func() bool {
		return slices.Equal(c.CommittedOffsets(t, "g", "in"), []int64{10, 10, 10, 10})
	})
}

// A member that stops answering the coordinator (a crashed process) holds
// its partitions until its session times out; then the other member reads
// its uncommitted records again. An Ack the crashed member sends later,
// its generation over, commits nothing and is no error: the records are
// another member's now.
func TestKafkaGroupCrashedMember(t *testing.T) {
	const partitions, n = 4, 40
	c := kafkatest.Start(t, partitions, "in")
	stay := startMember(t, groupConfig(c, ""), true)
	crash := startMember(t, groupConfig(c, ""), false)
	shared := waitShared(t, partitions, stay, crash)
	// Produced once the members share the partitions, so each has some.
	produceRecords(t, c, partitions, 0, n)
	alive := shared[0].Member
	if isMember(crash, shared[0]) {
		alive = shared[1].Member
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	batch, err := crash.src.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer batch.Record.Release()
	// From now on the coordinator hears from the surviving member only.
	for _, key := range []kmsg.Key{kmsg.JoinGroup, kmsg.SyncGroup, kmsg.Heartbeat, kmsg.OffsetCommit, kmsg.LeaveGroup} {
		c.Fake().ControlKey(int16(key), func(req kmsg.Request) (kmsg.Response, error, bool) {
			c.Fake().KeepControl()
			if memberOf(req) == alive {
				return nil, nil, false
			}
			return nil, errors.New("crashed"), true
		})
	}
	waitFor(t, "the surviving member to read every record", func() bool { return stay.recordCount() == n })
	if last, _ := stay.lastAssignment(); len(last.Records) != partitions {
		t.Errorf("surviving member's assignment %+v, want every partition", last)
	}
	waitFor(t, "every record to be committed", func() bool {
		return slices.Equal(c.CommittedOffsets(t, "g", "in"), []int64{10, 10, 10, 10})
	})
	waitFor(t, "the crashed member's generation to end", func() bool {
		_, ok := crash.lastAssignment()
		return !ok
	})
	if err := batch.Ack(ctx); err != nil {
		t.Errorf("Ack of a batch whose generation is over: %v, want nil", err)
	}
	if got := c.CommittedOffsets(t, "g", "in"); !slices.Equal(got, []int64{10, 10, 10, 10}) {
		t.Errorf("committed %v after the crashed member's Ack, want [10 10 10 10]", got)
	}
}

// memberOf is the member id a group request carries.
func memberOf(req kmsg.Request) string {
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		return r.MemberID
	case *kmsg.SyncGroupRequest:
		return r.MemberID
	case *kmsg.HeartbeatRequest:
		return r.MemberID
	case *kmsg.OffsetCommitRequest:
		return r.MemberID
	case *kmsg.LeaveGroupRequest:
		if len(r.Members) > 0 {
			return r.Members[0].MemberID
		}
		return r.MemberID
	}
	return ""
}

// Without a labels topic there are no labels; offsets of labels are
// committed only for partitions the member was assigned, and not at all
// once the source is closed.
func TestKafkaLabelsMisuse(t *testing.T) {
	c := kafkatest.Start(t, 2, "in", "labels")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	plain := startMember(t, groupConfig(c, ""), false)
	if _, err := plain.src.NextLabels(ctx); !errors.Is(err, errNoLabelsTopic) {
		t.Errorf("NextLabels without a labels topic: %v", err)
	}
	if err := plain.src.CommitLabels(ctx, 1, map[int]int64{0: 1}); !errors.Is(err, errNoLabelsTopic) {
		t.Errorf("CommitLabels without a labels topic: %v", err)
	}
	plain.close()

	cfg := groupConfig(c, "labels")
	cfg.GroupID = "other"
	m := startMember(t, cfg, false)
	var a Assignment
	waitFor(t, "an assignment", func() bool {
		var ok bool
		a, ok = m.lastAssignment()
		return ok
	})
	for _, tt := range []struct {
		offsets map[int]int64
		want    string
	}{
		{map[int]int64{2: 1}, "partition 2 is not assigned to this member"},
		{map[int]int64{0: -3}, "offset -3 is negative"},
	} {
		if err := m.src.CommitLabels(ctx, a.Generation, tt.offsets); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("CommitLabels(%v): %v, want %q", tt.offsets, err, tt.want)
		}
	}
	// An earlier generation's offsets are not committed, and that is no error.
	if err := m.src.CommitLabels(ctx, a.Generation-1, map[int]int64{0: 1}); err != nil {
		t.Errorf("CommitLabels of an ended generation: %v", err)
	}
	if err := m.src.CommitLabels(ctx, a.Generation, map[int]int64{0: 0, 1: 0}); err != nil {
		t.Errorf("CommitLabels: %v", err)
	}
	if got := c.CommittedOffsets(t, "other", "labels"); !slices.Equal(got, []int64{0, 0}) {
		t.Errorf("committed %v, want [0 0]", got)
	}
	m.close()
	if err := m.src.CommitLabels(ctx, a.Generation, map[int]int64{0: 1}); !errors.Is(err, errSourceClosed) {
		t.Errorf("CommitLabels after Close: %v, want errSourceClosed", err)
	}
	if _, err := m.src.NextLabels(ctx); !errors.Is(err, io.EOF) {
		t.Errorf("NextLabels after Close: %v, want io.EOF", err)
	}
}

func TestKafkaDecodeLabels(t *testing.T) {
	d := newLabelDecoder(kafkaSpec(t))
	tests := []struct {
		msg    string
		want   Label // ID, Value and Null
		reason string
	}{
		{`{"id":7,"label":1.5}`, Label{ID: 7, Value: 1.5}, ""},
		{` {"label" : -2 , "id" : -7, "extra": [1, {"a": null}]} `, Label{ID: -7, Value: -2}, ""},
		{`{"id":8,"label":null}`, Label{ID: 8, Null: true}, ""},
		{`{"\u0069d":9,"label":0}`, Label{ID: 9}, ""},
		{`{"id":1}`, Label{}, `label field "label" is missing`},
		{`{"label":1}`, Label{}, `id field "id" is missing`},
		{`{"id":1,"label":"1"}`, Label{}, "label is a string, want a number or null"},
		{`{"id":1.5,"label":1}`, Label{}, `id "1.5" is not an integer`},
		{`{"id":1,"label":1e999}`, Label{}, "overflows float64"},
		{`{"id":1,"label":1,"id":2}`, Label{}, `field "id" is given twice`},
		{`{"id":1,"label":null,"label":1}`, Label{}, `field "label" is given twice`},
		{`[1,2]`, Label{}, "message is an array, want a JSON object"},
		{``, Label{}, "message is empty"},
		{`{"id":1,"label":1`, Label{}, "invalid JSON"},
	}
	for _, tt := range tests {
		b := decodeLabels(d, "labels", []kafkaconn.Message{{Partition: 3, Offset: 11, Value: []byte(tt.msg)}})
		if tt.reason != "" {
			if len(b.Rejects) != 1 || !strings.Contains(b.Rejects[0].Reason, tt.reason) || b.Rejects[0].Source != "labels/3" || b.Rejects[0].Row != 11 {
				t.Errorf("%s: rejects %+v, want labels/3 row 11: %q", tt.msg, b.Rejects, tt.reason)
			}
			continue
		}
		if len(b.Labels) != 1 || len(b.Rejects) != 0 {
			t.Errorf("%s: %+v", tt.msg, b)
			continue
		}
		got := b.Labels[0]
		if got.ID != tt.want.ID || got.Value != tt.want.Value || got.Null != tt.want.Null || got.Partition != 3 || got.Offset != 11 {
			t.Errorf("%s: %+v, want %+v at 3/11", tt.msg, got, tt.want)
		}
	}
}

// OnRevoke runs before the member rejoins, so labels it commits there, in
// the generation that ends, are where the partition's next owner starts:
// what a replica publishes and commits on a rebalance is not read twice.
func TestKafkaGroupCommitLabelsOnRevoke(t *testing.T) {
	const partitions, n = 2, 20
	c := kafkatest.Start(t, partitions, "in", "labels")
	var labels []kafkatest.Message
	for id := range n {
		labels = append(labels, kafkatest.Message{Partition: id % partitions, Value: fmt.Appendf(nil, `{"id":%d,"label":1}`, id)})
	}
	c.Produce(t, "labels", labels...)

	var mu sync.Mutex
	read := map[int32]map[int]int64{} // by generation, the next offset of each partition read
	count := 0
	var first *KafkaSource
	cfg := groupConfig(c, "labels")
	cfg.OnRevoke = func(ctx context.Context, a Assignment) {
		mu.Lock()
		offsets := maps.Clone(read[a.Generation])
		mu.Unlock()
		if err := first.CommitLabels(ctx, a.Generation, offsets); err != nil {
			t.Errorf("CommitLabels in OnRevoke: %v", err)
		}
	}
	first, err := NewKafka(kafkaSpec(t), cfg, Options{Allocator: checkedAllocator(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var reading sync.WaitGroup
	reading.Go(func() {
		for {
			b, err := first.NextLabels(ctx)
			if err != nil {
				return
			}
			mu.Lock()
			if read[b.Generation] == nil {
				read[b.Generation] = map[int]int64{}
			}
			for _, l := range b.Labels {
				read[b.Generation][l.Partition] = max(read[b.Generation][l.Partition], l.Offset+1)
			}
			count += len(b.Labels)
			mu.Unlock()
		}
	})
	waitFor(t, "the labels", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return count == n
	})
	if got := c.CommittedOffsets(t, "g", "labels"); !slices.Equal(got, []int64{-1, -1}) {
		t.Fatalf("committed %v before any rebalance, want none", got)
	}

	second := startMember(t, groupConfig(c, "labels"), false)
	var took Assignment
	waitFor(t, "the second member's partition", func() bool {
		var ok bool
		took, ok = second.lastAssignment()
		return ok && len(took.Labels) == 1
	})
	for p, off := range took.Labels {
		if off != n/partitions {
			t.Errorf("the second member starts labels partition %d at committed offset %d, want %d", p, off, n/partitions)
		}
	}
	cancel()
	reading.Wait()
	// Closing ends the generation too: OnRevoke commits the rest.
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if got := c.CommittedOffsets(t, "g", "labels"); !slices.Equal(got, []int64{n / partitions, n / partitions}) {
		t.Errorf("committed %v, want every label", got)
	}
}

// The offset below which every label was handled, committed with a labels
// offset, is given to the partition's next owner, a member of another
// source (a replica restarted elsewhere): it knows which messages it
// reads again were handled already. A commit of the same offset with a
// mark further on is committed too.
func TestKafkaLabelsHandledSurviveMembers(t *testing.T) {
	c := kafkatest.Start(t, 2, "in", "labels")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first := startMember(t, groupConfig(c, "labels"), false)
	var a Assignment
	waitFor(t, "an assignment", func() bool {
		var ok bool
		a, ok = first.lastAssignment()
		return ok
	})
	if len(a.LabelsHandled) != 0 {
		t.Errorf("labels handled %v before any commit, want none", a.LabelsHandled)
	}
	for _, handled := range []int64{10, 12} {
		if err := first.src.CommitLabelsHandled(ctx, a.Generation, map[int]int64{0: 3, 1: 0}, map[int]int64{0: handled, 1: 0}); err != nil {
			t.Fatal(err)
		}
	}
	first.close()
	if got := c.CommittedOffsets(t, "g", "labels"); !slices.Equal(got, []int64{3, 0}) {
		t.Errorf("committed %v, want [3 0]", got)
	}
	second := startMember(t, groupConfig(c, "labels"), false)
	var b Assignment
	waitFor(t, "the next assignment", func() bool {
		var ok bool
		b, ok = second.lastAssignment()
		return ok
	})
	if !maps.Equal(b.Labels, map[int]int64{0: 3, 1: 0}) || !maps.Equal(b.LabelsHandled, map[int]int64{0: 12}) {
		t.Errorf("the next owner starts at %v with labels handled %v, want [0:3 1:0] and [0:12]", b.Labels, b.LabelsHandled)
	}
}

// A join the coordinator refuses (here: it is not the coordinator, as
// while the group's coordinator moves) is tried again after
// KafkaConfig.JoinGroupBackoff, not after kafka-go's 5s.
func TestKafkaJoinGroupBackoff(t *testing.T) {
	for _, tc := range []struct {
		name    string
		backoff time.Duration
		within  time.Duration
	}{
		{"short", 200 * time.Millisecond, 3 * time.Second},
		{"default", 0, time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := kafkatest.Start(t, 1, "in")
			var mu sync.Mutex
			var refused []time.Time
			c.Fake().ControlKey(int16(kmsg.JoinGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
				c.Fake().KeepControl()
				mu.Lock()
				defer mu.Unlock()
				if len(refused) > 0 {
					return nil, nil, false
				}
				refused = append(refused, time.Now())
				resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
				resp.ErrorCode = kerr.NotCoordinator.Code
				return resp, nil, true
			})
			produceRecords(t, c, 1, 0, 1)
			cfg := groupConfig(c, "")
			cfg.JoinGroupBackoff = tc.backoff
			src, err := NewKafka(kafkaSpec(t), cfg, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			b, err := src.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			b.Record.Release()
			mu.Lock()
			defer mu.Unlock()
			if len(refused) != 1 {
				t.Fatalf("%d joins refused, want 1", len(refused))
			}
			waited := time.Since(refused[0])
			want := cmp.Or(tc.backoff, DefaultKafkaJoinGroupBackoff)
			if waited < want || waited > want+tc.within {
				t.Errorf("first record %v after the refused join, want between %v and %v", waited, want, want+tc.within)
			}
		})
	}
}
