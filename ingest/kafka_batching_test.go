package ingest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/kafkaconn"
)

// A batch takes what has arrived and waits for more only while more is
// known to be coming, for at most MaxWait.
func TestKafkaFillWaitsOnlyForWhatIsComing(t *testing.T) {
	for _, tt := range []struct {
		name string
		// buffered messages wait on the channel; ahead are known to be
		// coming, of which late arrive after a pause.
		buffered, ahead, late int
		batch                 int
		maxWait               time.Duration
		want                  int
		// the batch takes at least atLeast and less than under.
		atLeast, under time.Duration
	}{
		{name: "nothing coming", batch: 100, maxWait: 5 * time.Second, want: 1, under: time.Second},
		{name: "what has arrived", buffered: 3, batch: 100, maxWait: 5 * time.Second, want: 4, under: time.Second},
		{name: "more on its way", ahead: 2, late: 2, batch: 100, maxWait: 5 * time.Second, want: 3,
			atLeast: 50 * time.Millisecond, under: 2 * time.Second},
		{name: "what comes late", ahead: 1, batch: 100, maxWait: 300 * time.Millisecond, want: 1,
			atLeast: 300 * time.Millisecond, under: 3 * time.Second},
		{name: "full batch", buffered: 10, ahead: 5, batch: 4, maxWait: 5 * time.Second, want: 4, under: time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &KafkaSource{cfg: KafkaConfig{MaxWait: tt.maxWait}, opts: Options{BatchSize: tt.batch}}
			g := newGroupGen(Assignment{}, 16)
			for i := range tt.buffered {
				g.records <- kafkaconn.Message{Offset: int64(1 + i)}
			}
			g.recordsAhead.Store(int64(tt.ahead))
			sent := make(chan struct{})
			go func() {
				defer close(sent)
				time.Sleep(tt.atLeast)
				for i := range tt.late {
					// As feed does: on the channel, then counted out.
					g.records <- kafkaconn.Message{Offset: int64(100 + i)}
					g.recordsAhead.Add(-1)
				}
			}()
			start := time.Now()
			msgs := s.fill(context.Background(), g, g.records, &g.recordsAhead, kafkaconn.Message{})
			took := time.Since(start)
			<-sent
			if len(msgs) != tt.want {
				t.Errorf("batch of %d messages, want %d", len(msgs), tt.want)
			}
			if took < tt.atLeast || took >= tt.under {
				t.Errorf("batch took %v, want at least %v and less than %v", took, tt.atLeast, tt.under)
			}
		})
	}
}

// At light load a record is delivered at once, not after MaxWait, while
// the records already on the broker still come in one batch.
func TestKafkaSourceAdaptiveBatches(t *testing.T) {
	const maxWait = 5 * time.Second
	c := kafkatest.Start(t, 1, "light")
	for id := range 3 {
		c.ProduceValues(t, "light", kafkaMessage(id))
	}
	src := newTestKafka(t, c, "light", "g", checkedAllocator(t), 100, maxWait)
	res, sizes := kafkaReadN(t, src, 3, true)
	if !slices.Equal(sizes, []int{3}) {
		t.Errorf("batch sizes %v of the records on the broker, want [3]", sizes)
	}
	checkKafkaRows(t, res, []int64{0, 1, 2})
	for id := 3; id < 6; id++ {
		c.ProduceValues(t, "light", kafkaMessage(id))
		start := time.Now()
		res, sizes := kafkaReadN(t, src, 1, true)
		// Produced, fetched and taken: milliseconds; a wait for a batch
		// to fill: MaxWait.
		if took := time.Since(start); took >= maxWait/2 {
			t.Errorf("record %d came %v after it was produced, want well before MaxWait %v", id, took, maxWait)
		}
		if !slices.Equal(sizes, []int{1}) {
			t.Errorf("batch sizes %v, want [1]", sizes)
		}
		checkKafkaRows(t, res, []int64{int64(id)})
	}
}
