package ingest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/mvml/mvml/internal/arrowalloc"
	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/schemas"
)

// Defaults of KafkaConfig.
const (
	DefaultKafkaMaxWait           = 250 * time.Millisecond
	DefaultKafkaMinBytes          = 1
	DefaultKafkaMaxBytes          = 10 << 20
	DefaultKafkaHeartbeatInterval = 3 * time.Second
	DefaultKafkaSessionTimeout    = 30 * time.Second
	DefaultKafkaRebalanceTimeout  = 30 * time.Second
	DefaultKafkaJoinGroupBackoff  = 5 * time.Second
)

// The start offsets of KafkaConfig.StartOffset, as kafka-go numbers them.
const (
	// KafkaOldest starts at the oldest message kept.
	KafkaOldest = kafka.FirstOffset
	// KafkaNewest starts with the messages produced from now on.
	KafkaNewest = kafka.LastOffset
)

// commitTimeout bounds one try of an offset commit: a coordinator that
// does not answer costs a retry (kafkaconn.Retry), not a hung service.
const commitTimeout = 10 * time.Second

// transientRetryPause is how long a fetch waits after a transient error
// before it asks kafka-go again, which paces its own retries: a floor, so
// that an error returned at once again cannot spin.
const transientRetryPause = 100 * time.Millisecond

// KafkaConfig says where a KafkaSource reads.
type KafkaConfig struct {
	// Conn says how to reach the brokers (addresses, TLS, SASL). Required:
	// its Brokers.
	Conn kafkaconn.Config
	// Topic is the input topic of records. Required.
	Topic string
	// Format says how its messages are read: by their content-type header
	// (FormatByHeader: an Arrow IPC stream when it says
	// schemas.ArrowStreamType, a JSON object otherwise), or all as JSON
	// objects (FormatJSON) or all as Arrow IPC streams (FormatArrow).
	// Default (0) FormatByHeader.
	Format Format
	// LabelsTopic, when set, is a topic of labels read by the same group
	// (see KafkaSource.NextLabels): each member owns partition p of both
	// topics together, so it must have as many partitions as Topic (a
	// generation that finds otherwise fails the source), and both must be
	// keyed by id with the same partitioner. Default ("") none.
	LabelsTopic string
	// GroupID is the consumer group. Required: the group's offsets are
	// committed to Kafka by Batch.Ack (and KafkaSource.CommitLabels), and
	// partitions are shared among the group's members.
	GroupID string
	// MaxWait is the longest Next waits to fill a batch once it has at
	// least one message. It waits only while more messages are known to
	// be coming (fetched, or on the broker below the high-water mark a
	// fetch reported): when none are, a batch holds what has arrived and
	// is returned at once, so that at light load records are not held
	// for a batch that will not fill. Default (0) DefaultKafkaMaxWait,
	// 250ms.
	MaxWait time.Duration
	// MinBytes is the least data a fetch asks the broker for before it
	// answers (within MaxWait). Default (0) 1 byte.
	MinBytes int
	// MaxBytes is the most data one fetch returns. Default (0) 10 MiB.
	MaxBytes int
	// StartOffset is where a group that has no committed offset for a
	// partition starts: KafkaOldest (the oldest message kept) or
	// KafkaNewest (only messages produced from now on). Default (0)
	// KafkaOldest.
	StartOffset int64
	// HeartbeatInterval is how often the member tells the group
	// coordinator it is alive; it is also how soon it learns that the
	// group rebalances. Default (0) DefaultKafkaHeartbeatInterval, 3s.
	HeartbeatInterval time.Duration
	// SessionTimeout is how long the coordinator waits for a heartbeat
	// before it gives a silent member's partitions to the others: the
	// records of a member that crashed wait that long. Brokers accept 6s
	// to 5 minutes unless configured otherwise. Default (0)
	// DefaultKafkaSessionTimeout, 30s.
	SessionTimeout time.Duration
	// RebalanceTimeout is how long the coordinator waits for the members
	// to rejoin when the group rebalances; a member that does not is
	// dropped from the group. A member ends its generation (waits for its
	// batches to be acked, calls OnRevoke) within two thirds of it, so
	// that it rejoins in time. Default (0) DefaultKafkaRebalanceTimeout,
	// 30s.
	RebalanceTimeout time.Duration
	// JoinGroupBackoff is how long the member waits before it joins the
	// group again after a join failed (the coordinator unreachable, or
	// its member id unknown to it after an eviction); a join refused
	// because the group rebalances is tried again at once. Default (0)
	// DefaultKafkaJoinGroupBackoff, 5s, kafka-go's.
	JoinGroupBackoff time.Duration
	// OnAssign, when set, is called at the start of every generation of
	// the group with what this member owns, before any label of it is
	// delivered: the place to restore the state of newly owned partitions
	// (see NewKafkaRange and KafkaRangeConfig.Ends). Records flow
	// meanwhile. It is called on the source's own goroutine; ctx ends when
	// the generation does, and then its error is ignored; any other error
	// fails the source (Next and NextLabels return it).
	OnAssign func(ctx context.Context, a Assignment) error
	// OnRevoke, when set, is called when a generation ends (a rebalance, or
	// Close), after the record batches delivered in it were acked (or two
	// thirds of RebalanceTimeout passed) and before the member rejoins the
	// group, so that nobody owns its partitions yet: the place to publish
	// what was gathered from them and commit their labels (CommitLabels
	// with a.Generation still works). ctx ends at that same bound.
	OnRevoke func(ctx context.Context, a Assignment)
}

