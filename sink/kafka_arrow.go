package sink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/schemas"
)

// KafkaArrowSink writes records of scores (schemas.OutputSchema) to a
// Kafka topic as Arrow IPC streams. The rows of a record are grouped by
// the partition KafkaSink would write each of them to (the configured
// balancer's choice for the row's id in decimal as the key: by default
// the FNV-1a hash of the key, so one id always lands on one partition),
// and each group is one message: an IPC stream of one record batch of the
// record's schema, with the header content-type:
// application/vnd.apache.arrow.stream and no key. A group too large for
// one message (the writer's BatchBytes, or what the broker takes) is cut
// in halves until it fits. Write returns only when the broker has
// acknowledged every message (at least once, as KafkaSink). It is an
// AsyncWriter, as KafkaSink. The sink is not safe for concurrent use.
type KafkaArrowSink struct {
	topic    string
	w        *kafkaWriter
	client   *kafkaconn.Client
	balancer kafkaconn.KeyPartitioner // of rows, by their id
	mem      memory.Allocator
	schema   *arrow.Schema // the last schema checked to be an output schema
	key      []byte
	closed   bool
}

var _ AsyncWriter = (*KafkaArrowSink)(nil)

// NewKafkaArrow returns a Sink writing to cfg.Topic; mem allocates the
// records of groups of rows (nil: a Go allocator). It does not contact
// the brokers: the first Write does.
func NewKafkaArrow(cfg KafkaWriterConfig, mem memory.Allocator) (*KafkaArrowSink, error) {
	// The sink chooses each message's partition and says so in it.
	w, err := newKafkaWriter(cfg, true)
	if err != nil {
		return nil, fmt.Errorf("kafka arrow sink: %w", err)
	}
	if mem == nil {
		mem = memory.NewGoAllocator()
	}
	return &KafkaArrowSink{
		topic:  cfg.Topic,
		w:      w,
		client: w.w.Client(),
		mem:    mem,
	}, nil
}

// scoreGroup is rows of a record bound for one partition.
type scoreGroup struct {
	partition int
	rows      []int
	value     []byte // the rows as an IPC stream
}

// Write sends the rows of rec, one message per partition (or more, each
// within the size limits), and waits for the broker's acknowledgement of
// all of them (and of the flights before).
func (s *KafkaArrowSink) Write(ctx context.Context, rec arrow.Record) error {
	// The flight writes within ctx: it ends soon after ctx does.
	return waitFlight(s.start(ctx, ctx, rec))
}

// WriteAsync encodes the messages of the rows of rec and starts sending
// them; the flight ends when the broker has acknowledged all of them, or
// with the error Write would return.
func (s *KafkaArrowSink) WriteAsync(ctx context.Context, rec arrow.Record) (*Flight, error) {
	return s.start(ctx, s.w.ctx, rec)
}

// start encodes rec within ctx and starts its flight, which writes within
// flightCtx.
func (s *KafkaArrowSink) start(ctx, flightCtx context.Context, rec arrow.Record) (*Flight, error) {
	if s.closed {
		return nil, fmt.Errorf("kafka arrow sink %s: write: %w", s.topic, errClosed)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("kafka arrow sink %s: write: %w", s.topic, err)
	}
	if err := s.checkSchema(rec.Schema()); err != nil {
		return nil, fmt.Errorf("kafka arrow sink %s: %w", s.topic, err)
	}
	n := int(rec.NumRows())
	if n == 0 {
		return landed(nil), nil
	}
	partitions, err := s.partitions(ctx)
	if err != nil {
		return nil, fmt.Errorf("kafka arrow sink %s: %w", s.topic, err)
	}
	var todo []scoreGroup
	for _, g := range s.group(rec, partitions) {
		if todo, err = s.encode(rec, g, todo); err != nil {
			return nil, fmt.Errorf("kafka arrow sink %s: %w", s.topic, err)
		}
	}
	return s.w.fly(flightCtx, func(ctx context.Context) error {
		err := ctx.Err()
		if err == nil {
			err = s.send(ctx, todo)
		}
		if err != nil {
			return fmt.Errorf("kafka arrow sink %s: writing %d rows: %w", s.topic, n, err)
		}
		return nil
	}, nil), nil
}

