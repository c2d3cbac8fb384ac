package registry

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/model"
)

// DefaultFollowWait is KafkaConfig.FollowWait's default.
const DefaultFollowWait = 5 * time.Second

const (
	// requestTimeout bounds a request to the brokers, so that a
	// connection that hangs fails and is retried; a produce request of a
	// megabyte of chunks may take a host busy with other work more than
	// kafka-go's default 10s to send and have acknowledged (a timed-out
	// write is retried whole).
	requestTimeout = 30 * time.Second
	// fetchMaxBytes is what one fetch may bring: a few chunks.
	fetchMaxBytes = 4 << 20
	// readWait is the longest a fetch of messages known to be there waits.
	readWait = 100 * time.Millisecond
	// The pauses of a follower that cannot read the topic.
	followMinBackoff = 100 * time.Millisecond
	followMaxBackoff = 10 * time.Second
)

// KafkaConfig says where the model topic is.
type KafkaConfig struct {
	// Conn says how to reach the brokers, and how a write or read retries
	// a transient failure (Conn.Retry). Required: its Brokers.
	Conn kafkaconn.Config
	// Topic is the model topic: one partition, cleanup.policy=compact,
	// created by the operator. Required.
	Topic string
	// ChunkSize is the most bytes of a model or checkpoint in one message.
	// Default (0) kafkaconn.DefaultChunkSize, 512 KiB: below the brokers'
	// default message.max.bytes with the headers.
	ChunkSize int
	// FollowWait is the longest a follower's request waits for a new
	// message before it asks again; a message that arrives is read at
	// once. Default (0) DefaultFollowWait, 5s.
	FollowWait time.Duration
	// Logger hears of the refused models, the unreadable messages and the
	// retries. Default (nil) none.
	Logger *slog.Logger
}

// Kafka is the model store of a model topic, shared by every replica and
// job that reaches the brokers. Its keys:
//
//   - model/VERSION/chunk/I: the model file, chunked (kafkaconn.WriteBlob);
//   - model/VERSION: its Manifest, JSON;
//   - current: the Pointer to the current model, JSON;
//   - checkpoint/LINEAGE: where the checkpoint of a lineage is (its chunks
//     are keyed checkpoint/LINEAGE/ID/chunk/I, and those of the one before
//     are deleted by tombstones once it is replaced).
//
// A publication writes the chunks, then the manifest, then the pointer,
// each acknowledged by the brokers before the next starts, so a reader
// who sees a pointer finds what it names before it. OpenKafka reads the
// topic from its start to its end: the manifests, the pointer, and where
// every chunk is, without their bytes, which are read again by offset for
// the one model loaded. Then Current, Publish and Follow read on from
// there.
type Kafka struct {
	cfg     KafkaConfig
	logger  *slog.Logger
	clients kafkaconn.TopicClients
	refused atomic.Int64

	mu sync.Mutex // guards what follows
	// cat is what the topic holds below next.
	cat  *catalog
	next int64
	// loaded is the current model last read or published, so that it is
	// not read again.
	loaded *loadedModel
}

type loadedModel struct {
	model    *model.Model
	manifest Manifest
}

