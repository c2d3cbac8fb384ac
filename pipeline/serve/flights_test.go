package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline/internal/pipelinetest"
	"github.com/mvml/mvml/sink"
)

// ackOrder wraps a source so that the acknowledgements of its batches are
// recorded, in the order of the batches (by their first offset).
type ackOrder struct {
	ingest.Source
	mu    sync.Mutex
	acked []int64
}

func (a *ackOrder) Next(ctx context.Context) (ingest.Batch, error) {
	b, err := a.Source.Next(ctx)
	if ack := b.Ack; ack != nil && len(b.Rows) > 0 {
		first := b.Rows[0]
		b.Ack = func(ctx context.Context) error {
			err := ack(ctx)
			if err == nil {
				a.mu.Lock()
				a.acked = append(a.acked, first)
				a.mu.Unlock()
			}
			return err
		}
	}
	return b, err
}

func (a *ackOrder) order() []int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.acked)
}

// flightRun is a service serving topic "in" of a cluster into topic "out"
// with writes in flight.
type flightRun struct {
	svc  *Service
	src  *ackOrder
	out  sink.Sink
	done chan error
	stop context.CancelFunc
	// close closes the source and the sinks (once).
	close func()
}

// startFlights starts a service on topic "in" (a consumer group "g",
// batches of batch rows) scoring into "out" with writes writes in flight,
// and closes its source and sinks when the test ends.
func startFlights(t *testing.T, cluster *kafkatest.Cluster, m *model.Model, batch, writes int, retry kafkaconn.Retry) *flightRun {
	t.Helper()
	conn := kafkaconn.Config{Brokers: cluster.Brokers, Retry: retry}
	src, err := ingest.NewKafka(m.Spec, ingest.KafkaConfig{Conn: conn, Topic: "in", GroupID: "g", MaxWait: 20 * time.Millisecond},
		ingest.Options{BatchSize: batch})
	if err != nil {
		t.Fatal(err)
	}
	out, err := sink.NewKafka(sink.KafkaWriterConfig{Conn: conn, Topic: "out"})
	if err != nil {
		t.Fatal(err)
	}
	dead, err := sink.NewKafkaDeadLetters(sink.KafkaWriterConfig{Conn: conn, Topic: "dead"})
	if err != nil {
		t.Fatal(err)
	}
	acks := &ackOrder{Source: src}
	svc, err := NewService(Config{Model: m, Source: acks, Output: out, DeadLetters: dead, WritesInFlight: writes})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	r := &flightRun{svc: svc, src: acks, out: out, done: make(chan error, 1), stop: cancel, close: sync.OnceFunc(func() {
		cancel()
		src.Close()
		out.Close(context.Background())
		dead.Close(context.Background())
	})}
	go func() { r.done <- svc.Run(ctx) }()
	t.Cleanup(r.close)
	return r
}

// scoredIDs are the ids of the JSON scores of topic "out" by partition, in
// the order of their offsets.
func scoredIDs(t *testing.T, cluster *kafkatest.Cluster) map[int][]int64 {
	t.Helper()
	ids := map[int][]int64{}
	for _, msg := range cluster.ConsumeAll(t, "out") {
		var s struct {
			ID int64 `json:"id"`
		}
		if err := json.Unmarshal(msg.Value, &s); err != nil {
			t.Fatal(err)
		}
		ids[msg.Partition] = append(ids[msg.Partition], s.ID)
	}
	return ids
}

// While the broker holds the first write of scores, the service writes
// no more than WritesInFlight batches and acknowledges none; once it lets
// go, every batch is acknowledged in input order, each partition of the
// output holds its scores in input order, and stopping the service then
// loses nothing. 1 write in flight is today's service: a batch at a time.
func TestServeWritesInFlight(t *testing.T) {
	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 150, 1))
	d := makeData(spec, 200, 4)
	for _, writes := range []int{1, 4} {
		t.Run(fmt.Sprintf("writes=%d", writes), func(t *testing.T) {
			cluster := kafkatest.Start(t, 1, "in", "dead")
			cluster.CreateTopic(t, "out", 3)
			cluster.ProduceValues(t, "in", jsonRecords(t, spec, d)...)
			release := make(chan struct{})
			var held atomic.Bool
			fake := cluster.Fake()
			fake.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
				fake.KeepControl()
				pr := req.(*kmsg.ProduceRequest)
				if pr.Topics[0].Topic == "out" && held.CompareAndSwap(false, true) {
					fake.SleepControl(func() { <-release })
				}
				return nil, nil, false
			})
			r := startFlights(t, cluster, m, 20, writes, kafkaconn.Retry{})
			// Every batch in flight, or waiting for room, has been taken.
			pipelinetest.WaitFor(t, "the batches in flight", func() bool { return r.svc.Stats().In >= int64(20*writes) })
			time.Sleep(100 * time.Millisecond)
			st := r.svc.Stats()
			if st.Batches != 0 || st.Pending > int64(writes) || st.In > int64(20*(writes+1)) {
				t.Errorf("while the first write is held: %d batches acknowledged, %d pending, %d rows taken; want none, at most %d and %d",
					st.Batches, st.Pending, st.In, writes, 20*(writes+1))
			}
			if c := cluster.CommittedOffsets(t, "g", "in")[0]; c > 0 {
				t.Errorf("committed offset %d while the first write is held", c)
			}
			close(release)
			pipelinetest.WaitFor(t, "every record scored", func() bool { return r.svc.Stats().Scored == int64(d.Rows()) })
			r.stop()
			if err := <-r.done; err != nil {
				t.Fatal(err)
			}
			want := make([]int64, 0, d.Rows()/20)
			for k := range d.Rows() / 20 {
				want = append(want, int64(20*k))
			}
			if got := r.src.order(); !slices.Equal(got, want) {
				t.Errorf("batches acknowledged at offsets %v, want %v", got, want)
			}
			if c := cluster.CommittedOffsets(t, "g", "in")[0]; c != int64(d.Rows()) {
				t.Errorf("committed offset %d, want %d", c, d.Rows())
			}
			position := map[int64]int{}
			for i, id := range d.IDs {
				position[id] = i
			}
			n := 0
			for p, ids := range scoredIDs(t, cluster) {
				n += len(ids)
				for i := 1; i < len(ids); i++ {
					if position[ids[i]] <= position[ids[i-1]] {
						t.Errorf("partition %d: id %d after id %d", p, ids[i], ids[i-1])
					}
				}
			}
			if n != d.Rows() {
				t.Errorf("%d scores written, want %d", n, d.Rows())
			}
		})
	}
	noGoroutinesIn(t, "sink.(*kafkaWriter).fly")
}

