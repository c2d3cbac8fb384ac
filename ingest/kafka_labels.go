package ingest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mvml/mvml/kafkaconn"

	"github.com/mvml/mvml/schemas"
)

// Label is one message of a labels topic: the label of the record with
// this id, wherever and whenever that record arrives.
type Label struct {
	// Partition and Offset locate the message in the labels topic; Time
	// is its timestamp.
	Partition int
	Offset    int64
	Time      time.Time
	// ID is the id of the record labelled.
	ID int64
	// Value is the label: a class or a target value. Null says the message
	// gave null instead (no label is known); Value is then 0.
	Value float64
	Null  bool
}

// LabelBatch is a batch of messages of a labels topic.
type LabelBatch struct {
	// Topic is the labels topic.
	Topic string
	// Generation is the group generation that delivered the batch; its
	// offsets are committed with CommitLabels(ctx, Generation, …).
	Generation int32
	// Labels are the messages decoded, in the order fetched (by offset
	// within a partition).
	Labels []Label
	// Rejects are the messages that could not be decoded, located like the
	// rejects of records (Source "topic/partition", Row the offset,
	// Payload the message) for a dead-letter topic.
	Rejects []schemas.RowError
}

// newLabelDecoder returns a decoder of label messages: a JSON object with
// the spec's id field (an integer) and label field (a number or null).
// It reads them as records are read — strictly, a field given twice
// refused — and ignores other fields, which producers may add (the source
// of the label, say).
func newLabelDecoder(spec *schemas.ViewSpec) *kafkaDecoder {
	return newKafkaDecoder(&schemas.ViewSpec{ID: spec.ID, Label: spec.Label}, false)
}

// decodeLabel decodes one label message with d, a label decoder.
func decodeLabel(d *kafkaDecoder, value []byte) *rowError {
	if bad := d.decode(value, nil); bad != nil { // a label message has no views
		return bad
	}
	if !d.sawLabel {
		// Unlike a record, a label message has no other use.
		return &rowError{column: d.spec.Label, reason: fmt.Sprintf("label field %q is missing (null says no label is known)", d.spec.Label)}
	}
	return nil
}

// decodeLabels decodes msgs of a labels topic into one batch.
func decodeLabels(d *kafkaDecoder, topic string, msgs []kafkaconn.Message) LabelBatch {
	b := LabelBatch{Topic: topic, Labels: make([]Label, 0, len(msgs))}
	for i := range msgs {
		m := &msgs[i]
		if bad := decodeLabel(d, m.Value); bad != nil {
			b.Rejects = append(b.Rejects, messageReject(topic, m, bad))
			continue
		}
		b.Labels = append(b.Labels, Label{Partition: m.Partition, Offset: m.Offset, Time: m.Time, ID: d.id, Value: d.label, Null: !d.hasLabel})
	}
	return b
}

// errNoLabelsTopic is the error of NextLabels and CommitLabels on a source
// without a labels topic.
var errNoLabelsTopic = errors.New("ingest: kafka: no labels topic (KafkaConfig.LabelsTopic)")

// NextLabels waits for at least one message of the labels topic, then
// takes more as Next does (what has arrived, and more while more are
// known to be coming, up to Options.BatchSize and KafkaConfig.MaxWait),
// and decodes them into one batch; the messages of a batch come from one
// generation of the group. Labels of a partition are delivered only
// after KafkaConfig.OnAssign returned for its generation, from the
// group's committed offset: those delivered in an earlier generation and
// not committed are delivered again. Nothing is committed until
// CommitLabels is called.
//
// When ctx is done before a message arrives, NextLabels returns ctx's
// error (wrapped); when it is done while a batch is being filled, the
// messages taken so far are returned first. After Close it returns io.EOF.
func (s *KafkaSource) NextLabels(ctx context.Context) (LabelBatch, error) {
	switch {
	case s.cfg.LabelsTopic == "":
		return LabelBatch{}, errNoLabelsTopic
	case s.closed:
		return LabelBatch{}, io.EOF
	}
	g, msgs, err := s.take(ctx, true)
	if err != nil {
		return LabelBatch{}, fmt.Errorf("ingest: kafka %s: %w", s.cfg.LabelsTopic, err)
	}
	s.health.progressed(time.Now())
	b := decodeLabels(s.labelDec, s.cfg.LabelsTopic, msgs)
	b.Generation = g.a.Generation
	return b, nil
}

// CommitLabels commits, in the group's generation generation, the offset
// of each partition of the labels topic in offsets: the next offset to
// read, all messages before it being done with. An offset at or below one
// already committed in the generation is left as it is. When the
// generation is over, nothing is committed (it is logged): the partitions'
// owner in the generation that followed reads those labels again. A
// transient failure is tried again as KafkaConfig.Conn.Retry says.
//
// It may be called from any goroutine, from KafkaConfig.OnRevoke too, but
// not after Close returned. Offsets of a partition the member was not
// assigned in that generation are an error.
func (s *KafkaSource) CommitLabels(ctx context.Context, generation int32, offsets map[int]int64) error {
	return s.CommitLabelsHandled(ctx, generation, offsets, nil)
}

