package sink

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/schemas"
)

// Kafka error codes the broker answers with in these tests.
const (
	notLeader          int16 = 6  // NOT_LEADER_OR_FOLLOWER: transient
	topicAuthorization int16 = 29 // TOPIC_AUTHORIZATION_FAILED: lasting
)

// A leader election longer than kafka-go's own retries (10 tries over
// about 7.4 s) costs no write: the partition that fails is written again
// until it is back, the others are not written twice, and every retry is
// logged.
func TestKafkaSinkRidesOutLongHiccup(t *testing.T) {
	c := kafkatest.Start(t, 3, "scores")
	var log strings.Builder // written by Write only, in this goroutine
	s, err := NewKafka(KafkaWriterConfig{Conn: kafkaconn.Config{Brokers: c.Brokers}, Topic: "scores",
		Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	mem := memory.NewGoAllocator()
	warm := outputRecord(mem, 0, 30, 3, false)
	defer warm.Release()
	if err := s.Write(context.Background(), warm); err != nil {
		t.Fatal(err)
	}
	const hiccup = 9 * time.Second
	end := time.Now().Add(hiccup)
	var refused atomic.Int32
	c.FailProduce("scores", notLeader, func(parts []int32) bool {
		if parts[0] != 1 || time.Now().After(end) {
			return false
		}
		refused.Add(1)
		return true
	})
	rec := outputRecord(mem, 30, 60, 3, false)
	defer rec.Release()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	if err := s.Write(ctx, rec); err != nil {
		t.Fatalf("write during a %v hiccup: %v", hiccup, err)
	}
	if took := time.Since(start); took < hiccup-time.Second {
		t.Errorf("the write returned after %v, before the hiccup ended", took)
	}
	if refused.Load() < 2 || !strings.Contains(log.String(), "retrying") {
		t.Errorf("%d refused requests; log:\n%s", refused.Load(), log.String())
	}
	// Every retry is counted, and every refused request an error.
	if st := s.Stats(); st.Retries != int64(strings.Count(log.String(), "retrying")) || st.Errors < int64(refused.Load()) || st.Messages < 60 {
		t.Errorf("stats %+v after %d refused requests; log:\n%s", st, refused.Load(), log.String())
	}
	seen := map[int64]int{}
	for _, m := range c.ConsumeAll(t, "scores") {
		var row struct {
			ID int64 `json:"id"`
		}
		if err := json.Unmarshal(m.Value, &row); err != nil {
			t.Fatal(err)
		}
		seen[row.ID]++
	}
	for id := int64(1000); id < 1090; id++ { // outputRecord numbers its ids from 1000
		if seen[id] != 1 {
			t.Errorf("id %d written %d times, want once", id, seen[id])
		}
	}
}

// A failure that outlasts the retry policy fails the write, and so does a
// lasting refusal at once; nothing is written. Both Kafka sinks behave
// alike.
func TestKafkaWritersGiveUp(t *testing.T) {
	policy := kafkaconn.Retry{MaxElapsed: 600 * time.Millisecond, MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}
	for _, tt := range []struct {
		name   string
		code   int16
		gaveUp bool
		within time.Duration
	}{
		{"transient", notLeader, true, 3 * time.Second},
		{"lasting", topicAuthorization, false, time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := kafkatest.Start(t, 1, "out", "dead")
			c.FailProduce("out", tt.code, func([]int32) bool { return true })
			c.FailProduce("dead", tt.code, func([]int32) bool { return true })
			cfg := KafkaWriterConfig{Conn: kafkaconn.Config{Brokers: c.Brokers, Retry: policy}, Topic: "out"}
			s, err := NewKafka(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(context.Background())
			cfg.Topic = "dead"
			d, err := NewKafkaDeadLetters(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close(context.Background())
			rec := outputRecord(memory.NewGoAllocator(), 0, 10, 2, false)
			defer rec.Release()
			for name, write := range map[string]func() error{
				"scores": func() error { return s.Write(context.Background(), rec) },
				"dead letters": func() error {
					return d.WriteRejects(context.Background(), []schemas.RowError{{Source: "in/0", Reason: "bad"}})
				},
			} {
				start := time.Now()
				err := write()
				took := time.Since(start)
				if err == nil || errors.Is(err, kafkaconn.ErrGaveUp) != tt.gaveUp || took > tt.within {
					t.Errorf("%s: %v after %v; want a failure (gave up: %t) within %v", name, err, took, tt.gaveUp, tt.within)
				}
			}
			if n := len(c.ConsumeAll(t, "out")) + len(c.ConsumeAll(t, "dead")); n != 0 {
				t.Errorf("%d messages written", n)
			}
		})
	}
}

// Close gives up when its context ends, also while the writer waits for a
// request the broker does not answer.
func TestKafkaSinkCloseWithinContext(t *testing.T) {
	c := kafkatest.Start(t, 1, "slow")
	release := make(chan struct{})
	defer close(release)
	fake := c.Fake()
	fake.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		fake.SleepControl(func() { <-release })
		return nil, nil, false
	})
	s, err := NewKafka(KafkaWriterConfig{Conn: kafkaconn.Config{Brokers: c.Brokers}, Topic: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	rec := outputRecord(memory.NewGoAllocator(), 0, 5, 2, false)
	defer rec.Release()
	writeCtx, cancelWrite := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancelWrite()
	if err := s.Write(writeCtx, rec); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("write to a broker that does not answer: %v", err)
	}
	closeCtx, cancelClose := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancelClose()
	start := time.Now()
	if err := s.Close(closeCtx); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Errorf("close: %v after %v, want the context's deadline", err, time.Since(start))
	}
}
