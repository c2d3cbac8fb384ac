package sink

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/mvml/mvml/kafkaconn"
)

// Defaults of KafkaWriterConfig.
const (
	DefaultKafkaBatchSize    = 1000
	DefaultKafkaBatchBytes   = 1 << 20
	DefaultKafkaBatchTimeout = time.Millisecond
	DefaultKafkaWriteTimeout = 10 * time.Second
)

// KafkaWriterConfig says where a Kafka sink or dead-letter destination
// writes. Every write waits until all in-sync replicas of the partition
// leader have the messages (kafka.RequireAll). Messages that fail for a
// transient reason (a leader election, a broker restarting, a dropped
// connection: kafkaconn.Transient) are written again as Conn.Retry says;
// only a failure that persists past it, or another failure, fails the
// write.
type KafkaWriterConfig struct {
	// Conn says how to reach the brokers (addresses, TLS, SASL). Required:
	// its Brokers. The writer opens its own connections, closed by Close.
	Conn kafkaconn.Config
	// Topic is the topic to write; it must exist. Required.
	Topic string
	// BatchSize is the most messages sent to one partition in one produce
	// request. Default (0) DefaultKafkaBatchSize, 1000: a Write is one batch
	// of scores, so it should leave in few requests.
	BatchSize int
	// BatchBytes is the most bytes of one produce request; a message
	// larger than that cannot be written. Default (0) 1 MiB, the broker's
	// default message.max.bytes.
	BatchBytes int64
	// BatchTimeout is how long the last, partial produce request of a
	// partition waits for more messages before it is sent. Writes are
	// synchronous, so each Write waits this long at most once. Default (0)
	// DefaultKafkaBatchTimeout, 1ms.
	BatchTimeout time.Duration
	// Balancer chooses the partition of each message. Default (nil)
	// &kafka.Hash{}: the FNV-1a hash of the key (Sarama's partitioner), so
	// one id always lands on one partition; messages without a key are
	// spread round robin.
	Balancer kafka.Balancer
	// WriteTimeout bounds each produce request. Default (0)
	// DefaultKafkaWriteTimeout, 10s.
	WriteTimeout time.Duration
	// Coalesce, for a KafkaSink (JSON scores), lets the writes started by
	// WriteAsync that wait for the one before them leave together, in one
	// write of up to BatchSize messages, when their turn comes: at light
	// load, when each write is a few scores and the next ones queue
	// behind the broker's answer, they take one produce request instead
	// of one each, and the queue does not grow. Each write still ends
	// with its own outcome, in order, but a refusal of the request fails
	// all the writes in it. Default (false) every write is a request of
	// its own.
	Coalesce bool
	// Logger receives a line for every write retried after a transient
	// failure (Conn.Retry says how). Default (nil) none.
	Logger *slog.Logger
}

// kafkaWriter is the writer of both Kafka sinks and the dead letters:
// kafka-go's writer, the transport it owns, the retry of transient
// failures, which is the only one (kafka-go's own is turned off), and the
// sinks' flights.
type kafkaWriter struct {
	topic     string
	w         *kafka.Writer
	transport *kafka.Transport
	retry     kafkaconn.Retry
	logger    *slog.Logger

	// The flights (fly) write one after the other, each once last, the one
	// before it, has ended; flying counts their goroutines. ctx bounds the
	// flights started by WriteAsync: it ends when Close gives up on them.
	// waiting holds the flights of messages (flyMessages) not started yet,
	// in order, which the flight before them may take into its write;
	// guarded by mu.
	ctx      context.Context
	cancel   context.CancelFunc
	flying   sync.WaitGroup
	last     *Flight
	waiting  []*messagesFlight
	coalesce bool // KafkaWriterConfig.Coalesce

	// totals adds up kafka-go's statistics, which reset whenever they are
	// read, and the retries.
	mu     sync.Mutex
	totals KafkaWriterStats
}

