package kafkaconn

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/segmentio/kafka-go"
)

// ErrGroupClosed is Group.Next's error once the group was closed.
var ErrGroupClosed = kafka.ErrGroupClosed

// GroupConfig says which consumer group a Group joins, for which topics,
// and how it keeps its place in it. A zero duration is kafka-go's
// default.
type GroupConfig struct {
	// ID is the consumer group. Required.
	ID string
	// Topics are the topics whose partitions the group shares out.
	// Required.
	Topics []string
	// HeartbeatInterval, SessionTimeout, RebalanceTimeout and
	// JoinGroupBackoff are the group protocol's timings (see
	// kafka.ConsumerGroupConfig).
	HeartbeatInterval, SessionTimeout, RebalanceTimeout, JoinGroupBackoff time.Duration
	// StartOffset is the offset a partition without a committed one
	// starts at: FirstOffset or LastOffset. Default (0) FirstOffset.
	StartOffset int64
	// OnError, when set, receives every error kafka-go reports while it
	// keeps the member in the group. Default (nil) none.
	OnError func(text string)
}

// Group is a member of a consumer group: kafka-go's ConsumerGroup, whose
// partitions are assigned by ranges in partition number order (see
// copartitioned), so that the members of a group reading two topics of
// as many partitions own the same partition numbers of both.
type Group struct {
	g *kafka.ConsumerGroup
}

// NewGroup starts joining the group of gc in the background.
func (c Config) NewGroup(gc GroupConfig) (*Group, error) {
	kc := kafka.ConsumerGroupConfig{
		ID:                gc.ID,
		Brokers:           c.Brokers,
		Dialer:            c.Dialer(),
		Topics:            gc.Topics,
		GroupBalancers:    []kafka.GroupBalancer{copartitioned{}},
		HeartbeatInterval: gc.HeartbeatInterval,
		SessionTimeout:    gc.SessionTimeout,
		RebalanceTimeout:  gc.RebalanceTimeout,
		JoinGroupBackoff:  gc.JoinGroupBackoff,
		StartOffset:       cmp.Or(gc.StartOffset, FirstOffset),
	}
	if gc.OnError != nil {
		kc.ErrorLogger = errorLogger(gc.OnError)
	}
	g, err := kafka.NewConsumerGroup(kc)
	if err != nil {
		return nil, err
	}
	return &Group{g: g}, nil
}

// Next waits for the member's next generation of the group: joined, and
// its partitions assigned. It returns ErrGroupClosed after Close; after
// another error kafka-go joins again by itself, and Next may be called
// again.
func (g *Group) Next(ctx context.Context) (*Generation, error) {
	gen, err := g.g.Next(ctx)
	if err != nil {
		return nil, err
	}
	a := make(map[string][]Assigned, len(gen.Assignments))
	for topic, parts := range gen.Assignments {
		as := make([]Assigned, len(parts))
		for i, p := range parts {
			// kafka-go gives the start offset (negative) for a partition
			// without a committed offset.
			as[i] = Assigned{Partition: p.ID, Committed: max(p.Offset, -1)}
		}
		a[topic] = as
	}
	return &Generation{ID: gen.ID, MemberID: gen.MemberID, Assignments: a, gen: gen}, nil
}

// Close ends the generation in service (its Start functions' contexts
// end, and Close waits for them) and leaves the group.
func (g *Group) Close() error { return g.g.Close() }

// Assigned is a partition assigned to the member in a generation.
type Assigned struct {
	Partition int
	// Committed is the group's committed offset of the partition when the
	// generation started (the next offset to read), or -1 when none is.
	Committed int64
}

// Generation is one generation of a consumer group as the member sees
// it.
type Generation struct {
	// ID is the coordinator's number of the generation; offset commits
	// carry it.
	ID int32
	// MemberID is the member's id in the group.
	MemberID string
	// Assignments are the partitions the member owns, by topic.
	Assignments map[string][]Assigned
	gen         *kafka.Generation
}

// Start runs fn on a goroutine of its own; fn's ctx ends when the
// generation does, and the member rejoins the group only once every
// function started returned.
func (g *Generation) Start(fn func(ctx context.Context)) { g.gen.Start(fn) }

// GenerationGone says whether err is the group coordinator's refusal of a
// commit from a generation that is over (the member's id unknown, another
// generation, a rebalance under way). Transient counts these, for a client
// that rejoins and commits again; a client that commits only in the
// generation that delivered the messages gives up on them instead.
func GenerationGone(err error) bool {
	return errors.Is(err, kafka.IllegalGeneration) || errors.Is(err, kafka.UnknownMemberId) || errors.Is(err, kafka.RebalanceInProgress)
}

// copartitioned is the range assignor over partitions in number order: every
// member gets the same partition numbers of every topic it reads (members
// sorted by id, the partitions of each topic cut alike), so I[p] and L[p] go
// together. kafka-go's RangeGroupBalancer cuts the partitions in the order
// the metadata lists them, which Kafka does not promise to be numeric (the
// in-process broker lists them in any order): the topics' cuts then cross.
// Its protocol name is the range assignor's, so members of either kind
// share a group.
type copartitioned struct{ kafka.RangeGroupBalancer }

func (b copartitioned) AssignGroups(members []kafka.GroupMember, partitions []kafka.Partition) kafka.GroupMemberAssignments {
	sorted := slices.Clone(partitions)
	slices.SortFunc(sorted, func(x, y kafka.Partition) int {
		return cmp.Or(cmp.Compare(x.Topic, y.Topic), cmp.Compare(x.ID, y.ID))
	})
	return b.RangeGroupBalancer.AssignGroups(members, sorted)
}
