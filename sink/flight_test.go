package sink

import (
	"context"
	"encoding/json"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/kafkaconn"
)

// asyncSinks are the sinks that implement AsyncWriter, by name, opened on
// a topic of c, and the ids of the scores they wrote there by partition,
// in the order of their messages.
var asyncSinks = []struct {
	name string
	// open opens the sink on topic of c with cfg's other settings.
	open func(t *testing.T, c *kafkatest.Cluster, topic string, cfg KafkaWriterConfig) AsyncWriter
	ids  func(t *testing.T, msgs []kafka.Message, partitions int) map[int][]int64
}{
	{
		name: "json",
		open: func(t *testing.T, c *kafkatest.Cluster, topic string, cfg KafkaWriterConfig) AsyncWriter {
			cfg.Conn.Brokers, cfg.Topic = c.Brokers, topic
			s, err := NewKafka(cfg)
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		ids: func(t *testing.T, msgs []kafka.Message, _ int) map[int][]int64 {
			ids := map[int][]int64{}
			for _, m := range msgs {
				var row struct {
					ID int64 `json:"id"`
				}
				if err := json.Unmarshal(m.Value, &row); err != nil {
					t.Fatal(err)
				}
				ids[m.Partition] = append(ids[m.Partition], row.ID)
			}
			return ids
		},
	},
	{
		name: "arrow",
		open: func(t *testing.T, c *kafkatest.Cluster, topic string, cfg KafkaWriterConfig) AsyncWriter {
			cfg.Conn.Brokers, cfg.Topic = c.Brokers, topic
			s, err := NewKafkaArrow(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		ids: func(t *testing.T, msgs []kafka.Message, partitions int) map[int][]int64 {
			ids := map[int][]int64{}
			for _, m := range msgs {
				for _, line := range arrowScores(t, []kafka.Message{m}, partitions) {
					var row struct {
						ID int64 `json:"id"`
					}
					if err := json.Unmarshal([]byte(line), &row); err != nil {
						t.Fatal(err)
					}
					ids[m.Partition] = append(ids[m.Partition], row.ID)
				}
			}
			return ids
		},
	},
}

// flightsOf starts the writes of flights records of rows scores each, ids
// from 1000 on, and returns their flights.
func flightsOf(t *testing.T, s AsyncWriter, flights, rows int) []*Flight {
	t.Helper()
	mem := memory.NewGoAllocator()
	var out []*Flight
	for k := range flights {
		rec := outputRecord(mem, k*rows, rows, 2, false)
		f, err := s.WriteAsync(context.Background(), rec)
		rec.Release() // not kept by WriteAsync
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	return out
}

// checkIDs checks that every id of flights × rows scores was written once
// and, when ordered, that each partition holds its ids in increasing
// order: the order of the writes.
func checkIDs(t *testing.T, ids map[int][]int64, flights, rows int, ordered bool) {
	t.Helper()
	seen := map[int64]int{}
	for p, list := range ids {
		for i, id := range list {
			seen[id]++
			if ordered && i > 0 && id <= list[i-1] {
				t.Errorf("partition %d: id %d after id %d", p, id, list[i-1])
			}
		}
	}
	for id := int64(1000); id < int64(1000+flights*rows); id++ {
		if seen[id] != 1 {
			t.Errorf("id %d written %d times, want once", id, seen[id])
		}
	}
}

// noFlightsLeft fails unless every goroutine of a flight has ended.
func noFlightsLeft(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "sink.(*kafkaWriter).fly") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines of flights left running:\n%s", stacks)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Flights end in the order they were started, even when the broker
// answers a later one's partition first; each partition holds the scores
// in the order of the writes; Close waits for the flights under way, and
// their goroutines end.
func TestFlightsInOrder(t *testing.T) {
	for _, tt := range asyncSinks {
		t.Run(tt.name, func(t *testing.T) {
			c := kafkatest.Start(t, 4, "scores")
			// The first produce request of partition 0 waits 300 ms: the
			// first flight cannot end before then.
			var slowed atomic.Bool
			fake := c.Fake()
			fake.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
				fake.KeepControl()
				pr := req.(*kmsg.ProduceRequest)
				if pr.Topics[0].Partitions[0].Partition == 0 && slowed.CompareAndSwap(false, true) {
					fake.SleepControl(func() { time.Sleep(300 * time.Millisecond) })
				}
				return nil, nil, false
			})
			s := tt.open(t, c, "scores", KafkaWriterConfig{})
			const flights, rows = 6, 40
			fs := flightsOf(t, s, flights, rows)
			var ended []int
			for len(ended) < flights {
				for k, f := range fs {
					select {
					case <-f.Done():
						if !slices.Contains(ended, k) {
							ended = append(ended, k)
						}
					default:
					}
				}
				time.Sleep(time.Millisecond)
			}
			for i, k := range ended {
				if i != k {
					t.Fatalf("flights ended in the order %v", ended)
				}
			}
			for k, f := range fs {
				if err := f.Err(); err != nil || f.Finished().IsZero() || k > 0 && f.Finished().Before(fs[k-1].Finished()) {
					t.Errorf("flight %d: %v, finished %v", k, err, f.Finished())
				}
			}
			if err := s.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			checkIDs(t, tt.ids(t, c.ConsumeAll(t, "scores"), 4), flights, rows, true)
			noFlightsLeft(t)
		})
	}
}

// Close, right after flights were started against a slow broker, waits
// for them: every score is written, none lost.
func TestCloseWaitsForFlights(t *testing.T) {
	for _, tt := range asyncSinks {
		t.Run(tt.name, func(t *testing.T) {
			c := kafkatest.Start(t, 2, "scores")
			fake := c.Fake()
			fake.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
				fake.KeepControl()
				fake.SleepControl(func() { time.Sleep(20 * time.Millisecond) })
				return nil, nil, false
			})
			s := tt.open(t, c, "scores", KafkaWriterConfig{})
			fs := flightsOf(t, s, 5, 30)
			if err := s.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			for k, f := range fs {
				select {
				case <-f.Done():
					if f.Err() != nil {
						t.Errorf("flight %d: %v", k, f.Err())
					}
				default:
					t.Errorf("flight %d under way after Close", k)
				}
			}
			checkIDs(t, tt.ids(t, c.ConsumeAll(t, "scores"), 2), 5, 30, true)
			noFlightsLeft(t)
		})
	}
}