// KafkaWriterStats are the statistics of the writer of a Kafka sink or
// dead-letter destination since it was opened.
type KafkaWriterStats struct {
	Topic string `json:"topic"`
	// Writes counts the produce requests, Messages and Bytes the messages
	// sent in them and their size in the request (a message sent again
	// counts again), Errors the requests that failed, and Retries the
	// writes tried again after a transient failure.
	Writes   int64 `json:"writes"`
	Messages int64 `json:"messages"`
	Bytes    int64 `json:"bytes"`
	Errors   int64 `json:"errors"`
	Retries  int64 `json:"retries"`
}

// stats returns the writer's statistics. Safe for concurrent use.
func (k *kafkaWriter) stats() KafkaWriterStats {
	k.mu.Lock()
	defer k.mu.Unlock()
	st := k.w.Stats()
	k.totals.Writes += st.Writes
	k.totals.Messages += st.Messages
	k.totals.Bytes += st.Bytes
	k.totals.Errors += st.Errors
	return k.totals
}

// newKafkaWriter checks cfg and returns its writer.
func newKafkaWriter(cfg KafkaWriterConfig) (*kafkaWriter, error) {
	if err := cfg.Conn.Validate(); err != nil {
		return nil, err
	}
	switch {
	case cfg.Topic == "":
		return nil, errors.New("no topic")
	case cfg.BatchSize < 0 || cfg.BatchBytes < 0 || cfg.BatchTimeout < 0 || cfg.WriteTimeout < 0:
		return nil, fmt.Errorf("BatchSize %d, BatchBytes %d, BatchTimeout %v and WriteTimeout %v must not be negative",
			cfg.BatchSize, cfg.BatchBytes, cfg.BatchTimeout, cfg.WriteTimeout)
	}
	transport := cfg.Conn.Transport()
	w := &kafka.Writer{
		Addr:         cfg.Conn.Addr(),
		Topic:        cfg.Topic,
		Balancer:     cfg.Balancer,
		BatchSize:    cmp.Or(cfg.BatchSize, DefaultKafkaBatchSize),
		BatchBytes:   cmp.Or(cfg.BatchBytes, DefaultKafkaBatchBytes),
		BatchTimeout: cmp.Or(cfg.BatchTimeout, DefaultKafkaBatchTimeout),
		WriteTimeout: cmp.Or(cfg.WriteTimeout, DefaultKafkaWriteTimeout),
		RequiredAcks: kafka.RequireAll,
		Async:        false,
		// Retries are writeMessages', bounded by Conn.Retry and the
		// caller's context; kafka-go's would add a fixed budget below it.
		MaxAttempts: 1,
		Transport:   transport,
	}
	if w.Balancer == nil {
		// Not cmp.Or: a kafka.BalancerFunc cannot be compared.
		w.Balancer = &kafka.Hash{}
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &kafkaWriter{topic: cfg.Topic, w: w, transport: transport, retry: cfg.Conn.Retry, logger: logger,
		ctx: ctx, cancel: cancel, coalesce: cfg.Coalesce, totals: KafkaWriterStats{Topic: cfg.Topic}}, nil
}

// fly starts write on a goroutine of its own once the flight before has
// ended, so that the flights' messages reach each partition in the order
// they were started, and returns its flight. write gets ctx, and must fail
// at once when ctx has ended: it is then called without waiting. recycle, if
// not nil, is called after a success, when kafka-go no longer holds the
// messages' bytes (after a failure it may: they are left to the garbage
// collector). Not safe for concurrent use, as the sinks are not.
func (k *kafkaWriter) fly(ctx context.Context, write func(ctx context.Context) error, recycle func()) *Flight {
	f, prev := newFlight(), k.last
	k.last = f
	k.flying.Go(func() {
		if prev != nil {
			select {
			case <-prev.done:
			case <-ctx.Done(): // write fails at once
			}
		}
		err := write(ctx)
		if err == nil && recycle != nil {
			recycle()
		}
		f.end(err)
	})
	return f
}

// messagesFlight is a flight of messages (flyMessages) waiting for its
// turn, which a flight before it may take into its own write (taken).
type messagesFlight struct {
	f       *Flight
	ctx     context.Context
	msgs    []kafka.Message
	outcome func(refused []int, err error) error
	recycle func()
	taken   bool
}

// flyMessages starts a flight writing msgs as fly does, once the flight
// before has ended, with writeFitting; outcome turns what it refused (the
// indexes of msgs) and its error into the flight's error, and recycle,
// if not nil, is called after a success. With KafkaWriterConfig.Coalesce,
// when its turn comes, the flight takes the flights of messages started
// after it and still waiting, of the same ctx, into one write (up to the
// writer's BatchSize messages in all), and ends them with it: at light
// load, when every write is a few messages and the next ones queue behind
// the broker's answer, the flights waiting leave in one produce request
// instead of one each, and the queue does not grow; at full load a flight
// fills a batch alone and writes as before. The messages keep their order
// on every partition.
func (k *kafkaWriter) flyMessages(ctx context.Context, msgs []kafka.Message, outcome func(refused []int, err error) error, recycle func()) *Flight {
	mf := &messagesFlight{f: newFlight(), ctx: ctx, msgs: msgs, outcome: outcome, recycle: recycle}
	k.mu.Lock()
	k.waiting = append(k.waiting, mf)
	k.mu.Unlock()
	prev := k.last
	k.last = mf.f
	k.flying.Go(func() {
		if prev != nil {
			select {
			case <-prev.done:
			case <-ctx.Done(): // write fails at once
			}
		}
		group := k.takeWaiting(mf)
		if group == nil {
			return // an earlier flight took it, and ends it
		}
		var all []kafka.Message
		if len(group) == 1 {
			all = mf.msgs
		} else {
			for _, g := range group {
				all = append(all, g.msgs...)
			}
		}
		var refused []int
		err := ctx.Err()
		if err == nil {
			refused, err = k.writeFitting(ctx, all)
		}
		start := 0
		for _, g := range group {
			end := start + len(g.msgs)
			var own []int
			for _, r := range refused {
				if r >= start && r < end {
					own = append(own, r-start)
				}
			}
			gerr := g.outcome(own, err)
			if gerr == nil && g.recycle != nil {
				g.recycle()
			}
			g.f.end(gerr)
			start = end
		}
	})
	return mf.f
}

// takeWaiting takes mf out of the flights waiting, with the flights of
// the same ctx that follow it there, up to BatchSize messages in all,
// when the writer coalesces (mf alone otherwise, or when its ctx has
// ended), and returns them; nil when an
// earlier flight took mf.
func (k *kafkaWriter) takeWaiting(mf *messagesFlight) []*messagesFlight {
	k.mu.Lock()
	defer k.mu.Unlock()
	if mf.taken {
		return nil
	}
	i := slices.Index(k.waiting, mf)
	group := []*messagesFlight{mf}
	n, j := len(mf.msgs), i+1
	for k.coalesce && mf.ctx.Err() == nil && j < len(k.waiting) {
		next := k.waiting[j]
		if next.ctx != mf.ctx || n+len(next.msgs) > k.w.BatchSize {
			break
		}
		group = append(group, next)
		n += len(next.msgs)
		j++
	}
	for _, g := range group {
		g.taken = true
	}
	k.waiting = slices.Delete(k.waiting, i, j)
	return group
}

// close waits for the flights under way, then closes the writer, which
// waits for the requests under way, and its connections; it returns early
// with ctx's error when ctx ends first: the flights are cancelled and the
// closing goes on in the background.
func (k *kafkaWriter) close(ctx context.Context) error {
	landed := make(chan struct{})
	go func() {
		k.flying.Wait()
		close(landed)
	}()
	select {
	case <-landed:
	case <-ctx.Done():
	}
	k.cancel()
	return kafkaconn.CloseWriter(ctx, k.w, k.transport)
}

// writeMessages writes batch, retrying the messages that failed for a
// transient reason as k.retry says, the others not: the messages written
// are not sent twice. It returns nil, kafka.WriteErrors holding each
// message's lasting failure (nil for those written), or the failure of the
// whole call.
func (k *kafkaWriter) writeMessages(ctx context.Context, batch []kafka.Message) error {
	// Bookkept only once a message failed: outcome[i] is the lasting
	// failure of batch[i], and at[j] the index in batch of todo[j] (nil
	// while todo is batch).
	var outcome kafka.WriteErrors
	var at []int
	todo := batch
	err := k.retry.Do(ctx, func() error {
		err := k.w.WriteMessages(ctx, todo...)
		var perMessage kafka.WriteErrors
		if !errors.As(err, &perMessage) || len(perMessage) != len(todo) {
			return err
		}
		if outcome == nil {
			outcome = make(kafka.WriteErrors, len(batch))
		}
		var again []kafka.Message
		var againAt []int
		var transient error
		for j, e := range perMessage {
			i := j
			if at != nil {
				i = at[j]
			}
			if e != nil && kafkaconn.Transient(e) {
				again, againAt, transient = append(again, todo[j]), append(againAt, i), e
			} else {
				outcome[i] = e
			}
		}
		todo, at = again, againAt
		return transient
	}, func(err error, pause time.Duration) {
		k.mu.Lock()
		k.totals.Retries++
		k.mu.Unlock()
		k.logger.Warn("kafka: write failed, retrying", "topic", k.topic, "messages", len(todo), "in", pause, "err", err)
	})
	switch {
	case err != nil:
		return err
	case slices.ContainsFunc(outcome, func(e error) bool { return e != nil }):
		return outcome
	}
	return nil
}

// writeFitting writes msgs and, where the broker refuses a batch
// as too large (its message.max.bytes below the writer's BatchBytes, or
// several messages of one partition adding up past it), writes the
// refused messages again in halves, down to single messages. It returns
// the indexes of the messages the broker or the writer refuses even
// alone; everything else was written. Any other failure is returned as is.
func (k *kafkaWriter) writeFitting(ctx context.Context, msgs []kafka.Message) (refused []int, err error) {
	idx := make([]int, 0, len(msgs))
	for i := range msgs {
		// kafka-go refuses the whole call, writing nothing, for one
		// message above BatchBytes: keep such messages out of it.
		if messageBytes(&msgs[i]) > k.w.BatchBytes {
			refused = append(refused, i)
		} else {
			idx = append(idx, i)
		}
	}
	more, err := k.writeHalving(ctx, msgs, idx)
	refused = append(refused, more...)
	slices.Sort(refused)
	return refused, err
}

// writeHalving writes the messages msgs[idx] and those of them the broker
// refuses as too large again in halves; it returns the indexes refused
// alone.
func (k *kafkaWriter) writeHalving(ctx context.Context, msgs []kafka.Message, idx []int) ([]int, error) {
	if len(idx) == 0 {
		return nil, nil
	}
	batch := make([]kafka.Message, len(idx))
	for j, i := range idx {
		batch[j] = msgs[i]
	}
	err := k.writeMessages(ctx, batch)
	if err == nil {
		return nil, nil
	}
	var perMessage kafka.WriteErrors
	if !errors.As(err, &perMessage) || len(perMessage) != len(batch) {
		return nil, err
	}
	var tooLarge []int
	for j, e := range perMessage {
		switch {
		case e == nil:
		case errors.Is(e, kafka.MessageSizeTooLarge) || errors.Is(e, kafka.RecordListTooLarge):
			tooLarge = append(tooLarge, idx[j])
		default:
			return nil, err
		}
	}
	// The broker answers for a whole batch: a message refused with no
	// other was refused alone.
	if len(tooLarge) == 1 {
		return tooLarge, nil
	}
	half := len(tooLarge) / 2
	refused, err := k.writeHalving(ctx, msgs, tooLarge[:half])
	if err != nil {
		return nil, err
	}
	rest, err := k.writeHalving(ctx, msgs, tooLarge[half:])
	return append(refused, rest...), err
}

// messageBytes is at least the size kafka-go's writer counts for m against
// BatchBytes: the message framing of Kafka's v1 format and the headers
// with the longest varint lengths.
func messageBytes(m *kafka.Message) int64 {
	n := 4 + 1 + 1 + 8 + 4 + len(m.Key) + 4 + len(m.Value) + binary.MaxVarintLen32
	for _, h := range m.Headers {
		n += 2*binary.MaxVarintLen32 + len(h.Key) + len(h.Value)
	}
	return int64(n)
}