// OpenKafka opens the model topic: it checks that the topic has one
// partition (it creates nothing; a topic that is not compacted is logged,
// since its models would expire) and reads it up to its end.
func OpenKafka(ctx context.Context, cfg KafkaConfig) (*Kafka, error) {
	switch err := cfg.Conn.Validate(); {
	case err != nil:
		return nil, fmt.Errorf("model topic: %w", err)
	case cfg.Topic == "":
		return nil, errors.New("model topic: no topic")
	case cfg.ChunkSize < 0 || cfg.FollowWait < 0:
		return nil, fmt.Errorf("model topic %s: negative chunk size %d or follow wait %v", cfg.Topic, cfg.ChunkSize, cfg.FollowWait)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	k := &Kafka{
		cfg: cfg, logger: logger.With("topic", cfg.Topic), clients: cfg.Conn.TopicClients(cfg.Topic, requestTimeout),
		cat: newCatalog(),
	}
	if err := k.open(ctx); err != nil {
		return nil, errors.Join(err, k.Close(ctx))
	}
	return k, nil
}

func (k *Kafka) open(ctx context.Context) error {
	topic := k.cfg.Topic
	var n int
	err := k.retry(ctx, "reading metadata", func() (err error) {
		n, err = k.clients.Client.Partitions(ctx, topic)
		return err
	})
	switch {
	case err != nil:
		return fmt.Errorf("model topic %s: %w", topic, err)
	case n == 0:
		return fmt.Errorf("model topic %s does not exist: create it with one partition and cleanup.policy=compact", topic)
	case n != 1:
		return fmt.Errorf("model topic %s has %d partitions, want 1: a model's chunks, manifest and pointer keep their order only within one", topic, n)
	}
	k.checkCompacted(ctx)
	err = k.retry(ctx, "listing offsets", func() error {
		first, _, err := k.offsets(ctx)
		k.next = first
		return err
	})
	if err == nil {
		err = k.catchUp(ctx)
	}
	if err != nil {
		return fmt.Errorf("model topic %s: %w", topic, err)
	}
	k.logger.Info("model topic read", "versions", len(k.cat.manifests), "model_version", k.currentVersion(), "next_offset", k.next)
	return nil
}

// checkCompacted logs a model topic whose cleanup policy is not compact:
// retention would delete its models and pointer. A broker that does not
// say is believed.
func (k *Kafka) checkCompacted(ctx context.Context) {
	cfg, err := k.clients.Client.TopicConfig(ctx, k.cfg.Topic, "cleanup.policy")
	if err != nil {
		k.logger.Debug("model topic: cleanup policy not known", "err", err)
		return
	}
	if policy, ok := cfg["cleanup.policy"]; ok && !strings.Contains(policy, "compact") {
		k.logger.Warn("model topic is not compacted: its retention will delete models and the current pointer; set cleanup.policy=compact",
			"cleanup_policy", policy)
	}
}

// retry runs op as Conn.Retry says, logging each retry.
func (k *Kafka) retry(ctx context.Context, what string, op func() error) error {
	return k.cfg.Conn.Retry.Do(ctx, op, func(err error, pause time.Duration) {
		k.logger.Warn("model topic: "+what+" failed, retrying", "in", pause, "err", err)
	})
}

// offsets returns the first offset of the topic's partition and the next
// one to be written.
func (k *Kafka) offsets(ctx context.Context) (first, end int64, err error) {
	return k.clients.Client.Offsets(ctx, k.cfg.Topic, 0)
}

// fetch returns the messages of the topic from offset on, as many as
// one request brings, waiting up to wait for one.
func (k *Kafka) fetch(ctx context.Context, offset int64, wait time.Duration) ([]kafkaconn.Message, error) {
	return k.clients.Client.Fetch(ctx, k.cfg.Topic, 0, offset, fetchMaxBytes, wait)
}

// read fetches the messages after those in the catalog, waiting up to wait
// for one, and takes them in; it reports whether it found any. A catalog
// behind the start of the topic (its retention deleted messages) goes on
// from the start.
func (k *Kafka) read(ctx context.Context, wait time.Duration) (bool, error) {
	k.mu.Lock()
	next := k.next
	k.mu.Unlock()
	msgs, err := k.fetch(ctx, next, wait)
	if errors.Is(err, kafkaconn.ErrOffsetOutOfRange) {
		first, _, err := k.offsets(ctx)
		if err != nil {
			return false, err
		}
		k.mu.Lock()
		defer k.mu.Unlock()
		if k.next < first {
			k.logger.Warn("model topic: messages deleted before they were read; is it compacted?", "from", k.next, "to", first)
			k.next = first
		}
		return true, nil
	}
	k.apply(msgs)
	return len(msgs) > 0, err
}

// apply takes msgs, in offset order, into the catalog, but for those
// already in.
func (k *Kafka) apply(msgs []kafkaconn.Message) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, m := range msgs {
		if m.Offset >= k.next {
			k.cat.apply(m, k.logger)
			k.next = m.Offset + 1
		}
	}
}

// catchUpNow reads the topic up to the end it has now.
func (k *Kafka) catchUpNow(ctx context.Context) error {
	_, end, err := k.offsets(ctx)
	for err == nil && k.position() < end {
		var more bool
		// Nothing more below the end: the last messages were compacted.
		if more, err = k.read(ctx, readWait); !more {
			break
		}
	}
	return err
}

// catchUp is catchUpNow with retries.
func (k *Kafka) catchUp(ctx context.Context) error {
	return k.retry(ctx, "reading", func() error { return k.catchUpNow(ctx) })
}

func (k *Kafka) position() int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.next
}