// The output refusing produce requests for a while (a leader election)
// while several writes are in flight costs no score: every record is
// scored once, and committed.
func TestServeWritesInFlightRideOutTransientFailure(t *testing.T) {
	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 150, 1))
	d := makeData(spec, 200, 4)
	cluster := kafkatest.Start(t, 1, "in", "dead")
	cluster.CreateTopic(t, "out", 2)
	cluster.ProduceValues(t, "in", jsonRecords(t, spec, d)...)
	var refused atomic.Int32
	cluster.FailProduce("out", 6 /* NOT_LEADER_OR_FOLLOWER */, func(parts []int32) bool {
		return parts[0] == 1 && refused.Add(1) <= 4
	})
	r := startFlights(t, cluster, m, 20, 4, kafkaconn.Retry{MinBackoff: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond})
	pipelinetest.WaitFor(t, "every record scored", func() bool { return r.svc.Stats().Scored == int64(d.Rows()) })
	r.stop()
	if err := <-r.done; err != nil {
		t.Fatal(err)
	}
	if refused.Load() < 4 {
		t.Errorf("%d produce requests refused, want 4", refused.Load())
	}
	seen := map[int64]int{}
	for _, ids := range scoredIDs(t, cluster) {
		for _, id := range ids {
			seen[id]++
		}
	}
	for _, id := range d.IDs {
		if seen[id] != 1 {
			t.Errorf("id %d scored %d times, want once", id, seen[id])
		}
	}
	if c := cluster.CommittedOffsets(t, "g", "in")[0]; c != int64(d.Rows()) {
		t.Errorf("committed offset %d, want %d", c, d.Rows())
	}
}

// A service stopped while its writes are held by the broker waits for
// them, within the shutdown grace, and acknowledges every batch whose
// write ended: what it committed was written, and a service started
// after it scores the rest, so every record is scored.
func TestServeStopWithWritesInFlight(t *testing.T) {
	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 150, 1))
	d := makeData(spec, 200, 4)
	cluster := kafkatest.Start(t, 1, "in", "out", "dead")
	cluster.ProduceValues(t, "in", jsonRecords(t, spec, d)...)
	var hold atomic.Bool
	hold.Store(true)
	fake := cluster.Fake()
	fake.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		if req.(*kmsg.ProduceRequest).Topics[0].Topic == "out" && hold.Load() {
			fake.SleepControl(func() { time.Sleep(300 * time.Millisecond) })
		}
		return nil, nil, false
	})
	first := startFlights(t, cluster, m, 20, 4, kafkaconn.Retry{})
	pipelinetest.WaitFor(t, "writes in flight", func() bool { return first.svc.Stats().Pending >= 2 })
	first.stop()
	if err := <-first.done; err != nil {
		t.Fatal(err)
	}
	first.close() // leaves the group
	st := first.svc.Stats()
	committed := cluster.CommittedOffsets(t, "g", "in")[0]
	written := 0
	for _, ids := range scoredIDs(t, cluster) {
		written += len(ids)
	}
	if st.Scored == 0 || committed != st.Scored || st.Pending != 0 || int64(written) < committed {
		t.Errorf("stopped with writes in flight: %+v, committed offset %d, %d scores written; want every batch in flight written and committed",
			st, committed, written)
	}
	hold.Store(false)
	second := startFlights(t, cluster, m, 20, 4, kafkaconn.Retry{})
	pipelinetest.WaitFor(t, "the rest scored", func() bool { return second.svc.Stats().Scored == int64(d.Rows())-committed })
	second.stop()
	if err := <-second.done; err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	for _, ids := range scoredIDs(t, cluster) {
		for _, id := range ids {
			seen[id]++
		}
	}
	for _, id := range d.IDs {
		if seen[id] == 0 {
			t.Errorf("id %d not scored", id)
		}
	}
}
