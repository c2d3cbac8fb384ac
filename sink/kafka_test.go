package sink

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/segmentio/kafka-go"

	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/schemas"
)

func checkedMem(t *testing.T) *memory.CheckedAllocator {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return mem
}

// jsonlLines returns the lines the JSON Lines sink writes for recs.
func jsonlLines(t *testing.T, recs ...arrow.Record) []string {
	t.Helper()
	var buf bytes.Buffer
	s := NewJSONL(&buf)
	for _, rec := range recs {
		if err := s.Write(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
	}
	return strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
}

func newTestKafkaSink(t *testing.T, c *kafkatest.Cluster, topic string) *KafkaSink {
	t.Helper()
	s, err := NewKafka(KafkaWriterConfig{Conn: kafkaconn.Config{Brokers: c.Brokers}, Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

func TestKafkaSinkRoundTrip(t *testing.T) {
	mem := checkedMem(t)
	c := kafkatest.Start(t, 3, "scores")
	s := newTestKafkaSink(t, c, "scores")
	// Rows 0..39, then 30..49 again: a rewritten id goes to the partition
	// it went to before.
	recs := []arrow.Record{outputRecord(mem, 0, 40, 3, true), outputRecord(mem, 30, 20, 3, true)}
	defer releaseAll(recs)
	for _, rec := range recs {
		if err := s.Write(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
	}
	// The writer's statistics add up over the writes, one request per
	// partition per write.
	if st := s.Stats(); st.Topic != "scores" || st.Messages != 60 || st.Bytes <= 60 || st.Writes < 2 || st.Writes > 6 || st.Errors != 0 || st.Retries != 0 {
		t.Errorf("stats %+v, want 60 messages in 2 to 6 requests, no errors", st)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := jsonlLines(t, recs...)

	msgs := c.ConsumeAll(t, "scores")
	if len(msgs) != len(want) {
		t.Fatalf("%d messages, want %d", len(msgs), len(want))
	}
	// Each partition keeps the rows' order; match each message to its line
	// by its key, which is the id.
	byID := map[string][]string{}
	for _, line := range want {
		var row struct{ ID int64 }
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatal(err)
		}
		id := strconv.FormatInt(row.ID, 10)
		byID[id] = append(byID[id], line)
	}
	partitionOf := map[string]int{}
	used := map[int]bool{}
	for _, m := range msgs {
		key := string(m.Key)
		lines := byID[key]
		if len(lines) == 0 {
			t.Fatalf("message %s with key %q: no such row left", m.Value, key)
		}
		if string(m.Value) != lines[0] {
			t.Errorf("key %s: value\n%s\nwant the JSON Lines row\n%s", key, m.Value, lines[0])
		}
		byID[key] = lines[1:]
		if p, ok := partitionOf[key]; ok && p != m.Partition {
			t.Errorf("id %s in partitions %d and %d", key, p, m.Partition)
		}
		partitionOf[key] = m.Partition
		used[m.Partition] = true
	}
	if len(used) != 3 {
		t.Errorf("rows landed in partitions %v, want all 3", used)
	}
	// NaN has no JSON form: the sink writes null, as the JSON Lines sink.
	if !strings.Contains(string(msgs[0].Value), `"decision":[`) || !bytes.Contains(bytes.Join(valuesOf(msgs), nil), []byte("null")) {
		t.Errorf("values lack the decision or the null of a NaN: %s", msgs[0].Value)
	}
}

func valuesOf(msgs []kafka.Message) [][]byte {
	out := make([][]byte, len(msgs))
	for i, m := range msgs {
		out[i] = m.Value
	}
	return out
}

func TestKafkaSinkKeys(t *testing.T) {
	mem := checkedMem(t)
	c := kafkatest.Start(t, 1, "keys")
	s := newTestKafkaSink(t, c, "keys")

	// An id column with a null, then a record without an id column, then
	// one whose "id" is not an int64: only int64 ids become keys.
	idSchema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}, {Name: "x", Type: arrow.PrimitiveTypes.Float64}}, nil)
	ids := array.NewInt64Builder(mem)
	ids.AppendValues([]int64{-5, 0, 7}, []bool{true, false, true})
	xs := array.NewFloat64Builder(mem)
	xs.AppendValues([]float64{0.5, 1, 1e-7}, nil)
	withID := newRecord(idSchema, []arrow.Array{ids.NewArray(), xs.NewArray()}, 3)
	ids.Release()
	defer withID.Release()

	noIDSchema := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Float64}}, nil)
	xs.AppendValues([]float64{2}, nil)
	noID := newRecord(noIDSchema, []arrow.Array{xs.NewArray()}, 1)
	defer noID.Release()

	strSchema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String}}, nil)
	strs := array.NewStringBuilder(mem)
	strs.Append("a\"b")
	strID := newRecord(strSchema, []arrow.Array{strs.NewArray()}, 1)
	strs.Release()
	xs.Release()
	defer strID.Release()

	for _, rec := range []arrow.Record{withID, noID, strID} {
		if err := s.Write(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
	}
	msgs := c.ConsumeAll(t, "keys")
	want := []struct{ key, value string }{
		{"-5", `{"id":-5,"x":0.5}`},
		{"", `{"id":null,"x":1}`},
		{"7", `{"id":7,"x":1e-7}`},
		{"", `{"x":2}`},
		{"", `{"id":"a\"b"}`},
	}
	if len(msgs) != len(want) {
		t.Fatalf("%d messages, want %d", len(msgs), len(want))
	}
	for i, w := range want {
		if string(msgs[i].Key) != w.key || string(msgs[i].Value) != w.value {
			t.Errorf("message %d: key %q value %s, want %q %s", i, msgs[i].Key, msgs[i].Value, w.key, w.value)
		}
	}
}