func (k *Kafka) currentVersion() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cat.current == nil {
		return ""
	}
	return k.cat.current.Version
}

// load reads the model p names, or returns an error wrapping ErrUnusable
// when it is not stored whole: no manifest, another checksum, chunks
// missing or damaged, a file that does not decode or is another model.
func (k *Kafka) load(ctx context.Context, p Pointer) (*model.Model, Manifest, error) {
	k.mu.Lock()
	man, ok := k.cat.manifests[p.Version]
	loaded := k.loaded
	k.mu.Unlock()
	switch {
	case !ok:
		return nil, Manifest{}, fmt.Errorf("%w: model %s has no manifest", ErrUnusable, p.Version)
	case man.SHA256 != p.SHA256:
		return nil, Manifest{}, fmt.Errorf("%w: model %s: the pointer says SHA-256 %s, its manifest %s", ErrUnusable, p.Version, p.SHA256, man.SHA256)
	case loaded != nil && loaded.manifest.Version == man.Version && loaded.manifest.SHA256 == man.SHA256:
		return loaded.model, loaded.manifest, nil
	}
	data, man, err := k.file(ctx, p.Version)
	if err != nil {
		return nil, Manifest{}, err
	}
	m, err := decodeFile(data, man)
	if err != nil {
		return nil, Manifest{}, err
	}
	return m, man, nil
}

// file reads the model file of version from the topic, checked against
// its manifest's checksum and size: ErrUnknownVersion without a
// manifest, ErrUnusable when a chunk is missing or damaged. Other errors
// are the brokers'.
func (k *Kafka) file(ctx context.Context, version string) ([]byte, Manifest, error) {
	k.mu.Lock()
	man, ok := k.cat.manifests[version]
	var offsets []int64
	var err error
	if ok {
		offsets, err = k.cat.blobOffsets(modelKey(version), man.SHA256, man.Chunks)
	}
	k.mu.Unlock()
	switch {
	case !ok:
		return nil, Manifest{}, fmt.Errorf("model %s: %w", version, ErrUnknownVersion)
	case err != nil:
		return nil, Manifest{}, err
	}
	data, err := k.readBlob(ctx, modelKey(version), man.SHA256, man.Bytes, offsets)
	if err != nil {
		return nil, Manifest{}, err
	}
	return data, man, nil
}

// loadCurrent is load for the current model, which it remembers.
func (k *Kafka) loadCurrent(ctx context.Context, p Pointer) (*model.Model, Manifest, error) {
	var m *model.Model
	var man Manifest
	err := k.retry(ctx, "reading model "+p.Version, func() (err error) {
		m, man, err = k.load(ctx, p)
		return err
	})
	if err == nil {
		k.remember(m, man)
	}
	return m, man, err
}

func (k *Kafka) remember(m *model.Model, man Manifest) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.loaded = &loadedModel{model: m, manifest: man}
}

// readBlob reads the chunks of blob at offsets and returns its value,
// checked against sha and size, or an error wrapping ErrUnusable when a
// chunk is missing or damaged. Other errors are the brokers'.
func (k *Kafka) readBlob(ctx context.Context, blob, sha string, size int64, offsets []int64) ([]byte, error) {
	want := make(map[int64]bool, len(offsets))
	for _, o := range offsets {
		want[o] = true
	}
	last := slices.Max(offsets)
	a := kafkaconn.NewAssembler()
	for off := slices.Min(offsets); off <= last; {
		msgs, err := k.fetch(ctx, off, readWait)
		if err != nil {
			return nil, err
		}
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			off = m.Offset + 1
			if !want[m.Offset] {
				continue
			}
			c, value, err := a.Add(m)
			switch {
			case err != nil:
				return nil, fmt.Errorf("%w: %w", ErrUnusable, err)
			case c.Blob != blob || c.SHA256 != sha:
				return nil, fmt.Errorf("%w: %s: offset %d holds a chunk of %s", ErrUnusable, blob, m.Offset, c.Blob)
			case value != nil && int64(len(value)) != size:
				return nil, fmt.Errorf("%w: %s: %d bytes, its manifest says %d", ErrUnusable, blob, len(value), size)
			case value != nil:
				return value, nil
			}
		}
	}
	missing := a.Missing(blob, sha)
	if missing == nil {
		missing = make([]int, len(offsets))
		for i := range missing {
			missing[i] = i
		}
	}
	return nil, fmt.Errorf("%w: %s: %s from the topic", ErrUnusable, blob, missingChunks(missing, len(offsets)))
}

