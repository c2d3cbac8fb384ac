package ingest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/kafkaconn"
)

// rangeBase is the timestamp of message 0 of the range tests.
var rangeBase = time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)

// rangeTime is the timestamp of message id: id seconds after rangeBase,
// except that ids ending in 7 are an hour early and ids ending in 4 an
// hour late, so timestamps do not grow with offsets.
func rangeTime(id int) time.Time {
	switch id % 10 {
	case 7:
		return rangeBase.Add(time.Duration(id)*time.Second - time.Hour)
	case 4:
		return rangeBase.Add(time.Duration(id)*time.Second + time.Hour)
	}
	return rangeBase.Add(time.Duration(id) * time.Second)
}

// produceRange writes messages ids first..first+n-1 to topic, id to
// partition id%partitions at rangeTime(id).
func produceRange(t *testing.T, c *kafkatest.Cluster, topic string, partitions, first, n int) {
	t.Helper()
	msgs := make([]kafkatest.Message, n)
	for i := range msgs {
		id := first + i
		msgs[i] = kafkatest.Message{Partition: id % partitions, Value: kafkaMessage(id), Time: rangeTime(id)}
	}
	c.Produce(t, topic, msgs...)
}

// rangeIDs are the ids of 0..n-1 whose time is in [from, to), in the order
// a KafkaRangeSource reads them: partition by partition, then by id.
func rangeIDs(n, partitions int, from, to time.Time) []int64 {
	cfg := KafkaRangeConfig{From: from, To: to}
	var ids []int64
	for p := range partitions {
		for id := p; id < n; id += partitions {
			if cfg.inRange(rangeTime(id)) {
				ids = append(ids, int64(id))
			}
		}
	}
	return ids
}