func TestKafkaSinkErrors(t *testing.T) {
	mem := checkedMem(t)
	c := kafkatest.Start(t, 1, "out")
	rec := outputRecord(mem, 0, 2, 2, false)
	defer rec.Release()

	t.Run("unsupported type", func(t *testing.T) {
		s := newTestKafkaSink(t, c, "out")
		b := array.NewBooleanBuilder(mem)
		b.Append(true)
		bad := newRecord(arrow.NewSchema([]arrow.Field{{Name: "flag", Type: arrow.FixedWidthTypes.Boolean}}, nil), []arrow.Array{b.NewArray()}, 1)
		b.Release()
		defer bad.Release()
		if err := s.Write(context.Background(), bad); err == nil || !strings.Contains(err.Error(), `field "flag"`) {
			t.Errorf("Write of a bool column: %v", err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		s := newTestKafkaSink(t, c, "out")
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := s.Write(ctx, rec); !errors.Is(err, context.Canceled) {
			t.Errorf("Write with a cancelled context: %v", err)
		}
	})
	t.Run("closed", func(t *testing.T) {
		s := newTestKafkaSink(t, c, "out")
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if err := s.Write(context.Background(), rec); !errors.Is(err, errClosed) {
			t.Errorf("Write after Close: %v", err)
		}
	})
	t.Run("missing topic", func(t *testing.T) {
		s := newTestKafkaSink(t, c, "no-such-topic")
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		err := s.Write(ctx, rec)
		if err == nil || !errors.Is(err, kafka.UnknownTopicOrPartition) {
			t.Errorf("Write to a topic that does not exist: %v, want kafka.UnknownTopicOrPartition", err)
		}
	})
	if got := c.ConsumeAll(t, "out"); len(got) != 0 {
		t.Errorf("%d messages written by failed writes", len(got))
	}
}

func TestKafkaWriterConfig(t *testing.T) {
	good := KafkaWriterConfig{Conn: kafkaconn.Config{Brokers: []string{"127.0.0.1:1"}}, Topic: "t"}
	tests := []struct {
		name string
		edit func(*KafkaWriterConfig)
		want string
	}{
		{"no brokers", func(c *KafkaWriterConfig) { c.Conn.Brokers = nil }, "no brokers"},
		{"no topic", func(c *KafkaWriterConfig) { c.Topic = "" }, "no topic"},
		{"negative size", func(c *KafkaWriterConfig) { c.BatchSize = -1 }, "must not be negative"},
		{"negative timeout", func(c *KafkaWriterConfig) { c.WriteTimeout = -time.Second }, "must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := good
			tt.edit(&cfg)
			if _, err := NewKafka(cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("NewKafka: %v, want an error containing %q", err, tt.want)
			}
			if _, err := NewKafkaDeadLetters(cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("NewKafkaDeadLetters: %v, want an error containing %q", err, tt.want)
			}
		})
	}
	s, err := NewKafka(good)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	// kafkaconn's TestWriterConfig checks that every write waits for all
	// in-sync replicas, synchronously, the partition by the key's hash.
	w := s.w.cfg
	if w.BatchSize != DefaultKafkaBatchSize || w.BatchBytes != DefaultKafkaBatchBytes ||
		w.BatchTimeout != DefaultKafkaBatchTimeout || w.WriteTimeout != DefaultKafkaWriteTimeout {
		t.Errorf("writer %+v", w)
	}
	if w.ByPartition {
		t.Errorf("writer %+v: by partition, want by the key's hash", w)
	}
}

func TestKafkaDeadLetters(t *testing.T) {
	c := kafkatest.Start(t, 2, "dead")
	d, err := NewKafkaDeadLetters(KafkaWriterConfig{Conn: kafkaconn.Config{Brokers: c.Brokers}, Topic: "dead"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	rejects := []schemas.RowError{
		{Source: "in/0", Row: 12, Column: "a", Reason: `view "a" item 1 is null, want a number`, Payload: []byte(`{"id":1,"a":[1,null]}`)},
		{Source: "in/0", Row: 13, Reason: "invalid JSON: unexpected end of input at offset 3", Payload: []byte{'{', 0xff, '"'}},
		{Source: "scores.csv", Row: 4, Column: "acc_1", Reason: `value "two" is not a number <&>`},
		{Source: "in/1", Row: 7, Column: "a[0]", Reason: `message row 3: view "a" item 0 is NaN`, Payload: []byte("\xff\xff\xff\xffarrow"),
			ContentType: schemas.ArrowStreamType},
	}
	if err := d.WriteRejects(context.Background(), rejects); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteRejects(context.Background(), nil); err != nil {
		t.Fatalf("no rejects: %v", err)
	}
	msgs := c.ConsumeAll(t, "dead")
	if len(msgs) != len(rejects) {
		t.Fatalf("%d messages, want %d", len(msgs), len(rejects))
	}
	for _, r := range rejects {
		var m *kafka.Message
		for i := range msgs {
			if string(msgs[i].Key) == r.Source && header(msgs[i], HeaderRow) == strconv.FormatInt(r.Row, 10) {
				m = &msgs[i]
			}
		}
		if m == nil {
			t.Errorf("no message for %s", r.Error())
			continue
		}
		value := r.Payload
		if value == nil {
			// The line the rejects file writes, without the line break.
			var buf bytes.Buffer
			if err := NewRejects(&buf).Write(r); err != nil {
				t.Fatal(err)
			}
			value = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		}
		if !bytes.Equal(m.Value, value) {
			t.Errorf("%s: value %q, want %q", r.Error(), m.Value, value)
		}
		contentType := cmp.Or(r.ContentType, "<none>")
		for k, v := range map[string]string{HeaderReason: r.Reason, HeaderSource: r.Source, HeaderColumn: r.Column, schemas.HeaderContentType: contentType} {
			if got := header(*m, k); got != v {
				t.Errorf("%s: header %s = %q, want %q", r.Error(), k, got, v)
			}
		}
	}
	// The rejects of one source share a partition, in order.
	var partitions []int
	var rows []string
	for _, m := range msgs {
		if string(m.Key) == "in/0" {
			partitions = append(partitions, m.Partition)
			rows = append(rows, header(m, HeaderRow))
		}
	}
	if len(partitions) != 2 || partitions[0] != partitions[1] || rows[0] != "12" || rows[1] != "13" {
		t.Errorf("rejects of in/0: partitions %v rows %v, want one partition, rows 12 and 13", partitions, rows)
	}
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteRejects(context.Background(), rejects); err == nil {
		t.Error("WriteRejects after Close succeeded")
	}
}

func header(m kafka.Message, key string) string {
	for _, h := range m.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return "<none>"
}

func TestRejectsWriteRejects(t *testing.T) {
	var buf bytes.Buffer
	var dl DeadLetters = NewRejects(&buf)
	rejects := []schemas.RowError{{Source: "in/1", Row: 3, Column: "id", Reason: "id is missing", Payload: []byte(`{"x":1}`)}}
	if err := dl.WriteRejects(context.Background(), rejects); err != nil {
		t.Fatal(err)
	}
	if got, want := buf.String(), `{"source":"in/1","row":3,"column":"id","reason":"id is missing"}`+"\n"; got != want {
		t.Errorf("wrote %q, want %q", got, want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := dl.WriteRejects(ctx, rejects); !errors.Is(err, context.Canceled) {
		t.Errorf("with a cancelled context: %v", err)
	}
	if buf.Len() != len(`{"source":"in/1","row":3,"column":"id","reason":"id is missing"}`)+1 {
		t.Errorf("wrote after the context was cancelled: %q", buf.String())
	}
}

// A rejects file is a DeadLetters for jobs without a dead-letter topic.
func ExampleRejects_WriteRejects() {
	var dl DeadLetters = NewRejects(os.Stdout)
	err := dl.WriteRejects(context.Background(), []schemas.RowError{
		{Source: "events/2", Row: 1041, Column: "acc", Reason: `view "acc" item 1 is null, want a number`, Payload: []byte(`{"id":7,"acc":[1,null,3]}`)},
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// {"source":"events/2","row":1041,"column":"acc","reason":"view \"acc\" item 1 is null, want a number"}
}

// createTopic adds a one-partition topic whose broker-side message limit
// (max.message.bytes) is maxBytes.
func createTopic(t *testing.T, c *kafkatest.Cluster, topic string, maxBytes int) {
	t.Helper()
	if err := c.Fake().CreateTopic(topic, 1, map[string]string{"max.message.bytes": strconv.Itoa(maxBytes)}); err != nil {
		t.Fatal(err)
	}
}

// A dead letter larger than the topic takes is still written: cut to the
// writer's limit, or to nothing when the broker's limit is lower, with its
// original size in mvml-truncated; dead letters that fit one by one but
// not together are all written whole.
func TestKafkaDeadLettersTooLarge(t *testing.T) {
	c := kafkatest.Start(t, 1, "dead") // the broker's default limit, 1048588 bytes
	createTopic(t, c, "small", 4096)
	// Invalid JSON, as a producer could send it: close to the broker's
	// default limit, or only to the small topic's.
	payload := func(n int) []byte { return append([]byte(`{"id": 1, "x": "`), bytes.Repeat([]byte{'x'}, n-16)...) }
	reject := func(row int64, p []byte) schemas.RowError {
		return schemas.RowError{Source: "in/0", Row: row, Reason: "invalid JSON: unexpected end of input at offset 3 (a value)", Payload: p}
	}
	small := make([]schemas.RowError, 40)
	for i := range small {
		small[i] = reject(int64(i), payload(300))
	}
	tests := []struct {
		name       string
		topic      string
		batchBytes int64
		rejects    []schemas.RowError
		// wantKept is the bytes of each value kept; -1 means cut to the
		// writer's limit.
		wantKept []int
	}{
		{"near the default limit", "dead", 0, []schemas.RowError{reject(7, payload(1048500))}, []int{-1}},
		{"above the writer's limit", "small", 2048, []schemas.RowError{reject(8, payload(3000))}, []int{-1}},
		{"above the broker's limit", "small", 0, []schemas.RowError{reject(9, payload(5000)), reject(10, payload(100))}, []int{0, 100}},
		{"together above the broker's limit", "small", 0, small, slices.Repeat([]int{300}, len(small))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(c.ConsumeAll(t, tt.topic))
			d, err := NewKafkaDeadLetters(KafkaWriterConfig{Conn: kafkaconn.Config{Brokers: c.Brokers}, Topic: tt.topic, BatchBytes: tt.batchBytes})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close(context.Background())
			if err := d.WriteRejects(context.Background(), tt.rejects); err != nil {
				t.Fatal(err)
			}
			msgs := c.ConsumeAll(t, tt.topic)[before:]
			if len(msgs) != len(tt.rejects) {
				t.Fatalf("%d dead letters, want %d", len(msgs), len(tt.rejects))
			}
			// Dead letters retried alone come after the others: match them
			// by row.
			row := func(m kafka.Message) int64 { r, _ := strconv.ParseInt(header(m, HeaderRow), 10, 64); return r }
			slices.SortFunc(msgs, func(a, b kafka.Message) int { return cmp.Compare(row(a), row(b)) })
			limit := tt.batchBytes
			if limit == 0 {
				limit = DefaultKafkaBatchBytes
			}
			for i, m := range msgs {
				r := tt.rejects[i]
				if header(m, HeaderReason) != r.Reason || header(m, HeaderRow) != strconv.FormatInt(r.Row, 10) || header(m, HeaderSource) != r.Source {
					t.Errorf("dead letter %d: headers %v do not locate %s", i, m.Headers, r.Error())
				}
				if !bytes.HasPrefix(r.Payload, m.Value) {
					t.Errorf("dead letter %d: value of %d bytes is not the start of the message", i, len(m.Value))
				}
				kept := tt.wantKept[i]
				switch {
				case kept == len(r.Payload):
					if header(m, HeaderTruncated) != "<none>" || len(m.Value) != kept {
						t.Errorf("dead letter %d: %d bytes of %d, %s %q; want the whole message", i, len(m.Value), len(r.Payload), HeaderTruncated, header(m, HeaderTruncated))
					}
					continue
				case kept == -1:
					if size := kafkaBytes(&m); len(m.Value) == 0 || size > limit || size < limit-2*recordBatchFraming {
						t.Errorf("dead letter %d: %d bytes kept, %d counted; want it cut to the writer's %d", i, len(m.Value), size, limit)
					}
				case len(m.Value) != kept:
					t.Errorf("dead letter %d: %d bytes kept, want %d", i, len(m.Value), kept)
				}
				if got := header(m, HeaderTruncated); got != strconv.Itoa(len(r.Payload)) {
					t.Errorf("dead letter %d: %s %q, want the original size %d", i, HeaderTruncated, got, len(r.Payload))
				}
			}
		})
	}
}

// Scores that fit the topic one by one but not in one batch are all
// written; a score that does not fit alone fails the write, naming the
// topic's limit.
func TestKafkaSinkTooLarge(t *testing.T) {
	mem := checkedMem(t)
	c := kafkatest.Start(t, 1)
	createTopic(t, c, "scores", 1024)
	createTopic(t, c, "tiny", 40)
	rec := outputRecord(mem, 0, 60, 3, true)
	defer rec.Release()
	s := newTestKafkaSink(t, c, "scores")
	if err := s.Write(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	if got, want := valuesOf(c.ConsumeAll(t, "scores")), jsonlLines(t, rec); len(got) != len(want) {
		t.Errorf("%d scores written, want %d", len(got), len(want))
	}
	tiny := newTestKafkaSink(t, c, "tiny")
	if err := tiny.Write(context.Background(), rec); err == nil || !strings.Contains(err.Error(), "max.message.bytes") {
		t.Errorf("Write of scores larger than the topic takes: %v", err)
	}
}

// kafkaBytes is messageBytes of m, read by a kafka-go reader of the test.
func kafkaBytes(m *kafka.Message) int64 {
	hs := make([]kafkaconn.Header, len(m.Headers))
	for i, h := range m.Headers {
		hs[i] = kafkaconn.Header(h)
	}
	return messageBytes(&kafkaconn.Message{Key: m.Key, Value: m.Value, Headers: hs})
}
