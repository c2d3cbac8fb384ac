package sink

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/schemas"
)

// Dead letters read back are the rejects written, with the message value
// as the payload; a row header that is not a number is an error naming
// its offset.
func TestReadKafkaDeadLetters(t *testing.T) {
	c := kafkatest.Start(t, 1, "dead", "odd")
	conn := kafkaconn.Config{Brokers: c.Brokers}
	d, err := NewKafkaDeadLetters(KafkaWriterConfig{Conn: conn, Topic: "dead"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	rejects := []schemas.RowError{
		{Source: "in/0", Row: 12, Column: "a", Reason: `view "a" item 1 is null, want a number`, Payload: []byte(`{"id":1,"a":[1,null]}`)},
		{Source: "in/0", Row: 13, Reason: "empty message", Payload: []byte{}},
		{Source: "scores.csv", Row: 4, Column: "acc_1", Reason: `value "two" is not a number`},
		{Source: "in/0", Row: 14, Column: "a[1]", Reason: `message row 0: view "a" item 1 is NaN`, Payload: []byte("arrow"),
			ContentType: schemas.ArrowStreamType},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.WriteRejects(ctx, rejects); err != nil {
		t.Fatal(err)
	}
	got, err := ReadKafkaDeadLetters(ctx, conn, "dead", 0, len(rejects))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(rejects) {
		t.Fatalf("%d dead letters read, want %d", len(got), len(rejects))
	}
	for i, r := range rejects {
		g := got[i]
		if r.Payload == nil {
			if !bytes.Contains(g.Payload, []byte(`"reason":"value \"two\" is not a number"`)) {
				t.Errorf("dead letter %d: payload %q, want the reject as JSON", i, g.Payload)
			}
			g.Payload = nil
		}
		if g.Source != r.Source || g.Row != r.Row || g.Column != r.Column || g.Reason != r.Reason || !bytes.Equal(g.Payload, r.Payload) ||
			g.ContentType != r.ContentType {
			t.Errorf("dead letter %d: %+v, want %+v", i, got[i], r)
		}
	}

	c.Produce(t, "odd", kafkatest.Message{Value: []byte("x"), Headers: []kafka.Header{{Key: HeaderRow, Value: []byte("twelve")}}})
	if _, err := ReadKafkaDeadLetters(ctx, conn, "odd", 0, 1); err == nil || !strings.Contains(err.Error(), "offset 0: header mvml-row") {
		t.Errorf("a row header that is not a number: %v", err)
	}
}