func (c KafkaConfig) resolve() (KafkaConfig, error) {
	if c.GroupID == "" {
		return c, errors.New("ingest: kafka: no consumer group (GroupID)")
	}
	if err := resolveFetch(c.Conn, c.Topic, &c.MaxWait, &c.MinBytes, &c.MaxBytes); err != nil {
		return c, err
	}
	if c.Format > FormatArrow {
		return c, fmt.Errorf("ingest: kafka: Format %v: want FormatByHeader, FormatJSON or FormatArrow", c.Format)
	}
	if c.LabelsTopic == c.Topic {
		return c, fmt.Errorf("ingest: kafka: the labels topic is the input topic %q: give a topic of labels of its own", c.Topic)
	}
	switch c.StartOffset {
	case 0:
		c.StartOffset = KafkaOldest
	case KafkaOldest, KafkaNewest:
	default:
		return c, fmt.Errorf("ingest: kafka: StartOffset %d: want KafkaOldest (%d) or KafkaNewest (%d)", c.StartOffset, KafkaOldest, KafkaNewest)
	}
	if c.HeartbeatInterval < 0 || c.SessionTimeout < 0 || c.RebalanceTimeout < 0 || c.JoinGroupBackoff < 0 {
		return c, fmt.Errorf("ingest: kafka: HeartbeatInterval %v, SessionTimeout %v, RebalanceTimeout %v and JoinGroupBackoff %v must not be negative",
			c.HeartbeatInterval, c.SessionTimeout, c.RebalanceTimeout, c.JoinGroupBackoff)
	}
	c.HeartbeatInterval = cmp.Or(c.HeartbeatInterval, DefaultKafkaHeartbeatInterval)
	c.SessionTimeout = cmp.Or(c.SessionTimeout, DefaultKafkaSessionTimeout)
	c.RebalanceTimeout = cmp.Or(c.RebalanceTimeout, DefaultKafkaRebalanceTimeout)
	c.JoinGroupBackoff = cmp.Or(c.JoinGroupBackoff, DefaultKafkaJoinGroupBackoff)
	if c.HeartbeatInterval >= c.SessionTimeout {
		return c, fmt.Errorf("ingest: kafka: HeartbeatInterval %v must be shorter than SessionTimeout %v", c.HeartbeatInterval, c.SessionTimeout)
	}
	return c, nil
}