// Publish writes m's chunks and manifest, unless that version is stored
// whole already (a model published again keeps its first publication),
// then, with makeCurrent, the pointer; each is acknowledged by the
// brokers before the next is written. m is kept as the current model
// read, so it must not change afterwards.
func (k *Kafka) Publish(ctx context.Context, m *model.Model, meta Meta, makeCurrent bool) (Manifest, error) {
	fail := func(err error) (Manifest, error) {
		return Manifest{}, fmt.Errorf("publish model %s to %s: %w", m.Version, k.cfg.Topic, err)
	}
	pub, err := meta.publisher()
	if err != nil {
		return fail(err)
	}
	if err := k.catchUp(ctx); err != nil {
		return fail(err)
	}
	man, stored, err := k.stored(ctx, m.Version)
	if err != nil {
		return fail(err)
	}
	if !stored {
		data, err := encodeModel(m)
		if err != nil {
			return fail(err)
		}
		chunks, err := kafkaconn.BlobMessages(modelKey(m.Version), data, nil, k.cfg.ChunkSize)
		if err != nil {
			return fail(err)
		}
		man = newManifest(m, sumOf(data), len(chunks), meta, pub)
		if err := k.write(ctx, "writing the model", chunks...); err != nil {
			return fail(err)
		}
		if err := k.writeJSON(ctx, modelKey(m.Version), man); err != nil {
			return fail(err)
		}
	}
	if makeCurrent {
		k.mu.Lock()
		cur := k.cat.current
		k.mu.Unlock()
		if err := k.writeJSON(ctx, keyCurrent, cur.next(m.Version, man.SHA256, pub, ReasonPublish)); err != nil {
			return fail(err)
		}
		k.remember(m, man)
	}
	k.logger.Info("model published", "model_version", m.Version, "lineage", man.Lineage, "bytes", man.Bytes, "chunks", man.Chunks,
		"again", stored, "current", makeCurrent)
	return man, nil
}

// stored returns the manifest of version when the topic holds that model
// whole.
func (k *Kafka) stored(ctx context.Context, version string) (Manifest, bool, error) {
	k.mu.Lock()
	man, ok := k.cat.manifests[version]
	k.mu.Unlock()
	if !ok {
		return Manifest{}, false, nil
	}
	err := k.retry(ctx, "reading model "+version, func() error {
		_, _, err := k.load(ctx, Pointer{Version: version, SHA256: man.SHA256})
		return err
	})
	switch {
	case errors.Is(err, ErrUnusable):
		k.logger.Warn("model topic: the stored model is not whole; writing it again", "model_version", version, "err", err)
		return Manifest{}, false, nil
	case err != nil:
		return Manifest{}, false, err
	}
	return man, true, nil
}

// write writes msgs, retrying transient failures (the readers take a
// chunk or message twice).
func (k *Kafka) write(ctx context.Context, what string, msgs ...kafkaconn.Message) error {
	return k.retry(ctx, what, func() error { return k.clients.Writer.WriteMessages(ctx, msgs...) })
}

func (k *Kafka) writeJSON(ctx context.Context, key string, v any) error {
	value, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return k.write(ctx, "writing "+key, kafkaconn.Message{Key: []byte(key), Value: value})
}

// Current reads the topic up to its end and returns the model its pointer
// names.
func (k *Kafka) Current(ctx context.Context) (*model.Model, Manifest, error) {
	if err := k.catchUp(ctx); err != nil {
		return nil, Manifest{}, fmt.Errorf("model topic %s: %w", k.cfg.Topic, err)
	}
	k.mu.Lock()
	p := k.cat.current
	k.mu.Unlock()
	if p == nil {
		return nil, Manifest{}, fmt.Errorf("model topic %s: %w", k.cfg.Topic, ErrNoModel)
	}
	m, man, err := k.loadCurrent(ctx, *p)
	if err != nil {
		return nil, Manifest{}, fmt.Errorf("model topic %s: current model %s: %w", k.cfg.Topic, p.Version, err)
	}
	return m, man, nil
}

