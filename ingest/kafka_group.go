package ingest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mvml/mvml/kafkaconn"
)

// Assignment is what a member of the group owns in one generation.
type Assignment struct {
	// Generation is the coordinator's number of the generation; label
	// batches carry it, and CommitLabels takes it.
	Generation int32
	// Member is this member's id in the group.
	Member string
	// Records holds the partitions of the input topic this member owns,
	// each with the group's committed offset when the generation started
	// (the next offset to read), or -1 when none is committed.
	Records map[int]int64
	// Labels holds the same for the labels topic; nil without one. With
	// co-partitioned topics it has the partitions of Records.
	Labels map[int]int64
	// LabelsHandled holds, for the partitions of the labels topic whose
	// last commit said so (KafkaSource.CommitLabelsHandled), the offset
	// below which every message was handled: those at or above the
	// committed offset and below it are read again, and were handled
	// already (a message that is not a label was dead-lettered).
	LabelsHandled map[int]int64
}

// Partitions returns the partitions of the input topic the member owns,
// in ascending order.
func (a Assignment) Partitions() []int {
	return slices.Sorted(maps.Keys(a.Records))
}

func assignmentOf(gen *kafkaconn.Generation, topic, labels string) Assignment {
	a := Assignment{Generation: gen.ID, Member: gen.MemberID, Records: committedOf(gen.Assignments[topic])}
	if labels != "" {
		a.Labels = committedOf(gen.Assignments[labels])
	}
	return a
}

// committedOf returns the committed offset of every partition assigned.
func committedOf(parts []kafkaconn.Assigned) map[int]int64 {
	offsets := make(map[int]int64, len(parts))
	for _, p := range parts {
		offsets[p.Partition] = p.Committed
	}
	return offsets
}

// groupGen is the member's state in one generation of the group: the
// partition readers, the messages they fetched for Next and NextLabels,
// and what was delivered and committed.
type groupGen struct {
	a Assignment
	// records and labels carry the fetched messages; ending is closed when
	// the generation stops delivering them.
	records  chan kafkaconn.Message
	labels   chan kafkaconn.Message
	ending   chan struct{}
	fetchers sync.WaitGroup
	// ackSignal wakes the end of the generation when a batch is acked.
	ackSignal chan struct{}
	// recordsAhead and labelsAhead count the messages known to be on their
	// way to records and labels and not there yet: those the partition
	// readers fetched and hold, and those already on the broker, up to
	// the high-water mark their last fetch reported. Batches wait for more
	// only while these are positive (see fill).
	recordsAhead, labelsAhead atomic.Int64

	mu      sync.Mutex
	readers []*kafkaconn.PartitionReader
	// stopped is set with ending closed: no more deliveries. over is set
	// once the generation ended: no more commits in it.
	stopped, over bool
	// outstanding counts the record batches delivered and not acked.
	outstanding int
	// committed is the next offset of each partition of each topic as
	// committed in this generation, committedMeta its metadata.
	committed     map[string]map[int]int64
	committedMeta map[string]map[int]string
}

func newGroupGen(a Assignment, queue int) *groupGen {
	return &groupGen{
		a:         a,
		records:   make(chan kafkaconn.Message, queue),
		labels:    make(chan kafkaconn.Message, queue),
		ending:    make(chan struct{}),
		ackSignal: make(chan struct{}, 1),
		committed: map[string]map[int]int64{}, committedMeta: map[string]map[int]string{},
	}
}

func (g *groupGen) readerList() []*kafkaconn.PartitionReader {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.readers)
}

// deliver says whether messages taken from the generation may still be
// delivered, and counts a record batch that is.
func (g *groupGen) deliver(records bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return false
	}
	if records {
		g.outstanding++
	}
	return true
}

// acked counts a record batch acked (or given up on).
func (g *groupGen) acked() {
	g.mu.Lock()
	g.outstanding--
	g.mu.Unlock()
	select {
	case g.ackSignal <- struct{}{}:
	default:
	}
}

// waitAcked waits until every record batch delivered was acked, ctx ends
// or closing is closed, and says whether they were.
func (g *groupGen) waitAcked(ctx context.Context, closing <-chan struct{}) bool {
	for {
		g.mu.Lock()
		n := g.outstanding
		g.mu.Unlock()
		if n <= 0 {
			return true
		}
		select {
		case <-g.ackSignal:
		case <-ctx.Done():
			return false
		case <-closing:
			return false
		}
	}
}