func newTestRange(t *testing.T, c *kafkatest.Cluster, cfg KafkaRangeConfig, opts Options) *KafkaRangeSource {
	t.Helper()
	cfg.Conn.Brokers = c.Brokers
	if cfg.MaxWait == 0 {
		cfg.MaxWait = 100 * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	src, err := NewKafkaRange(ctx, kafkaSpec(t), cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	return src
}

// checkedRange is a Source that bounds every Next of a KafkaRangeSource
// by a deadline, checks the batch's Source and Ack, and keeps the batches'
// sizes (records plus rejects).
type checkedRange struct {
	tb    testing.TB
	src   *KafkaRangeSource
	sizes []int
	eof   bool
}

func (c *checkedRange) Next(ctx context.Context) (Batch, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	b, err := c.src.Next(ctx)
	if errors.Is(err, io.EOF) {
		c.eof = true
	}
	if err != nil {
		return b, err
	}
	if c.eof {
		c.tb.Error("a batch after io.EOF")
	}
	if b.Source != c.src.cfg.Topic {
		c.tb.Errorf("batch source %q, want %q", b.Source, c.src.cfg.Topic)
	}
	if b.Ack != nil {
		c.tb.Error("batch has an Ack")
	}
	c.sizes = append(c.sizes, len(b.Rows)+len(b.Rejects))
	return b, nil
}

func (c *checkedRange) Close() error { return c.src.Close() }

// readRange drains src and returns its rows and batch sizes; a second
// Next after io.EOF must give io.EOF again.
func readRange(t *testing.T, src *KafkaRangeSource) (readResult, []int) {
	t.Helper()
	cr := &checkedRange{tb: t, src: src}
	res, err := readAll(t, cr, 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cr.Next(context.Background()); !errors.Is(err, io.EOF) {
		t.Errorf("Next after io.EOF: %v", err)
	}
	return res, cr.sizes
}

// checkRangeRows checks that res holds exactly the messages ids, in this
// order, each at its offset id/partitions with its timestamp rangeTime(id).
func checkRangeRows(t *testing.T, res readResult, ids []int64, partitions int) {
	t.Helper()
	if len(res.rejects) > 0 {
		t.Fatalf("rejects: %v", res.rejects)
	}
	checkKafkaRows(t, res, ids)
	for i, id := range ids {
		if want := id / int64(partitions); res.rows[i] != want {
			t.Errorf("id %d: offset %d, want %d", id, res.rows[i], want)
		}
		if want := int32(id % int64(partitions)); res.partitions[i] != want {
			t.Errorf("id %d: partition %d, want %d", id, res.partitions[i], want)
		}
		if want := rangeTime(int(id)); !res.times[i].Equal(want) {
			t.Errorf("id %d: timestamp %v, want %v", id, res.times[i], want)
		}
	}
}

func TestKafkaRangeSelectsByTime(t *testing.T) {
	const n, partitions = 90, 3
	c := kafkatest.Start(t, partitions, "events")
	produceRange(t, c, "events", partitions, 0, n)
	at := func(d time.Duration) time.Time { return rangeBase.Add(d) }
	tests := []struct {
		name     string
		from, to time.Time
		// noOffsets: the range is known to be empty when it is opened.
		noOffsets bool
	}{
		{"everything", time.Time{}, time.Time{}, false},
		{"window", at(20 * time.Second), at(50 * time.Second), false},
		{"from only", at(60 * time.Second), time.Time{}, false},
		{"to only", time.Time{}, at(30 * time.Second), false},
		{"from rounds up to a millisecond", at(30*time.Second + time.Nanosecond), at(40 * time.Second), false},
		{"to excludes its millisecond", at(30 * time.Second), at(40*time.Second + time.Millisecond), false},
		{"early records only", at(-2 * time.Hour), at(-time.Minute), false},
		{"late records only", at(time.Hour), time.Time{}, false},
		{"before the epoch", time.Unix(-3600, 0), at(10 * time.Second), false},
		{"empty: from after every record", at(3 * time.Hour), time.Time{}, true},
		{"empty: to before every record", time.Time{}, at(-2 * time.Hour), false},
		{"empty: from equals to", at(30 * time.Second), at(30 * time.Second), true},
		{"empty: no millisecond between from and to", at(30*time.Second + time.Nanosecond), at(30*time.Second + time.Millisecond), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := newTestRange(t, c, KafkaRangeConfig{Topic: "events", From: tt.from, To: tt.to}, Options{Allocator: checkedAllocator(t), BatchSize: 16})
			want := rangeIDs(n, partitions, tt.from, tt.to)
			res, _ := readRange(t, src)
			checkRangeRows(t, res, want, partitions)
			if tt.noOffsets && len(src.parts) > 0 {
				t.Errorf("empty range has offsets to read: %+v", src.parts)
			}
		})
	}
	// The window skips records out of order, it does not stop at them:
	// in partition 0, id 27 (an hour early) is skipped and id 30 read; in
	// partition 1, id 34 (an hour late) is skipped and id 40 read.
	if got := rangeIDs(n, partitions, at(20*time.Second), at(50*time.Second)); slices.Contains(got, 27) || slices.Contains(got, 34) ||
		!slices.Contains(got, 30) || !slices.Contains(got, 40) {
		t.Errorf("window ids %v", got)
	}
}

func TestKafkaRangeStartOffsets(t *testing.T) {
	const n, partitions = 30, 3
	c := kafkatest.Start(t, partitions, "starts")
	produceRange(t, c, "starts", partitions, 0, n)
	// From 12s: the first ids at or after it are 12 (partition 0, offset
	// 4), 4 (1/1, an hour late) and 14 (2/4, an hour late too).
	src := newTestRange(t, c, KafkaRangeConfig{Topic: "starts", From: rangeBase.Add(12 * time.Second)}, Options{Allocator: checkedAllocator(t)})
	want := []kafkaPartitionRange{{0, 4, 10}, {1, 1, 10}, {2, 4, 10}}
	if !slices.Equal(src.parts, want) {
		t.Errorf("ranges %+v, want %+v", src.parts, want)
	}
}

// Ends limits a range to some partitions, each up to an offset: what a
// member restores of the partitions it was assigned, up to the group's
// committed offsets.
func TestKafkaRangeEnds(t *testing.T) {
	const n, partitions = 30, 3
	c := kafkatest.Start(t, partitions, "ends")
	produceRange(t, c, "ends", partitions, 0, n)
	from := rangeBase.Add(12 * time.Second)
	tests := []struct {
		name string
		ends map[int]int64
		want []kafkaPartitionRange
	}{
		{"some partitions, below their ends", map[int]int64{0: 8, 2: 6}, []kafkaPartitionRange{{0, 4, 8}, {2, 4, 6}}},
		{"past a partition's end", map[int]int64{1: 99}, []kafkaPartitionRange{{1, 1, 10}}},
		{"no committed offset", map[int]int64{0: -1, 1: 5}, []kafkaPartitionRange{{1, 1, 5}}},
		{"end before the first record of the window", map[int]int64{0: 3}, nil},
		{"none", map[int]int64{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := newTestRange(t, c, KafkaRangeConfig{Topic: "ends", From: from, Ends: tt.ends}, Options{Allocator: checkedAllocator(t)})
			if !slices.Equal(src.parts, tt.want) {
				t.Fatalf("ranges %+v, want %+v", src.parts, tt.want)
			}
			var ids []int64
			for _, p := range tt.want {
				for off := p.start; off < p.end; off++ {
					if id := off*partitions + int64(p.partition); !rangeTime(int(id)).Before(from) {
						ids = append(ids, id)
					}
				}
			}
			res, _ := readRange(t, src)
			checkRangeRows(t, res, ids, partitions)
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := NewKafkaRange(ctx, kafkaSpec(t), KafkaRangeConfig{Conn: kafkaconn.Config{Brokers: c.Brokers}, Topic: "ends", Ends: map[int]int64{3: 5}}, Options{})
	if err == nil || !strings.Contains(err.Error(), "ends: no partition 3 (the topic has 3)") {
		t.Errorf("a partition the topic lacks: %v", err)
	}
}

func TestKafkaRangeIsFixedWhenOpened(t *testing.T) {
	const partitions = 3
	c := kafkatest.Start(t, partitions, "growing")
	produceRange(t, c, "growing", partitions, 0, 30)
	mem := checkedAllocator(t)
	first := newTestRange(t, c, KafkaRangeConfig{Topic: "growing"}, Options{Allocator: mem, BatchSize: 8})
	second := newTestRange(t, c, KafkaRangeConfig{Topic: "growing"}, Options{Allocator: mem, BatchSize: 8})

	// Produced after opening, with timestamps inside the range: not read.
	produceRange(t, c, "growing", partitions, 30, 15)
	want := rangeIDs(30, partitions, time.Time{}, time.Time{})
	res1, sizes1 := readRange(t, first)
	checkRangeRows(t, res1, want, partitions)

	// Two sources on the same range read the same records in the same
	// batches.
	res2, sizes2 := readRange(t, second)
	checkRangeRows(t, res2, want, partitions)
	if !slices.Equal(sizes1, sizes2) {
		t.Errorf("batch sizes %v then %v", sizes1, sizes2)
	}

	// Reopen reads the offsets of the first opening again, after Close.
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again := first.Reopen()
	t.Cleanup(func() { again.Close() })
	res3, _ := readRange(t, again)
	checkRangeRows(t, res3, want, partitions)

	// A source opened now reads the new messages too.
	now := newTestRange(t, c, KafkaRangeConfig{Topic: "growing"}, Options{Allocator: mem})
	res4, _ := readRange(t, now)
	checkRangeRows(t, res4, rangeIDs(45, partitions, time.Time{}, time.Time{}), partitions)
}

// The opener of a job that reads its input twice (train --stream): the
// second opening reads exactly the offsets the first one resolved, not
// the messages produced in between; an opening that fails fixes nothing.
func TestKafkaRangeOpener(t *testing.T) {
	const partitions = 3
	c := kafkatest.Start(t, partitions, "growing")
	mem := checkedAllocator(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	absent := KafkaRangeOpener(kafkaSpec(t), KafkaRangeConfig{Conn: kafkaconn.Config{Brokers: c.Brokers}, Topic: "absent"})
	if _, err := absent(ctx, Options{Allocator: mem}); err == nil {
		t.Fatal("opened a topic that does not exist")
	}

	produceRange(t, c, "growing", partitions, 0, 30)
	open := KafkaRangeOpener(kafkaSpec(t), KafkaRangeConfig{Conn: kafkaconn.Config{Brokers: c.Brokers}, Topic: "growing", MaxWait: 100 * time.Millisecond})
	want := rangeIDs(30, partitions, time.Time{}, time.Time{})
	for pass := range 2 {
		src, err := open(ctx, Options{Allocator: mem, BatchSize: 8})
		if err != nil {
			t.Fatal(err)
		}
		res, _ := readRange(t, src.(*KafkaRangeSource))
		if err := src.Close(); err != nil {
			t.Fatal(err)
		}
		checkRangeRows(t, res, want, partitions)
		if pass == 0 {
			produceRange(t, c, "growing", partitions, 30, 15)
		}
	}
}

func TestKafkaRangeBatches(t *testing.T) {
	const n, partitions = 30, 3
	c := kafkatest.Start(t, partitions, "batches")
	produceRange(t, c, "batches", partitions, 0, n)
	tests := []struct {
		batch int
		to    time.Time
		want  []int
	}{
		{1, time.Time{}, slices.Repeat([]int{1}, 30)},
		{4, time.Time{}, []int{4, 4, 4, 4, 4, 4, 4, 2}},
		{7, time.Time{}, []int{7, 7, 7, 7, 2}},
		{10, time.Time{}, []int{10, 10, 10}},
		{30, time.Time{}, []int{30}},
		{100, time.Time{}, []int{30}},
		// Skipped messages do not count: 23 are before 24s (ids 0..23 but
		// 4 and 14, which are late, and 27, which is early).
		{8, rangeBase.Add(24 * time.Second), []int{8, 8, 7}},
	}
	for _, tt := range tests {
		src := newTestRange(t, c, KafkaRangeConfig{Topic: "batches", To: tt.to}, Options{Allocator: checkedAllocator(t), BatchSize: tt.batch})
		res, sizes := readRange(t, src)
		if !slices.Equal(sizes, tt.want) {
			t.Errorf("batch size %d to %v: sizes %v, want %v", tt.batch, tt.to, sizes, tt.want)
		}
		checkRangeRows(t, res, rangeIDs(n, partitions, time.Time{}, tt.to), partitions)
	}
}

func TestKafkaRangeDoesNotWaitAtPartitionEnds(t *testing.T) {
	// MaxWait is long so that a loaded machine's slowness cannot pass
	// for the wait this test catches.
	const partitions, maxWait = 4, 10 * time.Second
	c := kafkatest.Start(t, partitions, "ends")
	produceRange(t, c, "ends", partitions, 0, 40)
	src := newTestRange(t, c, KafkaRangeConfig{Topic: "ends", MaxWait: maxWait}, Options{Allocator: checkedAllocator(t), BatchSize: 3})
	// The broker holds a fetch past a partition's end for MaxWait: the
	// source must not wait for it before reading the next partition.
	start := time.Now()
	res, _ := readRange(t, src)
	if took := time.Since(start); took > maxWait/2 {
		t.Errorf("reading %d partitions took %v with MaxWait %v", partitions, took, maxWait)
	}
	checkRangeRows(t, res, rangeIDs(40, partitions, time.Time{}, time.Time{}), partitions)
	start = time.Now()
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > maxWait+time.Second {
		t.Errorf("Close took %v", took)
	}
}

func TestKafkaRangeRejects(t *testing.T) {
	const partitions = 2
	c := kafkatest.Start(t, partitions, "bad")
	// Bad messages on partition 1, each between two good ones on partition
	// 0 and followed by a good one on partition 1: the source goes on.
	var msgs []kafkatest.Message
	var want []int64
	for i, tt := range kafkaBadMessages {
		msgs = append(msgs,
			kafkatest.Message{Partition: 0, Value: kafkaMessage(2 * i)},
			kafkatest.Message{Partition: 1, Value: []byte(tt.msg)},
			kafkatest.Message{Partition: 1, Value: kafkaMessage(2*i + 1)})
		want = append(want, int64(2*i))
	}
	for i := range kafkaBadMessages {
		want = append(want, int64(2*i+1))
	}
	c.Produce(t, "bad", msgs...)
	src := newTestRange(t, c, KafkaRangeConfig{Topic: "bad"}, Options{Allocator: checkedAllocator(t), BatchSize: 16})
	res, sizes := readRange(t, src)

	checkKafkaRows(t, res, want)
	if len(res.rejects) != len(kafkaBadMessages) {
		t.Fatalf("%d rejects, want %d", len(res.rejects), len(kafkaBadMessages))
	}
	wantSizes := slices.Repeat([]int{16}, len(msgs)/16)
	if r := len(msgs) % 16; r > 0 {
		wantSizes = append(wantSizes, r)
	}
	if !slices.Equal(sizes, wantSizes) {
		t.Errorf("batch sizes %v, want %v", sizes, wantSizes)
	}
	for i, tt := range kafkaBadMessages {
		r := res.rejects[i]
		if r.Source != "bad/1" || r.Row != int64(2*i) || r.Column != tt.column || !strings.Contains(r.Reason, tt.reason) {
			t.Errorf("%s: reject %+v, want bad/1 row %d column %q reason containing %q", tt.name, r, 2*i, tt.column, tt.reason)
		}
		if !bytes.Equal(r.Payload, []byte(tt.msg)) {
			t.Errorf("%s: payload %q, want %q", tt.name, r.Payload, tt.msg)
		}
	}
	for i, row := range res.rows {
		want := int64(i) // partition 0: offsets 0, 1, 2...
		if i >= len(kafkaBadMessages) {
			want = int64(2*(i-len(kafkaBadMessages)) + 1) // partition 1: 1, 3, 5...
		}
		if row != want {
			t.Fatalf("record offsets %v", res.rows)
		}
	}
}

func TestKafkaRangeRequireLabel(t *testing.T) {
	c := kafkatest.Start(t, 1, "labels")
	c.ProduceValues(t, "labels", kafkaMessage(2), kafkaMessage(3), kafkaMessage(4))
	src := newTestRange(t, c, KafkaRangeConfig{Topic: "labels"}, Options{Allocator: checkedAllocator(t), RequireLabel: true})
	res, _ := readRange(t, src)
	// Row 3 has a null label.
	checkKafkaRows(t, res, []int64{2, 4})
	if len(res.rejects) != 1 || res.rejects[0].Row != 1 || res.rejects[0].Reason != "label is missing" {
		t.Errorf("rejects %+v, want offset 1: label is missing", res.rejects)
	}
}

func TestKafkaRangeEmptyTopic(t *testing.T) {
	c := kafkatest.Start(t, 3, "empty")
	src := newTestRange(t, c, KafkaRangeConfig{Topic: "empty"}, Options{Allocator: checkedAllocator(t)})
	start := time.Now()
	if _, err := src.Next(context.Background()); !errors.Is(err, io.EOF) {
		t.Fatalf("Next: %v, want io.EOF", err)
	}
	if took := time.Since(start); took > 50*time.Millisecond {
		t.Errorf("Next took %v on an empty range", took)
	}
	if src.reader != nil {
		t.Error("a reader was opened for an empty range")
	}
}

func TestKafkaRangeMissingTopic(t *testing.T) {
	c := kafkatest.Start(t, 1, "present")
	for range 2 { // the first attempt must not have created it
		src, err := NewKafkaRange(context.Background(), kafkaSpec(t), KafkaRangeConfig{Conn: kafkaconn.Config{Brokers: c.Brokers}, Topic: "absent"}, Options{Allocator: checkedAllocator(t)})
		if err == nil {
			src.Close()
			t.Fatal("no error for a missing topic")
		}
		if !errors.Is(err, kafka.UnknownTopicOrPartition) || !strings.Contains(err.Error(), "absent") {
			t.Errorf("error %v, want UnknownTopicOrPartition naming the topic", err)
		}
	}
}

func TestKafkaRangeContext(t *testing.T) {
	const partitions = 2
	c := kafkatest.Start(t, partitions, "slow")
	produceRange(t, c, "slow", partitions, 0, 10)
	mem := checkedAllocator(t)

	t.Run("open", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := NewKafkaRange(ctx, kafkaSpec(t), KafkaRangeConfig{Conn: kafkaconn.Config{Brokers: c.Brokers}, Topic: "slow"}, Options{Allocator: mem}); !errors.Is(err, context.Canceled) {
			t.Errorf("NewKafkaRange on a cancelled context: %v", err)
		}
	})

	before := runtime.NumGoroutine()
	src, err := NewKafkaRange(context.Background(), kafkaSpec(t), KafkaRangeConfig{Conn: kafkaconn.Config{Brokers: c.Brokers}, Topic: "slow", MaxWait: 50 * time.Millisecond},
		Options{Allocator: mem, BatchSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ctx := context.Background()
	b, err := src.Next(ctx) // partition 0: ids 0, 2, 4
	if err != nil {
		t.Fatal(err)
	}
	b.Record.Release()

	// The broker holds every fetch until release is closed.
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	defer unblock()
	c.Fake().ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake().SleepControl(func() { <-release })
		return nil, nil, false
	})
	// Ids 6 and 8 are queued in the reader of partition 0: taken at once.
	// Then partition 1 waits for its first fetch.
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	b, err = src.Next(cctx)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("Next with messages taken: %v", err)
	}
	if !slices.Equal(b.Rows, []int64{3, 4}) {
		t.Errorf("partial batch offsets %v, want [3 4]", b.Rows)
	}
	b.Record.Release()
	if took < 250*time.Millisecond || took > time.Second {
		t.Errorf("Next returned after %v, cancelled at 300ms", took)
	}
	start = time.Now()
	if _, err := src.Next(cctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Next on a cancelled context: %v, want context.Canceled", err)
	}
	if took := time.Since(start); took > 100*time.Millisecond {
		t.Errorf("Next on a cancelled context took %v", took)
	}

	// Released, the source goes on where it stopped.
	unblock()
	res, _ := readRange(t, src)
	checkRangeRows(t, res, rangeIDs(10, partitions, time.Time{}, time.Time{})[5:], partitions)

	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	if err := src.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := src.Next(ctx); !errors.Is(err, io.EOF) {
		t.Errorf("Next after Close: %v, want io.EOF", err)
	}
	expectGoroutinesBack(t, before)
}

func TestKafkaRangeCloseWhileReading(t *testing.T) {
	c := kafkatest.Start(t, 2, "half")
	produceRange(t, c, "half", 2, 0, 20)
	src := newTestRange(t, c, KafkaRangeConfig{Topic: "half"}, Options{Allocator: checkedAllocator(t), BatchSize: 4})
	b, err := src.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b.Record.Release()
	if src.reader == nil {
		t.Fatal("no reader open after the first batch")
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Next(context.Background()); !errors.Is(err, io.EOF) {
		t.Errorf("Next after Close: %v, want io.EOF", err)
	}
}

func TestNewKafkaRangeChecksConfig(t *testing.T) {
	good := KafkaRangeConfig{Conn: kafkaconn.Config{Brokers: []string{"127.0.0.1:1"}}, Topic: "t"}
	tests := []struct {
		name string
		edit func(*KafkaRangeConfig, *Options)
		want string
	}{
		{"no brokers", func(c *KafkaRangeConfig, _ *Options) { c.Conn.Brokers = nil }, "no brokers"},
		{"no topic", func(c *KafkaRangeConfig, _ *Options) { c.Topic = "" }, "no topic"},
		{"negative wait", func(c *KafkaRangeConfig, _ *Options) { c.MaxWait = -time.Second }, "MaxWait"},
		{"negative bytes", func(c *KafkaRangeConfig, _ *Options) { c.MaxBytes = -1 }, "must not be negative"},
		{"min over max", func(c *KafkaRangeConfig, _ *Options) { c.MinBytes, c.MaxBytes = 10, 5 }, "exceeds MaxBytes"},
		{"to before from", func(c *KafkaRangeConfig, _ *Options) { c.From, c.To = rangeBase, rangeBase.Add(-time.Millisecond) }, "ends (To"},
		{"negative batch", func(_ *KafkaRangeConfig, o *Options) { o.BatchSize = -1 }, "batch size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, opts := good, Options{}
			tt.edit(&cfg, &opts)
			src, err := NewKafkaRange(context.Background(), kafkaSpec(t), cfg, opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				if src != nil {
					src.Close()
				}
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
	if _, err := NewKafkaRange(context.Background(), nil, good, Options{}); err == nil {
		t.Error("nil spec accepted")
	}

	c := kafkatest.Start(t, 1, "t")
	cfg := good
	cfg.Conn.Brokers = c.Brokers
	src, err := NewKafkaRange(context.Background(), kafkaSpec(t), cfg, Options{Allocator: checkedAllocator(t)})
	if err != nil {
		t.Fatal(err)
	}
	if src.cfg.MaxWait != DefaultKafkaMaxWait || src.cfg.MinBytes != 1 || src.cfg.MaxBytes != 10<<20 || src.opts.BatchSize != DefaultBatchSize {
		t.Errorf("defaults %+v %+v", src.cfg, src.opts)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
}
