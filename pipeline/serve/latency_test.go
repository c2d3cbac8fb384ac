package serve

import (
	"testing"
	"time"

	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/kafkaconn"
)

// At light load a record is scored, its score durable in the output
// topic and its offset committed, well before MaxWait: the service does
// not hold it for a batch that will not fill.
func TestKafkaRunnerScoresAtOnceAtLightLoad(t *testing.T) {
	const maxWait = 5 * time.Second
	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 150, 1))
	records := jsonRecords(t, spec, makeData(spec, 4, 4))
	c := kafkatest.Start(t, 2, "in", "out", "dead")
	r, err := NewKafkaRunner(KafkaConfig{
		Conn: kafkaconn.Config{Brokers: c.Brokers}, Topic: "in", Group: "g", MaxWait: maxWait,
		OutputTopic: "out", DeadLetterTopic: "dead", Model: m,
	})
	if err != nil {
		t.Fatal(err)
	}
	sent := 0
	var produced time.Time
	var took []time.Duration
	st, err := runKafka(t, r, func() bool {
		scored := int(r.Service().Stats().Scored)
		if scored < sent {
			return false
		}
		if sent > 0 {
			took = append(took, time.Since(produced))
		}
		if sent == len(records) {
			return true
		}
		// The next record once the one before is scored, to a partition
		// after the other.
		c.Produce(t, "in", kafkatest.Message{Partition: sent % 2, Value: records[sent]})
		produced = time.Now()
		sent++
		return false
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.Scored != int64(len(records)) || st.Batches != int64(len(records)) {
		t.Fatalf("stats %+v, want %d records scored in as many batches", st, len(records))
	}
	// The first record waits for the group to form too.
	for i, d := range took[1:] {
		if d >= maxWait/2 {
			t.Errorf("record %d scored %v after it was produced, want well before MaxWait %v", i+1, d, maxWait)
		}
	}
	if got := c.CommittedOffsets(t, "g", "in"); got[0]+got[1] != int64(len(records)) {
		t.Errorf("committed offsets %v, want %d records in all", got, len(records))
	}
}