// resolveFetch checks the settings both Kafka sources share and fills in
// their defaults.
func resolveFetch(conn kafkaconn.Config, topic string, maxWait *time.Duration, minBytes, maxBytes *int) error {
	if err := conn.Validate(); err != nil {
		return fmt.Errorf("ingest: kafka: %w", err)
	}
	switch {
	case topic == "":
		return errors.New("ingest: kafka: no topic")
	case *maxWait < 0:
		return fmt.Errorf("ingest: kafka: MaxWait %v must not be negative", *maxWait)
	case *minBytes < 0 || *maxBytes < 0:
		return fmt.Errorf("ingest: kafka: MinBytes %d and MaxBytes %d must not be negative", *minBytes, *maxBytes)
	}
	if *maxWait == 0 {
		*maxWait = DefaultKafkaMaxWait
	}
	if *minBytes == 0 {
		*minBytes = DefaultKafkaMinBytes
	}
	if *maxBytes == 0 {
		*maxBytes = DefaultKafkaMaxBytes
	}
	if *minBytes > *maxBytes {
		return fmt.Errorf("ingest: kafka: MinBytes %d exceeds MaxBytes %d", *minBytes, *maxBytes)
	}
	return nil
}

// KafkaSource reads JSON messages from a Kafka topic as a member of a
// consumer group (see the package documentation for the message format)
// and, with KafkaConfig.LabelsTopic, the labels of a co-partitioned topic
// (NextLabels). A topic has no end: Next waits for messages, and returns
// io.EOF only after Close.
//
// The group is kafka-go's ConsumerGroup: in every generation the member
// reads each partition it was assigned with a reader of its own, from the
// group's committed offset, so messages delivered in an earlier generation
// and not committed are delivered again. Offsets are committed only by
// Batch.Ack and CommitLabels, in the generation that delivered the
// messages; a commit that fails for a transient reason (the group
// coordinator moving, a dropped connection) is tried again as
// KafkaConfig.Conn.Retry says, and one whose generation is over is left
// out, since the partitions' new owner reads those messages again: every
// message not committed is delivered again after a restart or a rebalance
// (at least once). When the group rebalances, the member finishes its
// generation before it rejoins: it stops delivering, waits for the record
// batches delivered to be acked, and calls KafkaConfig.OnRevoke, so that
// the usual rebalance costs no redelivery. While the brokers cannot be
// reached or the group rebalances, Next keeps waiting (kafka-go reconnects
// and rejoins by itself) and Ready says why it does not consume; only
// errors that waiting cannot mend (a refused authentication or
// authorisation, topics that are not co-partitioned, a failed OnAssign)
// end it.
//
// Next and Close must not be called concurrently, nor NextLabels and
// Close; Next and NextLabels may run at once, each on its own goroutine.
// To stop a Next or NextLabels that waits, cancel its context. Batch.Ack,
// CommitLabels and Ready may be called from any goroutine.
type KafkaSource struct {
	cfg      KafkaConfig
	opts     Options
	dec      *recordDecoder // of records, used by Next only
	labelDec *kafkaDecoder  // of labels, used by NextLabels only
	rb       *schemas.RecordBuilder
	recycled *arrowalloc.Recycler // rb's allocator
	health   *kafkaHealth
	totals   readerTotals
	closed   bool

	group     *kafka.ConsumerGroup
	transport *kafka.Transport
	// client commits offsets and reads metadata: its connections are its
	// own, so a commit outlives a dropped connection of the group's
	// heartbeats, which Generation.CommitOffsets shares.
	client *kafka.Client
	// ctx ends with Close; running counts the goroutine that follows the
	// group's generations.
	ctx     context.Context
	cancel  context.CancelFunc
	running sync.WaitGroup

	// mu guards the generation in service, cur (nil between generations),
	// and err, the failure that ended the source; changed is closed and
	// replaced whenever either changes.
	mu      sync.Mutex
	cur     *groupGen
	err     error
	changed chan struct{}

	// ackMu serialises the commits of records and Close. closing is set,
	// and closingCh closed, when Close starts: later Acks fail. deferred
	// are the batches acked with DeferCommit whose offsets the next Ack
	// commits.
	ackMu     sync.Mutex
	closing   bool
	closingCh chan struct{}
	deferred  []deferredAck
	// labelMu serialises the commits of labels apart, so that they never
	// wait for an Ack that retries; left is set once the member left the
	// group: later CommitLabels fail.
	labelMu sync.Mutex
	left    bool
}