// Follow reads the topic up to its end, calls onCurrent with the current
// model, then reads every new message as it comes and calls onCurrent
// with every model a new pointer names. A pointer to a model not stored
// whole is refused: logged, counted, and onCurrent not called. While the
// brokers cannot be reached it retries without end, logging when it
// starts and stops failing; a refusal that waiting cannot mend
// (authorisation) ends it with an error.
func (k *Kafka) Follow(ctx context.Context, onCurrent func(*model.Model, Manifest)) error {
	acted := int64(-1) // the offset of the pointer last delivered or refused
	caughtUp, failing := false, false
	backoff := followMinBackoff
	wait := cmp.Or(k.cfg.FollowWait, DefaultFollowWait)
	for {
		var err error
		if caughtUp {
			_, err = k.read(ctx, wait)
		} else {
			err = k.catchUpNow(ctx)
			caughtUp = err == nil
		}
		if err == nil {
			acted, err = k.deliver(ctx, acted, onCurrent)
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case err == nil:
			if failing {
				k.logger.Info("model topic: reading again")
			}
			failing, backoff = false, followMinBackoff
			continue
		case !kafkaconn.Transient(err):
			return fmt.Errorf("model topic %s: %w", k.cfg.Topic, err)
		case !failing:
			k.logger.Warn("model topic cannot be read; retrying, the model in use stays", "err", err)
			failing = true
		}
		pause := backoff/2 + rand.N(backoff/2+1)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(pause):
		}
		backoff = min(2*backoff, followMaxBackoff)
	}
}

// deliver hands the current model to onCurrent unless its pointer, at
// offset acted, was acted on already; it returns the offset of the
// pointer acted on.
func (k *Kafka) deliver(ctx context.Context, acted int64, onCurrent func(*model.Model, Manifest)) (int64, error) {
	k.mu.Lock()
	p, at := k.cat.current, k.cat.currentAt
	k.mu.Unlock()
	if p == nil || at == acted {
		return acted, nil
	}
	m, man, err := k.load(ctx, *p)
	switch {
	case errors.Is(err, ErrUnusable):
		k.refused.Add(1)
		k.logger.Error("model topic: the current model is refused; the model in use stays", "model_version", p.Version, "offset", at, "err", err)
		return at, nil
	case err != nil:
		return acted, err
	}
	k.remember(m, man)
	onCurrent(m, man)
	return at, nil
}

