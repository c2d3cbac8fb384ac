package serve

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/pipeline"
)

// Batches whose writes end together (they waited behind a slow produce
// request and left in one) are acknowledged together, with one offset
// commit: every batch is committed, in fewer commits than batches.
func TestKafkaRunnerCommitsBatchesTogether(t *testing.T) {
	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 150, 1))
	d := makeData(spec, 40, 4)
	records := jsonRecords(t, spec, d)
	c := kafkatest.Start(t, 1, "in", "out", "dead")
	c.ProduceValues(t, "in", records...)
	// The first produce request of scores waits 300 ms: the batches served
	// meanwhile wait for it, and their writes end together.
	var commits atomic.Int32
	var slowed atomic.Bool
	fake := c.Fake()
	fake.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		if req.(*kmsg.ProduceRequest).Topics[0].Topic == "out" && slowed.CompareAndSwap(false, true) {
			fake.SleepControl(func() { time.Sleep(300 * time.Millisecond) })
		}
		return nil, nil, false
	})
	fake.ControlKey(int16(kmsg.OffsetCommit), func(kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		commits.Add(1)
		return nil, nil, false
	})
	r, err := NewKafkaRunner(KafkaConfig{
		Conn: kafkaconn.Config{Brokers: c.Brokers}, Topic: "in", Group: "g", MaxWait: 20 * time.Millisecond,
		OutputTopic: "out", DeadLetterTopic: "dead", Model: m, Options: pipeline.Options{BatchSize: 4},
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := runKafka(t, r, committedAll(t, c, r, 40))
	if err != nil {
		t.Fatal(err)
	}
	if n := commits.Load(); st.Scored != 40 || int64(n) > st.Batches-2 {
		t.Errorf("%d rows scored in %d batches, committed in %d offset commits; want 40 rows and at most %d commits", st.Scored, st.Batches, n, st.Batches-2)
	}
}