var _ Source = (*KafkaSource)(nil)

// errSourceClosed is the error of an Ack after Close.
var errSourceClosed = errors.New("source is closed")

// NewKafka returns a Source reading cfg.Topic (and cfg.LabelsTopic) in
// consumer group cfg.GroupID. Options.BatchSize caps the messages of a
// batch (of records or of labels), Options.Allocator allocates the
// records, Options.RequireLabel rejects records without a label, and
// Options.Logger receives the generations and kafka-go's error reports.
// It starts joining the group at once, in the background (Ready tells
// when it has); the first Next waits for a message.
func NewKafka(spec *schemas.ViewSpec, cfg KafkaConfig, opts Options) (*KafkaSource, error) {
	if spec == nil {
		return nil, errors.New("ingest: nil view spec")
	}
	opts, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	if cfg, err = cfg.resolve(); err != nil {
		return nil, err
	}
	health := &kafkaHealth{group: cfg.GroupID}
	s := &KafkaSource{
		cfg:       cfg,
		opts:      opts,
		dec:       newRecordDecoder(spec, cfg.Format, opts.RequireLabel, opts.Allocator),
		labelDec:  newLabelDecoder(spec),
		health:    health,
		transport: cfg.Conn.Transport(),
		changed:   make(chan struct{}),
		closingCh: make(chan struct{}),
	}
	// A partition reader's configuration is checked now rather than by
	// the panic of kafka.NewReader at the first generation.
	rc := s.readerConfig(cfg.Topic, 0)
	if err := rc.Validate(); err != nil {
		return nil, fmt.Errorf("ingest: kafka: %w", err)
	}
	s.client = &kafka.Client{Addr: cfg.Conn.Addr(), Transport: s.transport}
	topics := []string{cfg.Topic}
	if cfg.LabelsTopic != "" {
		topics = append(topics, cfg.LabelsTopic)
	}
	s.group, err = kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID:                cfg.GroupID,
		Brokers:           cfg.Conn.Brokers,
		Dialer:            cfg.Conn.Dialer(),
		Topics:            topics,
		GroupBalancers:    []kafka.GroupBalancer{copartitioned{}},
		HeartbeatInterval: cfg.HeartbeatInterval,
		SessionTimeout:    cfg.SessionTimeout,
		RebalanceTimeout:  cfg.RebalanceTimeout,
		JoinGroupBackoff:  cfg.JoinGroupBackoff,
		StartOffset:       cfg.StartOffset,
		ErrorLogger:       s.kafkaLogger(cfg.Topic, -1),
	})
	if err != nil {
		s.transport.CloseIdleConnections()
		return nil, fmt.Errorf("ingest: kafka: %w", err)
	}
	s.recycled = arrowalloc.New(opts.Allocator, arrowalloc.Options{})
	s.rb = schemas.NewRecordBuilder(s.recycled, spec)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.running.Go(s.follow)
	return s, nil
}

// kafkaLogger returns kafka-go's error logger for topic (and partition, if
// not negative): every line is logged and counts against readiness.
func (s *KafkaSource) kafkaLogger(topic string, partition int) kafka.Logger {
	logger := s.opts.Logger.With("topic", topic, "group", s.cfg.GroupID)
	if partition >= 0 {
		logger = logger.With("partition", partition)
	}
	return kafka.LoggerFunc(func(msg string, args ...any) {
		text := fmt.Sprintf(msg, args...)
		s.health.failed(time.Now(), text)
		logger.Warn("ingest: kafka: " + text)
	})
}