// uncommitted returns the offsets not yet committed in the generation,
// and whether it is over.
func (g *groupGen) uncommitted(topic string, offsets []partitionOffset) ([]partitionOffset, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var todo []partitionOffset
	for _, o := range offsets {
		// A batch acked late (or twice) must not move an offset back; the
		// same offset is committed again with other metadata.
		next, ok := g.committed[topic][o.partition]
		if !ok || o.offset > next || o.offset == next && o.meta != g.committedMeta[topic][o.partition] {
			todo = append(todo, o)
		}
	}
	return todo, g.over
}

func (g *groupGen) isOver() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.over
}

func (g *groupGen) markCommitted(topic string, offsets []partitionOffset) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m, meta := g.committed[topic], g.committedMeta[topic]
	if m == nil {
		m, meta = map[int]int64{}, map[int]string{}
		g.committed[topic], g.committedMeta[topic] = m, meta
	}
	for _, o := range offsets {
		if next, ok := m[o.partition]; !ok || o.offset >= next {
			m[o.partition], meta[o.partition] = o.offset, o.meta
		}
	}
}

// watch returns the generation in service (nil between generations), a
// channel closed when it or the failure changes, and the failure.
func (s *KafkaSource) watch() (*groupGen, <-chan struct{}, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur, s.changed, s.err
}

func (s *KafkaSource) update(change func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	change()
	close(s.changed)
	s.changed = make(chan struct{})
}

// fail ends the source with err: Next and NextLabels return it.
func (s *KafkaSource) fail(err error) {
	s.opts.Logger.Error("ingest: kafka: source failed", "group", s.cfg.GroupID, "err", err)
	s.update(func() {
		if s.err == nil {
			s.err = err
		}
	})
}

// follow follows the group's generations until Close.
func (s *KafkaSource) follow() {
	for {
		gen, err := s.group.Next(s.ctx)
		switch {
		case err == nil:
		case s.ctx.Err() != nil || errors.Is(err, kafkaconn.ErrGroupClosed):
			return
		case kafkaconn.Transient(err):
			// The group reported it, and joins again after a pause.
			s.health.failed(time.Now(), err.Error())
			continue
		default:
			s.fail(fmt.Errorf("joining consumer group %s: %w", s.cfg.GroupID, err))
			return
		}
		s.health.progressed(time.Now())
		// The member rejoins only once this function returned.
		gen.Start(func(genCtx context.Context) { s.serve(genCtx, gen) })
	}
}

// serve runs one generation: it reads the partitions assigned until the
// generation ends, then ends it.
func (s *KafkaSource) serve(genCtx context.Context, gen *kafkaconn.Generation) {
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	defer context.AfterFunc(genCtx, cancel)()
	a := assignmentOf(gen, s.cfg.Topic, s.cfg.LabelsTopic)
	g := newGroupGen(a, min(s.opts.BatchSize, 1024))
	s.opts.Logger.Info("ingest: kafka: generation started", "group", s.cfg.GroupID, "generation", a.Generation,
		"member", a.Member, "partitions", a.Partitions())
	if err := s.checkCoPartitioned(ctx); err != nil {
		if ctx.Err() == nil {
			s.fail(err)
		}
		<-ctx.Done()
		return
	}
	if a.Labels != nil && !slices.Equal(a.Partitions(), slices.Sorted(maps.Keys(a.Labels))) {
		// Members that do not all read both topics (say, an older version
		// in a rolling upgrade) are assigned each topic apart.
		s.opts.Logger.Warn("ingest: kafka: assigned partitions of the input and labels topics differ: a label whose record another member owns finds no record",
			"group", s.cfg.GroupID, "generation", a.Generation, "records", a.Partitions(), "labels", slices.Sorted(maps.Keys(a.Labels)))
	}
	if a.Labels != nil {
		g.a.LabelsHandled = s.labelsHandled(ctx, a.Labels)
		a = g.a
	}
	s.update(func() { s.cur = g })
	s.fetch(ctx, g, s.cfg.Topic, a.Records, g.records, &g.recordsAhead)
	if s.cfg.OnAssign != nil {
		if err := s.cfg.OnAssign(ctx, a); err != nil && ctx.Err() == nil {
			s.fail(fmt.Errorf("assignment of generation %d (partitions %v): %w", a.Generation, a.Partitions(), err))
		}
	}
	if _, _, err := s.watch(); err == nil && ctx.Err() == nil && a.Labels != nil {
		s.fetch(ctx, g, s.cfg.LabelsTopic, a.Labels, g.labels, &g.labelsAhead)
	}
	<-ctx.Done()
	s.end(g)
}