// A transient refusal of produce requests while several flights are under
// way is ridden out: every flight succeeds and every score is written
// once.
func TestFlightsRideOutTransientFailure(t *testing.T) {
	for _, tt := range asyncSinks {
		t.Run(tt.name, func(t *testing.T) {
			c := kafkatest.Start(t, 3, "scores")
			var refused atomic.Int32
			c.FailProduce("scores", notLeader, func(parts []int32) bool {
				// Partition 1 refuses its first three requests.
				return parts[0] == 1 && refused.Add(1) <= 3
			})
			s := tt.open(t, c, "scores", KafkaWriterConfig{Conn: kafkaconn.Config{Retry: kafkaconn.Retry{MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}}})
			defer s.Close(context.Background())
			fs := flightsOf(t, s, 5, 30)
			for k, f := range fs {
				if err := f.Wait(context.Background()); err != nil {
					t.Errorf("flight %d: %v", k, err)
				}
			}
			if refused.Load() < 3 {
				t.Errorf("%d requests refused, want 3", refused.Load())
			}
			checkIDs(t, tt.ids(t, c.ConsumeAll(t, "scores"), 3), 5, 30, true)
		})
	}
}

// A lasting refusal fails the flights it hits with the error Write
// returns; the flights before it and after it are written.
func TestFlightFailsForGood(t *testing.T) {
	for _, tt := range asyncSinks {
		t.Run(tt.name, func(t *testing.T) {
			c := kafkatest.Start(t, 1, "scores")
			// The second produce request is refused: the second flight's.
			var requests atomic.Int32
			c.FailProduce("scores", topicAuthorization, func([]int32) bool { return requests.Add(1) == 2 })
			s := tt.open(t, c, "scores", KafkaWriterConfig{})
			defer s.Close(context.Background())
			fs := flightsOf(t, s, 3, 10)
			for k, f := range fs {
				err := f.Wait(context.Background())
				if k != 1 && err != nil {
					t.Errorf("flight %d: %v", k, err)
				}
				if k == 1 && (err == nil || !strings.Contains(err.Error(), "writing 10 rows: Kafka write errors") || !strings.Contains(err.Error(), "Topic Authorization Failed")) {
					t.Errorf("flight %d: %v, want the refusal of writing its 10 rows", k, err)
				}
			}
			if got := len(c.ConsumeAll(t, "scores")); got != 20 && tt.name == "json" || got != 2 && tt.name == "arrow" {
				t.Errorf("%d messages written, want those of the first and third flights", got)
			}
		})
	}
}

// With Coalesce, flights of JSON scores waiting for the one before them
// leave together, in one produce request, in their order: at light load
// small writes do not queue one request each behind a slow broker. Each
// flight ends with its own outcome.
func TestWaitingFlightsLeaveTogether(t *testing.T) {
	c := kafkatest.Start(t, 1, "scores")
	var requests atomic.Int32
	fake := c.Fake()
	fake.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		requests.Add(1)
		fake.SleepControl(func() { time.Sleep(100 * time.Millisecond) })
		return nil, nil, false
	})
	s := asyncSinks[0].open(t, c, "scores", KafkaWriterConfig{Coalesce: true})
	const flights = 10
	// The first leaves alone; the others are started while the broker
	// holds its request.
	mem := memory.NewGoAllocator()
	var fs []*Flight
	for k := range flights {
		if k == 1 {
			for requests.Load() == 0 {
				time.Sleep(time.Millisecond)
			}
		}
		rec := outputRecord(mem, k, 1, 2, false)
		f, err := s.WriteAsync(context.Background(), rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, f)
	}
	for k, f := range fs {
		if err := f.Wait(context.Background()); err != nil || k > 0 && f.Finished().Before(fs[k-1].Finished()) {
			t.Errorf("flight %d: %v, finished %v", k, err, f.Finished())
		}
	}
	if n := requests.Load(); n != 2 {
		t.Errorf("%d flights of one score each sent %d produce requests, want 2: the first, then the others together", flights, n)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkIDs(t, asyncSinks[0].ids(t, c.ConsumeAll(t, "scores"), 1), flights, 1, true)
	noFlightsLeft(t)
}
