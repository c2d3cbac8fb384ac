package serve

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/pipeline"
	"github.com/mvml/mvml/sink"
)

// Kafka error codes the broker answers with in these tests.
const (
	notLeader          int16 = 6  // NOT_LEADER_OR_FOLLOWER: transient
	topicAuthorization int16 = 29 // TOPIC_AUTHORIZATION_FAILED: lasting
)

// runKafka runs r until finished says so, or it stops by itself, and
// returns its counters and error.
func runKafka(t *testing.T, r *KafkaRunner, finished func() bool) (Stats, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	for !finished() {
		select {
		case err := <-done:
			return r.Service().Stats(), err
		case <-time.After(5 * time.Millisecond):
		}
	}
	cancel()
	return r.Service().Stats(), <-done
}

// committedAll says when group "g" committed partition 0 of "in" up to
// offset, r's records counted as committed being no measure: a rebalance
// may deliver some twice (at least once).
func committedAll(t *testing.T, c *kafkatest.Cluster, r *KafkaRunner, offset int64) func() bool {
	return func() bool {
		// Once r acknowledged a batch, the group exists.
		return r.Service().Stats().Batches > 0 && c.CommittedOffsets(t, "g", "in")[0] >= offset
	}
}

// when runs fn in its own goroutine as soon as cond holds; waiting more
// than 20 s fails the test.
func when(t *testing.T, what string, cond func() bool, fn func()) {
	go func() {
		deadline := time.Now().Add(20 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Errorf("timed out waiting for %s", what)
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		fn()
	}()
}

// A broker that hiccups for a second costs the service no restart,
// whether it refuses the scores (a leader election) or drops the
// connections of the offset commits; a failure that outlasts the retry
// policy stops the service with the batch in hand not committed, and a
// restart scores it (at least once).
func TestKafkaRunnerRidesOutHiccups(t *testing.T) {
	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 150, 1))
	d := makeData(spec, 100, 4)
	records := jsonRecords(t, spec, d)
	for _, tt := range []struct {
		name string
		// fault injects the failure, for as long as failing says.
		fault    func(c *kafkatest.Cluster, failing func() bool)
		hiccup   time.Duration
		retry    kafkaconn.Retry
		wantStop bool
	}{
		{"scores refused for a second", func(c *kafkatest.Cluster, failing func() bool) {
			c.FailProduce("out", notLeader, func([]int32) bool { return failing() })
		}, time.Second, kafkaconn.Retry{}, false},
		{"commits dropped for a second", func(c *kafkatest.Cluster, failing func() bool) {
			c.Drop(kmsg.OffsetCommit, failing)
		}, time.Second, kafkaconn.Retry{}, false},
		{"scores refused for good", func(c *kafkatest.Cluster, failing func() bool) {
			c.FailProduce("out", notLeader, func([]int32) bool { return failing() })
		}, time.Hour, kafkaconn.Retry{MaxElapsed: time.Second, MaxBackoff: 200 * time.Millisecond}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := kafkatest.Start(t, 1, "in", "out", "dead")
			c.ProduceValues(t, "in", records[:40]...)
			var until atomic.Int64 // the end of the fault, in Unix nanoseconds
			tt.fault(c, func() bool { return time.Now().UnixNano() < until.Load() })
			cfg := KafkaConfig{
				Conn: kafkaconn.Config{Brokers: c.Brokers, Retry: tt.retry}, Topic: "in", Group: "g", MaxWait: 20 * time.Millisecond,
				OutputTopic: "out", DeadLetterTopic: "dead", Model: m, Options: pipeline.Options{BatchSize: 20},
			}
			r, err := NewKafkaRunner(cfg)
			if err != nil {
				t.Fatal(err)
			}
			// The fault starts once the first records are committed, and
			// the rest of the records arrive during it.
			when(t, "the first records", func() bool { return r.Service().Stats().Scored >= 40 }, func() {
				until.Store(time.Now().Add(tt.hiccup).UnixNano())
				if err := c.Send("in", kafkatest.Values(records[40:]...)...); err != nil {
					t.Error(err)
				}
			})
			st, err := runKafka(t, r, committedAll(t, c, r, 100))
			committed := c.CommittedOffsets(t, "g", "in")[0]
			if tt.wantStop {
				if !errors.Is(err, kafkaconn.ErrGaveUp) || st.NotCommitted == 0 || committed != st.Scored || st.In != st.Scored+st.NotCommitted {
					t.Fatalf("Run: %v; stats %+v, committed offset %d; want a stop after the retries, the batch in hand not committed", err, st, committed)
				}
				until.Store(0)
				restarted, err := NewKafkaRunner(cfg)
				if err != nil {
					t.Fatal(err)
				}
				if st, err = runKafka(t, restarted, committedAll(t, c, restarted, 100)); err != nil {
					t.Fatal(err)
				}
			} else if err != nil {
				t.Fatalf("Run: %v; stats %+v; want no stop", err, st)
			}
			if committed := c.CommittedOffsets(t, "g", "in")[0]; committed != 100 {
				t.Errorf("committed offset %d, want 100", committed)
			}
			scored := map[int64]bool{}
			for _, msg := range c.ConsumeAll(t, "out") {
				var row struct {
					ID int64 `json:"id"`
				}
				if err := json.Unmarshal(msg.Value, &row); err != nil {
					t.Fatal(err)
				}
				scored[row.ID] = true
			}
			for _, id := range d.IDs {
				if !scored[id] {
					t.Errorf("id %d not scored", id)
				}
			}
		})
	}
}