// end ends generation g: no more deliveries, the readers closed, the
// batches delivered acked (unless the source is closing), OnRevoke, and
// no more commits.
func (s *KafkaSource) end(g *groupGen) {
	g.mu.Lock()
	g.stopped = true
	close(g.ending)
	g.mu.Unlock()
	g.fetchers.Wait()
	readers := g.readerList()
	for _, r := range readers {
		r.Close()
	}
	// What the readers counted since they were last read, before they go.
	s.totals.collect(readers, false)
	// The bound of the end leaves a third of the rebalance timeout, within
	// which a member must rejoin or lose its place, to rejoin.
	bound := s.cfg.RebalanceTimeout * 2 / 3
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), bound)
	defer cancel()
	if !g.waitAcked(ctx, s.closingCh) && ctx.Err() != nil {
		s.opts.Logger.Warn("ingest: kafka: record batches not acked before the generation ended: their records will be delivered again",
			"group", s.cfg.GroupID, "generation", g.a.Generation, "waited", bound)
	}
	if s.cfg.OnRevoke != nil {
		s.cfg.OnRevoke(ctx, g.a)
	}
	g.mu.Lock()
	g.over = true
	g.mu.Unlock()
	s.update(func() { s.cur = nil })
	s.opts.Logger.Info("ingest: kafka: generation ended", "group", s.cfg.GroupID, "generation", g.a.Generation)
}

// fetch starts a reader of every partition of topic in offsets, at its
// committed offset (or KafkaConfig.StartOffset when none is), each feeding
// out until ctx ends and counting in ahead the messages on their way.
func (s *KafkaSource) fetch(ctx context.Context, g *groupGen, topic string, offsets map[int]int64, out chan<- kafkaconn.Message, ahead *atomic.Int64) {
	for _, p := range slices.Sorted(maps.Keys(offsets)) {
		start := offsets[p]
		if start < 0 {
			start = s.cfg.StartOffset
		}
		r, err := s.cfg.Conn.NewPartitionReader(s.readerConfig(topic, p))
		if err != nil {
			s.fail(fmt.Errorf("reading %s: %w", partitionSource(topic, p), err))
			return
		}
		if err := r.SetOffset(start); err != nil {
			r.Close()
			s.fail(fmt.Errorf("reading %s from offset %d: %w", partitionSource(topic, p), start, err))
			return
		}
		g.mu.Lock()
		g.readers = append(g.readers, r)
		g.mu.Unlock()
		g.fetchers.Go(func() { s.feed(ctx, r, topic, p, out, ahead) })
	}
}

// feed passes the messages r fetches to out until ctx ends, waiting
// through transient errors. It keeps its partition's share of ahead: the
// message in hand and those after it up to the high-water mark its fetch
// reported, which are on the broker already (or fetched and queued in r).
func (s *KafkaSource) feed(ctx context.Context, r *kafkaconn.PartitionReader, topic string, partition int, out chan<- kafkaconn.Message, ahead *atomic.Int64) {
	lag := s.totals.lagOf(topic, partition)
	var known int64 // this partition's share of ahead
	for {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !kafkaconn.Transient(err) {
				s.fail(fmt.Errorf("reading %s: %w", partitionSource(topic, partition), err))
				return
			}
			s.health.failed(time.Now(), err.Error())
			select {
			case <-ctx.Done():
				return
			case <-time.After(transientRetryPause):
			}
			continue
		}
		lag.Store(m.Lag())
		coming := m.Lag() + 1 // it, and those after it
		ahead.Add(coming - known)
		select {
		case out <- m:
			// Counted out once it is on out, where a batch takes it.
			known = coming - 1
			ahead.Add(-1)
		case <-ctx.Done():
			return
		}
	}
}