// send writes the messages of todo and, where the broker refuses one as
// too large (its limit below the writer's), the halves of its rows, read
// back from the message, until every row is written. It runs on a
// flight's goroutine: it uses none of the sink's changing state.
func (s *KafkaArrowSink) send(ctx context.Context, todo []scoreGroup) error {
	for len(todo) > 0 {
		msgs := make([]kafkaconn.Message, len(todo))
		for i, g := range todo {
			msgs[i] = kafkaconn.Message{Partition: g.partition, Value: g.value,
				Headers: []kafkaconn.Header{{Key: schemas.HeaderContentType, Value: []byte(schemas.ArrowStreamType)}}}
		}
		refused, err := s.w.writeFitting(ctx, msgs)
		if err != nil {
			return err
		}
		var again []scoreGroup
		for _, i := range refused {
			if again, err = s.halve(todo[i], messageBytes(&msgs[i]), again); err != nil {
				return err
			}
		}
		todo = again
	}
	return nil
}

// halve appends the messages of the halves of the rows of g, a message
// of size bytes the broker refused as too large, to out.
func (s *KafkaArrowSink) halve(g scoreGroup, size int64, out []scoreGroup) ([]scoreGroup, error) {
	part, err := readIPC(g.value, s.mem)
	if err != nil {
		return out, fmt.Errorf("reading back a message of scores: %w", err)
	}
	defer part.Release()
	if part.NumRows() == 1 {
		return out, fmt.Errorf("the broker refuses the score of id %d alone, %d bytes: raise the topic's max.message.bytes",
			part.Column(0).(*array.Int64).Value(0), size)
	}
	rows := make([]int, part.NumRows())
	for i := range rows {
		rows[i] = i
	}
	half := len(rows) / 2
	for _, rows := range [][]int{rows[:half], rows[half:]} {
		if out, err = s.encode(part, scoreGroup{partition: g.partition, rows: rows}, out); err != nil {
			return out, err
		}
	}
	return out, nil
}

// readIPC returns the one record of an IPC stream written by EncodeIPC.
func readIPC(value []byte, mem memory.Allocator) (arrow.Record, error) {
	r, err := ipc.NewReader(bytes.NewReader(value), ipc.WithAllocator(mem))
	if err != nil {
		return nil, err
	}
	defer r.Release()
	if !r.Next() {
		return nil, errors.Join(errors.New("no record batch"), r.Err())
	}
	rec := r.Record()
	rec.Retain()
	return rec, nil
}

// checkSchema checks that schema is an output schema, which the groups of
// rows are rebuilt in.
func (s *KafkaArrowSink) checkSchema(schema *arrow.Schema) error {
	if schema == s.schema {
		return nil
	}
	width := func(name string) int {
		if at := schema.FieldIndices(name); len(at) == 1 {
			if t, ok := schema.Field(at[0]).Type.(*arrow.FixedSizeListType); ok {
				return int(t.Len())
			}
		}
		return 0
	}
	decision, views := width(schemas.FieldDecision), width(schemas.FieldContributions)
	if decision == 0 || !schema.Equal(schemas.OutputSchema(decision, views, views > 0)) {
		return fmt.Errorf("records of %v are not scores (schemas.OutputSchema)", schema)
	}
	s.schema = schema
	return nil
}

// partitions lists the topic's partitions, from the metadata the writer's
// transport keeps (and refreshes), retrying a transient failure.
func (s *KafkaArrowSink) partitions(ctx context.Context) ([]int, error) {
	var n int
	err := s.w.retry.Do(ctx, func() error {
		md, err := s.client.Metadata(ctx, s.topic)
		if err != nil {
			return err
		}
		n = len(md.Topics[0].Partitions)
		return md.Topics[0].Err
	}, func(err error, pause time.Duration) {
		s.w.logger.Warn("kafka: reading the partitions failed, retrying", "topic", s.topic, "in", pause, "err", err)
	})
	switch {
	case err != nil:
		return nil, fmt.Errorf("partitions: %w", err)
	case n == 0:
		return nil, errors.New("partitions: the topic has none")
	}
	parts := make([]int, n)
	for i := range parts {
		parts[i] = i
	}
	return parts, nil
}