// List reads the topic up to its end and returns the manifests of every
// version it holds, in the order they were published, and the current
// pointer.
func (k *Kafka) List(ctx context.Context) (Listing, error) {
	if err := k.catchUp(ctx); err != nil {
		return Listing{}, fmt.Errorf("model topic %s: %w", k.cfg.Topic, err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	var l Listing
	for _, man := range k.cat.manifests {
		l.Versions = append(l.Versions, man)
	}
	slices.SortFunc(l.Versions, func(a, b Manifest) int {
		return cmp.Compare(k.cat.published[a.Version], k.cat.published[b.Version])
	})
	if k.cat.current != nil {
		p := *k.cat.current
		l.Current = &p
	}
	return l, nil
}

// Get reads the topic up to its end and returns the model file of
// version, checked (see Registry).
func (k *Kafka) Get(ctx context.Context, version string) ([]byte, Manifest, error) {
	fail := func(err error) ([]byte, Manifest, error) {
		return nil, Manifest{}, fmt.Errorf("model topic %s: %w", k.cfg.Topic, err)
	}
	if err := k.catchUp(ctx); err != nil {
		return fail(err)
	}
	var data []byte
	var man Manifest
	// A version missing or damaged is not transient: not retried.
	err := k.retry(ctx, "reading model "+version, func() (err error) {
		data, man, err = k.file(ctx, version)
		return err
	})
	if err == nil {
		_, err = decodeFile(data, man)
	}
	if err != nil {
		return fail(err)
	}
	return data, man, nil
}

// Promote makes version current (see Registry).
func (k *Kafka) Promote(ctx context.Context, version string, meta Meta) (Pointer, bool, error) {
	return promote(ctx, k, version, meta)
}

// Rollback makes current again the version current before (see Registry).
func (k *Kafka) Rollback(ctx context.Context, meta Meta) (Pointer, error) {
	return rollback(ctx, k, meta)
}

// pointer reads the topic up to its end and returns the current pointer.
func (k *Kafka) pointer(ctx context.Context) (*Pointer, error) {
	if err := k.catchUp(ctx); err != nil {
		return nil, fmt.Errorf("model topic %s: %w", k.cfg.Topic, err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cat.current == nil {
		return nil, nil
	}
	p := *k.cat.current
	return &p, nil
}

// setPointer writes p, which every follower reads.
func (k *Kafka) setPointer(ctx context.Context, p Pointer, _ []byte) error {
	if err := k.writeJSON(ctx, keyCurrent, p); err != nil {
		return fmt.Errorf("model topic %s: %w", k.cfg.Topic, err)
	}
	k.logger.Info("current model moved", "version", p.Version, "reason", p.Reason, "by", p.By.Host)
	return nil
}

// Topic is the model topic's name.
func (k *Kafka) Topic() string { return k.cfg.Topic }

// Refused counts the current models Follow refused.
func (k *Kafka) Refused() int64 { return k.refused.Load() }

// PutCheckpoint writes data as the checkpoint of lineage: its chunks, then
// the key that names them; then it deletes the chunks of the checkpoint
// it replaces (tombstones, for compaction).
func (k *Kafka) PutCheckpoint(ctx context.Context, lineage string, data []byte) error {
	fail := func(err error) error {
		return fmt.Errorf("checkpoint of lineage %s to %s: %w", lineage, k.cfg.Topic, err)
	}
	if !validLineage(lineage) {
		return fail(errors.New("want a lineage of hex digits"))
	}
	pub, err := Meta{Role: RoleRefit}.publisher()
	if err != nil {
		return fail(err)
	}
	if err := k.catchUp(ctx); err != nil {
		return fail(err)
	}
	sum := sha256.Sum256(data)
	sha := hex.EncodeToString(sum[:])
	// The blob is named by its content, so that a checkpoint never
	// overwrites the chunks of the one a reader may still need.
	blob := checkpointKey(lineage) + "/" + sha[:16]
	chunks, err := kafkaconn.BlobMessages(blob, data, nil, k.cfg.ChunkSize)
	if err != nil {
		return fail(err)
	}
	if err := k.write(ctx, "writing a checkpoint", chunks...); err != nil {
		return fail(err)
	}
	k.mu.Lock()
	prev, hadPrev := k.cat.checkpoints[lineage]
	k.mu.Unlock()
	cp := checkpointManifest{Lineage: lineage, Blob: blob, SHA256: sha, Bytes: int64(len(data)), Chunks: len(chunks), At: time.Now().UTC(), By: pub}
	if err := k.writeJSON(ctx, checkpointKey(lineage), cp); err != nil {
		return fail(err)
	}
	if hadPrev && prev.Blob != blob {
		tombstones := make([]kafkaconn.Message, prev.Chunks)
		for i := range tombstones {
			tombstones[i] = kafkaconn.Message{Key: []byte(kafkaconn.ChunkKey(prev.Blob, i))}
		}
		// The new checkpoint is stored: a failure here only leaves the old
		// chunks to take room.
		if err := k.write(ctx, "deleting the previous checkpoint", tombstones...); err != nil {
			k.logger.Warn("model topic: the previous checkpoint's chunks are not deleted", "lineage", lineage, "err", err)
		}
	}
	return nil
}

// Checkpoint reads the topic up to its end and returns the checkpoint of
// lineage.
func (k *Kafka) Checkpoint(ctx context.Context, lineage string) ([]byte, error) {
	fail := func(err error) ([]byte, error) {
		return nil, fmt.Errorf("model topic %s: checkpoint of lineage %s: %w", k.cfg.Topic, lineage, err)
	}
	if err := k.catchUp(ctx); err != nil {
		return fail(err)
	}
	k.mu.Lock()
	cp, ok := k.cat.checkpoints[lineage]
	var offsets []int64
	var err error
	if ok {
		offsets, err = k.cat.blobOffsets(cp.Blob, cp.SHA256, cp.Chunks)
	}
	k.mu.Unlock()
	switch {
	case !ok:
		return fail(ErrNoCheckpoint)
	case err != nil:
		return fail(err)
	}
	var data []byte
	err = k.retry(ctx, "reading a checkpoint", func() (err error) {
		data, err = k.readBlob(ctx, cp.Blob, cp.SHA256, cp.Bytes, offsets)
		return err
	})
	if err != nil {
		return fail(err)
	}
	return data, nil
}

// Close closes the writer, which waits for the writes under way, and the
// connections; it returns early with ctx's error when ctx ends first.
func (k *Kafka) Close(ctx context.Context) error {
	return k.clients.Close(ctx)
}