// readerConfig is the configuration of the reader of one partition. Its
// fetches wait at least kafkaconn.MinFetchWait: Next's own timer fills
// batches.
func (s *KafkaSource) readerConfig(topic string, partition int) kafkaconn.ReaderConfig {
	return kafkaconn.ReaderConfig{
		Topic:     topic,
		Partition: partition,
		MinBytes:  s.cfg.MinBytes,
		MaxBytes:  s.cfg.MaxBytes,
		MaxWait:   s.cfg.MaxWait,
		// The queue of fetched messages need not outgrow a batch.
		QueueCapacity: min(s.opts.BatchSize, 1024),
		OnError:       s.kafkaError(topic, partition),
	}
}

// take waits for a message of the generation in service, of records or of
// labels, then takes more as fill says, up to Options.BatchSize, and
// returns them with their generation. Messages of a generation that ended
// meanwhile are dropped: the next generation reads them again from the
// committed offsets.
func (s *KafkaSource) take(ctx context.Context, labels bool) (*groupGen, []kafkaconn.Message, error) {
	for {
		g, changed, err := s.watch()
		if err != nil {
			return nil, nil, err
		}
		var in chan kafkaconn.Message
		var ahead *atomic.Int64
		if g != nil {
			select {
			case <-g.ending:
				// No generation delivers until the next one starts.
				g = nil
			default:
				in, ahead = g.records, &g.recordsAhead
				if labels {
					in, ahead = g.labels, &g.labelsAhead
				}
			}
		}
		select {
		case m := <-in:
			msgs := s.fill(ctx, g, in, ahead, m)
			if g.deliver(!labels) {
				return g, msgs, nil
			}
		case <-changed:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
}

// fill returns first and the messages that follow it on in, up to
// Options.BatchSize: every message there already, and more only while
// ahead says that some are on their way (fetched by a partition reader,
// or on the broker below the high-water mark of its last fetch), for at
// most KafkaConfig.MaxWait after first. When nothing more is known to be
// coming it returns at once, so that at light load a record is not held
// for a batch that will not fill, while at full load, with the readers
// behind the broker, batches fill as before. It stops early when ctx ends
// or g stops delivering. A reader counts a message out of ahead just
// after putting it on in, so fill, waiting, looks at ahead again every
// aheadRecheck: the last message known to be coming may have been taken
// before it was counted out, and nothing else would wake fill then.
func (s *KafkaSource) fill(ctx context.Context, g *groupGen, in <-chan kafkaconn.Message, ahead *atomic.Int64, first kafkaconn.Message) []kafkaconn.Message {
	msgs := make([]kafkaconn.Message, 1, min(s.opts.BatchSize, 256))
	msgs[0] = first
	start := time.Now()
	var timer *time.Timer    // started when fill first waits
	var recheck *time.Ticker // likewise
	defer func() {
		if timer != nil {
			timer.Stop()
			recheck.Stop()
		}
	}()
	for len(msgs) < s.opts.BatchSize {
		if ahead.Load() <= 0 {
			// Nothing more is known to be coming: take what is there.
			select {
			case m := <-in:
				msgs = append(msgs, m)
				continue
			default:
				return msgs
			}
		}
		if timer == nil {
			timer = time.NewTimer(s.cfg.MaxWait - time.Since(start))
			recheck = time.NewTicker(aheadRecheck)
		}
		select {
		case m := <-in:
			msgs = append(msgs, m)
		case <-recheck.C:
		case <-timer.C:
			return msgs
		case <-g.ending:
			return msgs
		case <-ctx.Done():
			return msgs
		}
	}
	return msgs
}

// aheadRecheck is how often fill, waiting for messages known to be
// coming, looks at their count again.
const aheadRecheck = time.Millisecond

// errGenerationOver stops the retries of a commit whose generation is
// over; it is not transient.
var errGenerationOver = errors.New("the generation is over")

// commit commits offsets of topic in generation g, retrying transient
// failures. Offsets of a generation that is over are left uncommitted,
// and logged: the partitions' new owner reads their messages again.
func (s *KafkaSource) commit(ctx context.Context, g *groupGen, topic string, offsets []partitionOffset) error {
	todo, over := g.uncommitted(topic, offsets)
	if len(todo) == 0 {
		return nil
	}
	var gone error
	if over {
		gone = errGenerationOver
	} else {
		err := s.cfg.Conn.Retry.Do(ctx, func() error {
			if g.isOver() {
				gone = errGenerationOver
				return gone
			}
			attempt, cancel := context.WithTimeout(ctx, commitTimeout)
			defer cancel()
			err := s.commitOffsets(attempt, g, topic, todo)
			if kafkaconn.GenerationGone(err) {
				// kafkaconn counts these transient, for a client that
				// rejoins and commits again; this one does not.
				gone = err
				return errGenerationOver
			}
			return err
		}, func(err error, pause time.Duration) {
			s.opts.Logger.Warn("ingest: kafka: committing offsets failed, retrying", "topic", topic, "group", s.cfg.GroupID, "in", pause, "err", err)
		})
		if gone == nil && err != nil {
			return fmt.Errorf("ingest: kafka %s: committing offsets: %w", topic, err)
		}
	}
	if gone != nil {
		s.opts.Logger.Info("ingest: kafka: offsets not committed, the generation that delivered them is over: their messages will be delivered again",
			"topic", topic, "group", s.cfg.GroupID, "generation", g.a.Generation, "offsets", fmt.Sprint(todo), "reason", gone)
		return nil
	}
	g.markCommitted(topic, todo)
	return nil
}

// commitOffsets sends one offset commit of generation g.
func (s *KafkaSource) commitOffsets(ctx context.Context, g *groupGen, topic string, offsets []partitionOffset) error {
	commits := make([]kafkaconn.OffsetCommit, len(offsets))
	for i, o := range offsets {
		commits[i] = kafkaconn.OffsetCommit{Partition: o.partition, Offset: o.offset, Metadata: o.meta}
	}
	return s.client.CommitOffsets(ctx, s.cfg.GroupID, g.a.Generation, g.a.Member, topic, commits)
}

// checkCoPartitioned checks that the input and labels topics (if any)
// exist and have as many partitions, waiting through transient errors (a
// topic whose leader is being elected, say).
func (s *KafkaSource) checkCoPartitioned(ctx context.Context) error {
	if s.cfg.LabelsTopic == "" {
		return nil
	}
	topics := []string{s.cfg.Topic, s.cfg.LabelsTopic}
	pause := transientRetryPause
	for {
		md, err := s.client.Metadata(ctx, topics...)
		if err != nil {
			err = fmt.Errorf("reading the partitions of %s and %s: %w", s.cfg.Topic, s.cfg.LabelsTopic, err)
		} else {
			err = coPartitioned(md, s.cfg.Topic, s.cfg.LabelsTopic)
		}
		if err == nil || ctx.Err() != nil || !kafkaconn.Transient(err) {
			return err
		}
		s.health.failed(time.Now(), err.Error())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, kafkaconn.DefaultRetryMaxBackoff)
	}
}

// coPartitioned checks the metadata of the input and labels topics. Only
// an error of a topic's own that may pass (a leader election) wraps the
// Kafka error.
func coPartitioned(md kafkaconn.Metadata, input, labels string) error {
	count := func(role, name string) (int, error) {
		i := slices.IndexFunc(md.Topics, func(t kafkaconn.TopicMetadata) bool { return t.Name == name })
		switch {
		case i < 0 || errors.Is(md.Topics[i].Err, kafkaconn.ErrUnknownTopic):
			return 0, fmt.Errorf("the %s topic %q does not exist", role, name)
		case md.Topics[i].Err != nil:
			return 0, fmt.Errorf("the %s topic %q: %w", role, name, md.Topics[i].Err)
		}
		return len(md.Topics[i].Partitions), nil
	}
	n, err := count("input", input)
	if err != nil {
		return err
	}
	nl, err := count("labels", labels)
	if err != nil {
		return err
	}
	if n != nl {
		return fmt.Errorf("the input topic %q has %d partitions and the labels topic %q has %d: a record and its label meet only "+
			"when both topics have the same number of partitions and are keyed by id with the same partitioner", input, n, labels, nl)
	}
	return nil
}