// CommitLabelsHandled is CommitLabels that also records, with the offset
// of a partition, the offset below which every message of it was handled
// (handled, when above the offset committed): the labels after the oldest
// one still waiting, say, which a new owner reads again from the committed
// offset and must not handle twice (a message that is not a label is
// dead-lettered once). The next generation's assignment carries it
// (Assignment.LabelsHandled), wherever it runs.
func (s *KafkaSource) CommitLabelsHandled(ctx context.Context, generation int32, offsets, handled map[int]int64) error {
	if s.cfg.LabelsTopic == "" {
		return errNoLabelsTopic
	}
	s.labelMu.Lock()
	defer s.labelMu.Unlock()
	if s.left {
		return fmt.Errorf("ingest: kafka %s: committing offsets: %w", s.cfg.LabelsTopic, errSourceClosed)
	}
	g, _, _ := s.watch()
	if g == nil || g.a.Generation != generation {
		s.opts.Logger.Info("ingest: kafka: offsets not committed, the generation that delivered them is over: their messages will be delivered again",
			"topic", s.cfg.LabelsTopic, "group", s.cfg.GroupID, "generation", generation, "offsets", fmt.Sprint(offsets))
		return nil
	}
	todo := make([]partitionOffset, 0, len(offsets))
	for _, p := range slices.Sorted(maps.Keys(offsets)) {
		if _, ok := g.a.Labels[p]; !ok {
			return fmt.Errorf("ingest: kafka %s: committing offsets: partition %d is not assigned to this member in generation %d", s.cfg.LabelsTopic, p, generation)
		}
		if offsets[p] < 0 {
			return fmt.Errorf("ingest: kafka %s: committing offsets: partition %d: offset %d is negative", s.cfg.LabelsTopic, p, offsets[p])
		}
		o := partitionOffset{partition: p, offset: offsets[p]}
		if h, ok := handled[p]; ok && h > o.offset {
			o.meta = handledMeta(h)
		}
		todo = append(todo, o)
	}
	return s.commit(ctx, g, s.cfg.LabelsTopic, todo)
}

// handledPrefix begins the metadata of a labels offset committed with the
// offset below which every message was handled (CommitLabelsHandled).
const handledPrefix = "mvml-handled:"

func handledMeta(handled int64) string { return handledPrefix + strconv.FormatInt(handled, 10) }

// parseHandled returns the offset below which every message was handled
// that meta records, if it records one.
func parseHandled(meta string) (int64, bool) {
	rest, ok := strings.CutPrefix(meta, handledPrefix)
	if !ok {
		return 0, false
	}
	h, err := strconv.ParseInt(rest, 10, 64)
	return h, err == nil && h >= 0
}

// labelsHandled reads, for the partitions of the labels topic in
// committed (with the offsets the generation starts from), the offset
// below which every message was handled that their last commit recorded
// (Assignment.LabelsHandled). It retries transient failures as
// KafkaConfig.Conn.Retry says; when it cannot read them it says so and
// returns none: those messages are then handled again.
func (s *KafkaSource) labelsHandled(ctx context.Context, committed map[int]int64) map[int]int64 {
	parts := slices.Sorted(maps.Keys(committed))
	var resp map[int]kafkaconn.Committed
	err := s.cfg.Conn.Retry.Do(ctx, func() error {
		attempt, cancel := context.WithTimeout(ctx, commitTimeout)
		defer cancel()
		var err error
		resp, err = s.client.CommittedOffsets(attempt, s.cfg.GroupID, s.cfg.LabelsTopic, parts)
		return err
	}, func(err error, pause time.Duration) {
		s.opts.Logger.Warn("ingest: kafka: reading the committed offsets of the labels failed, retrying", "topic", s.cfg.LabelsTopic, "group", s.cfg.GroupID, "in", pause, "err", err)
	})
	if err != nil {
		if ctx.Err() == nil {
			s.opts.Logger.Warn("ingest: kafka: the labels handled before the committed offsets are unknown: they are handled again",
				"topic", s.cfg.LabelsTopic, "group", s.cfg.GroupID, "err", err)
		}
		return nil
	}
	handled := map[int]int64{}
	for partition, c := range resp {
		next, ok := committed[partition]
		if !ok || c.Err != nil || c.Offset != next {
			continue
		}
		if h, ok := parseHandled(c.Metadata); ok && h > next {
			handled[partition] = h
		}
	}
	return handled
}