// Next waits for at least one record message, then takes every message
// that has arrived and waits for more while more are known to be coming,
// until it has Options.BatchSize of them or KafkaConfig.MaxWait has
// passed, and decodes them into one batch: Batch.Source is the topic,
// Batch.Rows and Batch.Partitions hold each record row's offset and
// partition (and Batch.Times its timestamp), and every message that
// cannot be decoded is a reject with Source "topic/partition", Row its
// offset and Payload its value (empty, not nil, for an empty or null
// message). Batch.Ack commits the batch's offsets. The messages of a
// batch come from one generation of the group.
//
// When ctx is done before a message arrives, Next returns ctx's error
// (wrapped); when it is done while a batch is being filled, the messages
// taken so far are returned first.
func (s *KafkaSource) Next(ctx context.Context) (Batch, error) {
	if s.closed {
		return Batch{}, io.EOF
	}
	g, msgs, err := s.take(ctx, false)
	if err != nil {
		return Batch{}, fmt.Errorf("ingest: kafka %s: %w", s.cfg.Topic, err)
	}
	s.health.progressed(time.Now())
	b := decodeKafkaBatch(s.dec, s.rb, s.cfg.Topic, msgs)
	b.Ack = s.acker(g, msgs)
	return b, nil
}

// Ready reports whether the source is consuming: nil once it has joined
// its group or fetched from the brokers with no error reported since,
// otherwise why not (still joining; the last error, and since when). It
// judges by the partition readers' counters since the last call.
func (s *KafkaSource) Ready() error {
	s.totals.collect(s.currentReaders(), true)
	return s.health.ready(s.totals.sinceReady(), time.Now())
}

// kafkaHealth is what Ready judges by: when the source last showed
// progress and when kafka-go last reported an error.
type kafkaHealth struct {
	group    string
	mu       sync.Mutex
	progress time.Time
	failure  time.Time
	lastErr  string
}

func (h *kafkaHealth) failed(at time.Time, text string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failure, h.lastErr = at, text
}

func (h *kafkaHealth) progressed(at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.progress = at
}

// ready updates the progress from the readers' counters since the last
// call, st, and judges at now. Activity without an error among it is
// progress; with errors among it the order is unknown, and the errors
// count until activity alone shows again.
func (h *kafkaHealth) ready(st kafka.ReaderStats, now time.Time) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if st.Errors == 0 && st.Rebalances+st.Fetches+st.Messages > 0 {
		h.progress = now
	}
	switch {
	case h.progress.IsZero() && h.failure.IsZero():
		return fmt.Errorf("joining consumer group %s", h.group)
	case !h.failure.Before(h.progress):
		return fmt.Errorf("not consuming since %s: %s", h.failure.UTC().Format(time.RFC3339), h.lastErr)
	}
	return nil
}

// decodeKafkaBatch decodes msgs of topic into one batch: the records in
// one Arrow record built by rb, with their offsets, partitions and
// timestamps, and
// every message that does not decode as a reject located by partition and
// offset, carrying its value. A message that is an Arrow IPC stream gives
// its rows (see arrowDecoder).
func decodeKafkaBatch(dec *recordDecoder, rb *schemas.RecordBuilder, topic string, msgs []kafka.Message) Batch {
	b := Batch{Source: topic}
	if len(msgs) == 1 && dec.isArrow(&msgs[0]) {
		dec.arrow.decodeAlone(&b, rb, topic, &msgs[0])
		return b
	}
	// A row per message, unless Arrow messages bring more.
	b.Rows = make([]int64, 0, len(msgs))
	b.Partitions = make([]int32, 0, len(msgs))
	b.Times = make([]time.Time, 0, len(msgs))
	rb.Reserve(len(msgs))
	rest := 0 // the bytes of the messages from msgs[i] on
	for i := range msgs {
		rest += len(msgs[i].Value)
	}
	for i := range msgs {
		m := &msgs[i]
		restBytes := rest
		rest -= len(m.Value)
		if dec.isArrow(m) {
			dec.arrow.decodeInto(&b, rb, topic, m, restBytes)
			continue
		}
		// The views are decoded straight into the next row of the record's
		// buffers; a rejected message's row is written over by the next.
		row := rb.Len()
		if row == rb.Cap() { // Arrow messages took the rows reserved
			rb.Reserve(2 * row)
		}
		for l := range dec.views {
			dim := rb.Dim(l)
			dec.views[l] = rb.View(l)[row*dim : (row+1)*dim : (row+1)*dim]
		}
		if bad := dec.json.decode(m.Value, dec.views); bad != nil {
			b.Rejects = append(b.Rejects, messageReject(topic, m, bad))
			continue
		}
		rb.IDs()[row] = dec.json.id
		rb.SetLabel(row, dec.json.label, dec.json.hasLabel)
		rb.SetLen(row + 1)
		b.Rows = append(b.Rows, m.Offset)
		b.Partitions = append(b.Partitions, int32(m.Partition))
		b.Times = append(b.Times, m.Time)
	}
	b.Record = rb.NewRecord()
	dec.arrow.setRowPayload(&b)
	return b
}

