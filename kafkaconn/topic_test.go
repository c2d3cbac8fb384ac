package kafkaconn

import (
	"context"
	"testing"

	"github.com/segmentio/kafka-go"

	"github.com/mvml/mvml/internal/kafkatest"
)

// Partitions counts a topic's partitions, 0 for one that does not exist,
// and creates none.
func TestPartitions(t *testing.T) {
	c := kafkatest.Start(t, 3, "three")
	c.CreateTopic(t, "one", 1)
	client := &kafka.Client{Addr: kafka.TCP(c.Brokers...), Transport: &kafka.Transport{}}
	for _, tc := range []struct {
		topic string
		want  int
	}{{"three", 3}, {"one", 1}, {"nope", 0}, {"nope", 0}} {
		if got, err := Partitions(context.Background(), client, tc.topic); err != nil || got != tc.want {
			t.Errorf("%s: %d partitions, %v; want %d", tc.topic, got, err, tc.want)
		}
	}
}
