package serve

import (
	"bytes"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/segmentio/kafka-go"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/pipeline"
	"github.com/mvml/mvml/pipeline/internal/pipelinetest"
	"github.com/mvml/mvml/schemas"
	"github.com/mvml/mvml/sink"
)

// arrowRecords are rows [lo, hi) of d as Arrow IPC streams of the
// canonical record, per rows each, labelled.
func arrowRecords(t testing.TB, spec *schemas.ViewSpec, d *dataset, per int) [][]byte {
	t.Helper()
	var out [][]byte
	for lo := 0; lo < d.Rows(); lo += per {
		rec := pipelinetest.InputRecord(memory.NewGoAllocator(), spec, d, lo, min(lo+per, d.Rows()))
		value, err := schemas.EncodeIPC(rec, memory.NewGoAllocator())
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, value)
	}
	return out
}

// readIPC reads the one record batch of an IPC stream.
func readIPC(t testing.TB, value []byte) arrow.Record {
	t.Helper()
	r, err := ipc.NewReader(bytes.NewReader(value))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if !r.Next() {
		t.Fatalf("no record batch: %v", r.Err())
	}
	rec := r.Record()
	rec.Retain()
	return rec
}

// mvml serve on Arrow IPC: messages of ten rows in, without a header
// (Format arrow), scores out as IPC streams (ArrowOutput). A row with a
// NaN is refused by the decoder, and one too large for the model by the
// scorer: each goes to the dead letters alone, as a one-row IPC stream
// with its reason, and the other rows of their messages are scored.
func TestKafkaRunnerArrow(t *testing.T) {
	spec := testSpec(t)
	m := trainTestModel(t, spec, makeData(spec, 150, 1))
	d := makeData(spec, 60, 6)
	d.Views[0][13*d.Dims[0]] = math.NaN()
	d.Views[1][47*d.Dims[1]+1] = 1.7e308
	c := kafkatest.Start(t, 1, "in", "out", "dead")
	c.ProduceValues(t, "in", arrowRecords(t, spec, d, 10)...)
	r, err := NewKafkaRunner(KafkaConfig{
		Conn: kafkaconn.Config{Brokers: c.Brokers}, Topic: "in", Format: ingest.FormatArrow, Group: "g", MaxWait: 20 * time.Millisecond,
		OutputTopic: "out", ArrowOutput: true, DeadLetterTopic: "dead", Model: m, Options: pipeline.Options{BatchSize: 3},
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := runKafka(t, r, committedAll(t, c, r, 6))
	if err != nil {
		t.Fatal(err)
	}
	if st.In != 60 || st.Scored != 58 || st.DeadLettered != 2 {
		t.Errorf("stats %+v, want in 60 = scored 58 + dead-lettered 2", st)
	}
	var scored []int64
	for _, msg := range c.ConsumeAll(t, "out") {
		if h := messageHeader(msg, schemas.HeaderContentType); h != schemas.ArrowStreamType {
			t.Errorf("score message with content-type %q", h)
		}
		rec := readIPC(t, msg.Value)
		if !rec.Schema().Equal(schemas.OutputSchema(m.Outputs(), len(spec.Views), false)) {
			t.Errorf("scores of schema %v", rec.Schema())
		}
		scored = append(scored, schemas.IDs(rec).Int64Values()...)
		rec.Release()
	}
	want := slices.Concat(d.IDs[:13], d.IDs[14:47], d.IDs[48:])
	if !slices.Equal(scored, want) {
		t.Errorf("scored ids %v, want %v", scored, want)
	}
	letters := c.ConsumeAll(t, "dead")
	if len(letters) != 2 {
		t.Fatalf("%d dead letters, want 2", len(letters))
	}
	for i, tt := range []struct {
		row           int
		offset, cause string
	}{{13, "1", `message row 3: view "a" item 0 is NaN`}, {47, "4", "no finite score: view b"}} {
		l := letters[i]
		if messageHeader(l, sink.HeaderRow) != tt.offset || !strings.HasPrefix(messageHeader(l, sink.HeaderReason), tt.cause) ||
			messageHeader(l, schemas.HeaderContentType) != schemas.ArrowStreamType {
			t.Errorf("dead letter %d: headers %v, want offset %s and a reason starting %q", i, l.Headers, tt.offset, tt.cause)
		}
		rec := readIPC(t, l.Value)
		if rec.NumRows() != 1 || schemas.IDs(rec).Value(0) != d.IDs[tt.row] {
			t.Errorf("dead letter %d holds %v, want the row of id %d alone", i, rec, d.IDs[tt.row])
		}
		rec.Release()
	}
}

// messageHeader is the value of m's header key, "" when it has none.
func messageHeader(m kafka.Message, key string) string {
	for _, h := range m.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// Arrow output is for a topic: the runner refuses it with a directory of
// Parquet files.
func TestKafkaRunnerArrowOutputNeedsATopic(t *testing.T) {
	spec := testSpec(t)
	_, err := NewKafkaRunner(KafkaConfig{Conn: kafkaconn.Config{Brokers: []string{"localhost:1"}}, Topic: "in", Group: "g",
		OutputDir: t.TempDir(), ArrowOutput: true, DeadLetterTopic: "dead", Model: trainTestModel(t, spec, makeData(spec, 150, 1))})
	if err == nil || !strings.Contains(err.Error(), "Arrow output is for an output topic") {
		t.Errorf("NewKafkaRunner: %v", err)
	}
}