// group returns the rows of rec by partition, in partition order, each
// group's rows in record order.
func (s *KafkaArrowSink) group(rec arrow.Record, partitions []int) []scoreGroup {
	ids := rec.Column(0).(*array.Int64)
	byPartition := make(map[int][]int)
	for i := range int(rec.NumRows()) {
		var key []byte
		if ids.IsValid(i) {
			s.key = strconv.AppendInt(s.key[:0], ids.Value(i), 10)
			key = s.key
		}
		p := s.balancer.Partition(key, partitions)
		byPartition[p] = append(byPartition[p], i)
	}
	groups := make([]scoreGroup, 0, len(byPartition))
	for p, rows := range byPartition {
		groups = append(groups, scoreGroup{partition: p, rows: rows})
	}
	slices.SortFunc(groups, func(a, b scoreGroup) int { return a.partition - b.partition })
	return groups
}

// encode appends g's rows as messages to out: one, or, when that one is
// larger than the writer takes, those of each half of the rows.
func (s *KafkaArrowSink) encode(rec arrow.Record, g scoreGroup, out []scoreGroup) ([]scoreGroup, error) {
	value, err := s.stream(rec, g.rows)
	if err != nil {
		return out, err
	}
	g.value = value
	m := kafkaconn.Message{Value: value, Headers: []kafkaconn.Header{{Key: schemas.HeaderContentType, Value: []byte(schemas.ArrowStreamType)}}}
	if messageBytes(&m) <= s.w.cfg.BatchBytes {
		return append(out, g), nil
	}
	if len(g.rows) == 1 {
		return out, fmt.Errorf("the score of id %d alone takes %d bytes, more than the writer's %d (BatchBytes)",
			rec.Column(0).(*array.Int64).Value(g.rows[0]), messageBytes(&m), s.w.cfg.BatchBytes)
	}
	half := len(g.rows) / 2
	if out, err = s.encode(rec, scoreGroup{partition: g.partition, rows: g.rows[:half]}, out); err != nil {
		return out, err
	}
	return s.encode(rec, scoreGroup{partition: g.partition, rows: g.rows[half:]}, out)
}

// stream returns rows of rec as an IPC stream: rec itself when they are
// all its rows, a record of those rows otherwise.
func (s *KafkaArrowSink) stream(rec arrow.Record, rows []int) ([]byte, error) {
	if len(rows) == int(rec.NumRows()) {
		return schemas.EncodeIPC(rec, s.mem)
	}
	b := schemas.NewOutputBuilder(s.mem, rec.Schema())
	defer b.Release()
	b.Reserve(len(rows))
	ids := rec.Column(0).(*array.Int64)
	versions := rec.Column(1).(*array.String)
	pred := rec.Column(2).(*array.Float64)
	decision, decisionWidth := listRows(rec.Column(3))
	contributions, views := []float64(nil), 0
	if rec.NumCols() > 4 {
		contributions, views = listRows(rec.Column(4))
	}
	for _, i := range rows {
		var contrib []float64
		if views > 0 {
			contrib = contributions[i*views : (i+1)*views]
		}
		b.Append(ids.Value(i), versions.Value(i), pred.Value(i), decision[i*decisionWidth:(i+1)*decisionWidth], contrib)
	}
	part := b.NewRecord()
	defer part.Release()
	return schemas.EncodeIPC(part, s.mem)
}

// listRows returns the row-major values of a fixed-size list column of
// float64 and its width.
func listRows(col arrow.Array) ([]float64, int) {
	l := col.(*array.FixedSizeList)
	width := int(l.DataType().(*arrow.FixedSizeListType).Len())
	values := l.ListValues().(*array.Float64).Float64Values()
	return values[l.Offset()*width : (l.Offset()+l.Len())*width], width
}

// Close waits for the flights under way, then closes the writer and its
// connections, within ctx. Closing twice is a no-op.
func (s *KafkaArrowSink) Close(ctx context.Context) error {
	if s.closed {
		return nil
	}
	s.closed = true
	if err := s.w.close(ctx); err != nil {
		return fmt.Errorf("kafka arrow sink %s: close: %w", s.topic, err)
	}
	return nil
}