// After a failure, the Parquet file in progress is dropped, not committed:
// its records were not acknowledged and will be scored again; the files
// committed before stay.
func TestKafkaRunnerAbortsOutputAfterFailure(t *testing.T) {
	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 150, 1))
	records := jsonRecords(t, spec, makeData(spec, 60, 4))
	c := kafkatest.Start(t, 1, "in", "dead")
	c.FailProduce("dead", topicAuthorization, func([]int32) bool { return true })
	c.ProduceValues(t, "in", records[:50]...)
	dir := t.TempDir()
	r, err := NewKafkaRunner(KafkaConfig{
		Conn: kafkaconn.Config{Brokers: c.Brokers}, Topic: "in", Group: "g", MaxWait: 20 * time.Millisecond,
		OutputDir: dir, Roll: sink.RollingPolicy{Rows: 40, Every: time.Hour}, DeadLetterTopic: "dead", Model: m, Options: pipeline.Options{BatchSize: 10},
	})
	if err != nil {
		t.Fatal(err)
	}
	when(t, "the first file", func() bool { return r.Service().Stats().Scored >= 40 }, func() {
		// Scored into the second file, then a record the dead-letter topic
		// refuses.
		if err := c.Send("in", kafkatest.Values(append(records[50:], []byte(`{"id": 1}`))...)...); err != nil {
			t.Error(err)
		}
	})
	st, err := runKafka(t, r, committedAll(t, c, r, 61))
	if err == nil || !strings.Contains(err.Error(), "dead letters") {
		t.Fatalf("Run: %v, want the dead-letter topic's refusal", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) != 1 || !strings.HasSuffix(names[0], ".parquet") {
		t.Fatalf("files %v, stats %+v: want the first file only", names, st)
	}
	// The file rolls at the first batch that takes it to 40 rows; batches
	// are cut by size or by MaxWait, so it holds 40 or a few more.
	rows, err := ingest.CountRows(context.Background(), []string{filepath.Join(dir, names[0])})
	if err != nil {
		t.Fatal(err)
	}
	if rows < 40 || st.Scored != rows {
		t.Errorf("first file of %d rows, stats %+v: want at least 40 rows, every scored record in it", rows, st)
	}
}