// messageReject is the reject of message m of topic, for the reason bad.
func messageReject(topic string, m *kafka.Message, bad *rowError) schemas.RowError {
	payload := m.Value
	if payload == nil {
		// kafka-go reads an empty and a null message alike as nil; either
		// is a payload, empty, and not the absence of one.
		payload = []byte{}
	}
	return schemas.RowError{
		Source:  partitionSource(topic, m.Partition),
		Row:     m.Offset,
		Column:  bad.column,
		Reason:  bad.reason,
		Payload: payload,
	}
}

// partitionSource names a partition of a topic as rejects and dead letters
// do: "topic/partition".
func partitionSource(topic string, partition int) string {
	return topic + "/" + strconv.Itoa(partition)
}

// deferCommitKey marks the context of an Ack given DeferCommit.
type deferCommitKey struct{}

// DeferCommit returns ctx for the Ack of a batch that is followed at once
// by the Ack of a later batch, as when several batches become durable
// together: a KafkaSource then marks the batch acked without a request of
// its own, and the next Ack without DeferCommit commits its offsets with
// its own, in one offset commit per generation. The last Ack of such a run
// must not be given it: until an Ack without it, the deferred offsets are
// not committed (a restart delivers their messages again). Other sources
// ignore it.
func DeferCommit(ctx context.Context) context.Context {
	return context.WithValue(ctx, deferCommitKey{}, true)
}

// deferredAck is a batch acked with DeferCommit: the offsets to commit in
// its generation, and done, which ends its hold on the generation's end.
type deferredAck struct {
	g       *groupGen
	offsets []partitionOffset
	done    func()
}

// acker returns the Ack of a batch of msgs delivered in generation g: a
// commit of the offset after the last message of each partition (Kafka
// keeps one offset per partition and group), with those of the batches
// acked before it with DeferCommit.
func (s *KafkaSource) acker(g *groupGen, msgs []kafka.Message) func(context.Context) error {
	next := nextOffsets(msgs)
	var once sync.Once
	done := func() { once.Do(g.acked) }
	return func(ctx context.Context) error {
		s.ackMu.Lock()
		defer s.ackMu.Unlock()
		if s.closing {
			done()
			return fmt.Errorf("ingest: kafka %s: committing offsets: %w", s.cfg.Topic, errSourceClosed)
		}
		if ctx.Value(deferCommitKey{}) != nil {
			// Committed by the next Ack; until then the batch holds up its
			// generation's end, as one whose commit is under way.
			s.deferred = append(s.deferred, deferredAck{g: g, offsets: next, done: done})
			return nil
		}
		todo := append(s.deferred, deferredAck{g: g, offsets: next, done: done})
		s.deferred = nil
		// However it ends, the batches no longer hold up their
		// generations' ends.
		defer func() {
			for _, d := range todo {
				d.done()
			}
		}()
		// One commit per generation, in the order they were acked.
		var err error
		for len(todo) > 0 {
			gen := todo[0].g
			var offsets []partitionOffset
			for _, d := range todo {
				if d.g == gen {
					offsets = append(offsets, d.offsets...)
				}
			}
			err = errors.Join(err, s.commit(ctx, gen, s.cfg.Topic, latestOffsets(offsets)))
			todo = slices.DeleteFunc(todo, func(d deferredAck) bool {
				if d.g == gen {
					d.done()
					return true
				}
				return false
			})
		}
		return err
	}
}

