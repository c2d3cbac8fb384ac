package kafkatest

import (
	"errors"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FailProduce makes the broker refuse the produce requests to topic for
// which fail, given the request's partitions, returns true: each is
// answered with the Kafka error code for every partition it holds, and
// nothing is written; the others are served. kafka-go's writer sends one
// request per partition. It lasts as long as the cluster.
func (c *Cluster) FailProduce(topic string, code int16, fail func(partitions []int32) bool) {
	c.fake.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.fake.KeepControl()
		pr := req.(*kmsg.ProduceRequest)
		i := slices.IndexFunc(pr.Topics, func(t kmsg.ProduceRequestTopic) bool { return t.Topic == topic })
		if i < 0 {
			return nil, nil, false
		}
		var parts []int32
		for _, p := range pr.Topics[i].Partitions {
			parts = append(parts, p.Partition)
		}
		if !fail(parts) {
			return nil, nil, false
		}
		resp := pr.ResponseKind().(*kmsg.ProduceResponse)
		for _, t := range pr.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition = p.Partition
				rp.ErrorCode = code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	})
}

// Drop makes the broker close the connection of every request of key (a
// kmsg.Key, such as kmsg.OffsetCommit) for which fail returns true,
// unanswered, as a broker that restarts or a network that hiccups does.
// It lasts as long as the cluster.
func (c *Cluster) Drop(key kmsg.Key, fail func() bool) {
	c.fake.ControlKey(int16(key), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.fake.KeepControl()
		if !fail() {
			return nil, nil, false
		}
		return nil, errDropped, true
	})
}

// errDropped is what a control function returns to close a connection.
var errDropped = errors.New("kafkatest: connection dropped")
