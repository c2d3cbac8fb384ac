package kafkaconn

import (
	"context"
	"testing"
	"time"

	"github.com/mvml/mvml/internal/kafkatest"
)

// Partitions counts a topic's partitions, 0 for one that does not exist,
// and creates none.
func TestPartitions(t *testing.T) {
	c := kafkatest.Start(t, 3, "three")
	c.CreateTopic(t, "one", 1)
	client := Config{Brokers: c.Brokers}.NewClient(0)
	defer client.Close()
	for _, tc := range []struct {
		topic string
		want  int
	}{{"three", 3}, {"one", 1}, {"nope", 0}, {"nope", 0}} {
		if got, err := client.Partitions(context.Background(), tc.topic); err != nil || got != tc.want {
			t.Errorf("%s: %d partitions, %v; want %d", tc.topic, got, err, tc.want)
		}
	}
}

// TopicClients write a topic and read it back, and close.
func TestTopicClients(t *testing.T) {
	c := kafkatest.Start(t, 1, "t")
	clients := Config{Brokers: c.Brokers}.TopicClients("t", 10*time.Second)
	ctx := context.Background()
	if err := clients.Writer.WriteMessages(ctx, Message{Key: []byte("k"), Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	if first, end, err := clients.Client.Offsets(ctx, "t", 0); err != nil || first != 0 || end != 1 {
		t.Fatalf("offsets %d..%d, %v; want 0..1", first, end, err)
	}
	msgs, err := clients.Client.Fetch(ctx, "t", 0, 0, 1<<20, time.Second)
	if err != nil || len(msgs) != 1 || string(msgs[0].Key) != "k" || string(msgs[0].Value) != "v" {
		t.Fatalf("read back %v, %v", msgs, err)
	}
	if err := clients.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