// latestOffsets keeps the highest offset of each partition of offsets, in
// the order the partitions first appear.
func latestOffsets(offsets []partitionOffset) []partitionOffset {
	var out []partitionOffset
	for _, o := range offsets {
		if i := slices.IndexFunc(out, func(x partitionOffset) bool { return x.partition == o.partition }); i >= 0 {
			out[i].offset = max(out[i].offset, o.offset)
			continue
		}
		out = append(out, o)
	}
	return out
}

// partitionOffset is an offset of one partition, and the metadata
// committed with it ("" for none).
type partitionOffset struct {
	partition int
	offset    int64
	meta      string
}

// nextOffsets returns, for each partition of msgs, the offset after its
// last message there: what a commit of msgs commits.
func nextOffsets(msgs []kafka.Message) []partitionOffset {
	var next []partitionOffset
	for i := range msgs {
		m := &msgs[i]
		found := false
		for j := range next {
			if next[j].partition == m.Partition {
				next[j].offset = max(next[j].offset, m.Offset+1)
				found = true
			}
		}
		if !found {
			next = append(next, partitionOffset{partition: m.Partition, offset: m.Offset + 1})
		}
	}
	return next
}

// Close ends the member's generation (OnRevoke is called), leaves the
// consumer group and closes the connections; it waits for an Ack under
// way, and later Acks fail. Offsets not committed by an Ack stay
// uncommitted. It takes at most two thirds of KafkaConfig.RebalanceTimeout
// (for OnRevoke) plus the time to leave the group. Closing twice is a
// no-op.
func (s *KafkaSource) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	// Waits for an Ack under way. The batches acked with DeferCommit and
	// no Ack after them stay uncommitted.
	s.ackMu.Lock()
	s.closing = true
	close(s.closingCh)
	for _, d := range s.deferred {
		d.done()
	}
	s.deferred = nil
	s.ackMu.Unlock()
	// The group first: its generation ends (and OnRevoke runs) while the
	// member still belongs to it, then it leaves. Ending the generation
	// from its own side instead would make kafka-go join again.
	err := s.group.Close()
	s.cancel()
	s.running.Wait()
	s.labelMu.Lock()
	s.left = true
	s.labelMu.Unlock()
	s.transport.CloseIdleConnections()
	s.rb.Release()
	s.recycled.Close()
	s.dec.close()
	if err != nil {
		return fmt.Errorf("ingest: kafka %s: closing: %w", s.cfg.Topic, err)
	}
	return nil
}

// copartitioned is the range assignor over partitions in number order: every
// member gets the same partition numbers of every topic it reads (members
// sorted by id, the partitions of each topic cut alike), so I[p] and L[p] go
// together. kafka-go's RangeGroupBalancer cuts the partitions in the order
// the metadata lists them, which Kafka does not promise to be numeric (the
// in-process broker lists them in any order): the topics' cuts then cross.
type copartitioned struct{ kafka.RangeGroupBalancer }

func (b copartitioned) AssignGroups(members []kafka.GroupMember, partitions []kafka.Partition) kafka.GroupMemberAssignments {
	sorted := slices.Clone(partitions)
	slices.SortFunc(sorted, func(x, y kafka.Partition) int {
		return cmp.Or(cmp.Compare(x.Topic, y.Topic), cmp.Compare(x.ID, y.ID))
	})
	return b.RangeGroupBalancer.AssignGroups(members, sorted)
}
