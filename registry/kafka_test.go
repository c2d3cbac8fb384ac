package registry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/internal/syncbuf"
	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/model"
)

func openKafka(t *testing.T, c *kafkatest.Cluster, topic string, log *syncbuf.Buffer) *Kafka {
	t.Helper()
	cfg := KafkaConfig{Conn: kafkaconn.Config{Brokers: c.Brokers}, Topic: topic}
	if log != nil {
		cfg.Logger = slogTo(log)
	}
	k, err := OpenKafka(testContext(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close(context.Background()) })
	return k
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// sameDecisions fails the test unless a and b score seeded rows alike.
func sameDecisions(t *testing.T, a, b *model.Model) {
	t.Helper()
	rng := rand.New(rand.NewPCG(9, 9))
	views := make([]*mat.Dense, len(a.Spec.Views))
	for l, v := range a.Spec.Views {
		views[l] = mat.NewDense(20, v.Dim, nil)
		for i := range 20 {
			for j := range v.Dim {
				views[l].Set(i, j, rng.NormFloat64())
			}
		}
	}
	var da, db mat.Dense
	a.NewScorer().Score(&da, nil, views)
	b.NewScorer().Score(&db, nil, views)
	if !mat.Equal(&da, &db) {
		t.Error("the models read back score otherwise")
	}
}

// A model of more than 8 MiB goes through a broker with its default
// limits (message.max.bytes 1 MB) in chunks, with a manifest saying what
// it is and who published it, and a replica that starts later loads it
// as the current model.
func TestKafkaBigModel(t *testing.T) {
	c := kafkatest.Start(t, 1, "models")
	ctx := testContext(t)
	m := bigModel(t)
	file, err := encodeModel(m)
	if err != nil {
		t.Fatal(err)
	}
	if len(file) < 8<<20 {
		t.Fatalf("the big model has %d bytes, fewer than 8 MiB", len(file))
	}
	pub := openKafka(t, c, "models", nil)
	start := time.Now()
	man, err := pub.Publish(ctx, m, Meta{Role: RoleTrain, Parent: "0123456789ab", Note: "bootstrap", Host: "trainer-0"}, true)
	if err != nil {
		t.Fatal(err)
	}
	published := time.Since(start)
	sum := sha256.Sum256(file)
	want := Manifest{Version: m.Version, Lineage: m.Lineage(), SHA256: hex.EncodeToString(sum[:]), Bytes: int64(len(file)),
		Chunks: (len(file) + kafkaconn.DefaultChunkSize - 1) / kafkaconn.DefaultChunkSize, Rows: 420, Task: m.Spec.Task,
		Publisher: Publisher{Host: "trainer-0", Role: RoleTrain}, Parent: "0123456789ab", Note: "bootstrap"}
	checkManifest(t, man, want)

	msgs := c.ConsumeAll(t, "models")
	var keys []string
	for _, msg := range msgs {
		keys = append(keys, string(msg.Key))
		if len(msg.Value) > kafkaconn.DefaultChunkSize {
			t.Errorf("message %s of %d bytes", msg.Key, len(msg.Value))
		}
	}
	wantKeys := []string{}
	for i := range want.Chunks {
		wantKeys = append(wantKeys, kafkaconn.ChunkKey("model/"+m.Version, i))
	}
	wantKeys = append(wantKeys, "model/"+m.Version, "current")
	if !slices.Equal(keys, wantKeys) {
		t.Errorf("keys in the topic %v, want %v: chunks, manifest, pointer", keys, wantKeys)
	}

	start = time.Now()
	replica := openKafka(t, c, "models", nil)
	got, gotMan, err := replica.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d bytes in %d chunks: published in %v, opened and loaded by a new replica in %v", len(file), man.Chunks, published, time.Since(start))
	if got.Version != m.Version {
		t.Fatalf("current model %s, want %s", got.Version, m.Version)
	}
	checkManifest(t, gotMan, want)
	sameDecisions(t, got, m)
}

func checkManifest(t *testing.T, got, want Manifest) {
	t.Helper()
	if got.ObjectivePerRow == nil || !(*got.ObjectivePerRow > 0) {
		t.Errorf("manifest objective per row %v, want a positive number", got.ObjectivePerRow)
	}
	if !got.Created.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) {
		t.Errorf("manifest created %v, want the model's time", got.Created)
	}
	got.ObjectivePerRow, got.Created = nil, time.Time{}
	if got != want {
		t.Errorf("manifest\n%+v, want\n%+v", got, want)
	}
}

// damage is a publication of model m that a reader must refuse: the
// messages to write in place of Publish's.
type damage struct {
	name string
	msgs func(t *testing.T, m *model.Model) []kafkatest.Message
}

// rawPublication is what Publish writes for m, in chunks of 1 KiB, for a
// test to damage: the chunks, the manifest and the pointer.
func rawPublication(t *testing.T, m *model.Model) (chunks []kafkaconn.Message, man Manifest, ptr Pointer) {
	t.Helper()
	file, err := encodeModel(m)
	if err != nil {
		t.Fatal(err)
	}
	chunks, err = kafkaconn.BlobMessages(modelKey(m.Version), file, nil, 1024)
	if err != nil {
		t.Fatal(err)
	}
	if len(chunks) < 3 {
		t.Fatalf("%d chunks, want 3 or more", len(chunks))
	}
	pub := Publisher{Host: "test", Role: RoleTrain}
	man = newManifest(m, sumOf(file), len(chunks), Meta{}, pub)
	return chunks, man, Pointer{Version: m.Version, SHA256: man.SHA256, At: time.Now().UTC(), By: pub, Reason: ReasonPublish}
}

func asMessages(t *testing.T, chunks []kafkaconn.Message, man *Manifest, ptr *Pointer) []kafkatest.Message {
	t.Helper()
	var out []kafkatest.Message
	for _, c := range chunks {
		out = append(out, kafkatest.Message{Key: c.Key, Value: c.Value, Headers: kafkatest.HeadersOf(c.Headers)})
	}
	add := func(key string, v any) {
		js, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, kafkatest.Message{Key: []byte(key), Value: js})
	}
	if man != nil {
		add(modelKey(man.Version), man)
	}
	add(keyCurrent, ptr)
	return out
}

var damages = []damage{
	{"a chunk truncated", func(t *testing.T, m *model.Model) []kafkatest.Message {
		chunks, man, ptr := rawPublication(t, m)
		chunks[1].Value = chunks[1].Value[:len(chunks[1].Value)-10]
		return asMessages(t, chunks, &man, &ptr)
	}},
	{"a chunk corrupted", func(t *testing.T, m *model.Model) []kafkatest.Message {
		chunks, man, ptr := rawPublication(t, m)
		chunks[1].Value[100] ^= 0x40
		return asMessages(t, chunks, &man, &ptr)
	}},
	{"a chunk missing", func(t *testing.T, m *model.Model) []kafkatest.Message {
		chunks, man, ptr := rawPublication(t, m)
		return asMessages(t, slices.Delete(chunks, 1, 2), &man, &ptr)
	}},
	{"a pointer to a missing version", func(t *testing.T, m *model.Model) []kafkatest.Message {
		_, _, ptr := rawPublication(t, m)
		return asMessages(t, nil, nil, &ptr)
	}},
	{"a manifest whose sha256 does not match", func(t *testing.T, m *model.Model) []kafkatest.Message {
		chunks, man, ptr := rawPublication(t, m)
		sum := sha256.Sum256([]byte("another file"))
		man.SHA256 = hex.EncodeToString(sum[:])
		ptr.SHA256 = man.SHA256
		return asMessages(t, chunks, &man, &ptr)
	}},
	{"a pointer whose sha256 is not its manifest's", func(t *testing.T, m *model.Model) []kafkatest.Message {
		chunks, man, ptr := rawPublication(t, m)
		ptr.SHA256 = strings.Repeat("ab", 32)
		return asMessages(t, chunks, &man, &ptr)
	}},
}

// A reader never loads a partial or damaged model: every damaged
// publication is refused, logged and counted, and the reader keeps the
// model it has; a replica that starts in that state gets an error naming
// the damage, and its follower refuses the model too. A good publication
// after them is taken.
func TestKafkaRefusesDamagedModels(t *testing.T) {
	c := kafkatest.Start(t, 1, "models")
	ctx := testContext(t)
	var log syncbuf.Buffer
	store := openKafka(t, c, "models", &log)
	m1 := smallModel(t, 1)
	if _, err := store.Publish(ctx, m1, Meta{Role: RoleTrain}, true); err != nil {
		t.Fatal(err)
	}
	followCtx, stopFollowing := context.WithCancel(ctx)
	got := make(chan *model.Model, 10)
	followed := make(chan error, 1)
	go func() { followed <- store.Follow(followCtx, func(m *model.Model, _ Manifest) { got <- m }) }()
	if m := <-got; m.Version != m1.Version {
		t.Fatalf("first model %s, want %s", m.Version, m1.Version)
	}
	for i, d := range damages {
		t.Run(d.name, func(t *testing.T) {
			c.Produce(t, "models", d.msgs(t, smallModel(t, uint64(10+i)))...)
			waitFor(t, "the refusal", func() bool { return store.Refused() == int64(i+1) })
			_, _, err := store.Current(ctx)
			if !errors.Is(err, ErrUnusable) {
				t.Errorf("Current: %v, want an unusable model", err)
			}
			t.Logf("refused: %v", err)

			late := openKafka(t, c, "models", nil)
			if _, _, err := late.Current(ctx); !errors.Is(err, ErrUnusable) {
				t.Errorf("a replica starting now: %v, want an unusable model", err)
			}
			lateCtx, stop := context.WithCancel(ctx)
			var lateGot []*model.Model
			lateDone := make(chan error, 1)
			go func() {
				lateDone <- late.Follow(lateCtx, func(m *model.Model, _ Manifest) { lateGot = append(lateGot, m) })
			}()
			waitFor(t, "the late follower's refusal", func() bool { return late.Refused() == 1 })
			stop()
			if err := <-lateDone; err != nil || len(lateGot) != 0 {
				t.Errorf("the late follower: %v, %d models given", err, len(lateGot))
			}
		})
	}
	if n := len(got); n != 0 {
		t.Fatalf("%d damaged models given to the follower", n)
	}
	if n := strings.Count(log.String(), "the current model is refused"); n != len(damages) {
		t.Errorf("%d refusals logged, want %d:\n%s", n, len(damages), log.String())
	}
	m3 := smallModel(t, 3)
	if _, err := store.Publish(ctx, m3, Meta{Role: RoleRefit}, true); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		if m.Version != m3.Version {
			t.Errorf("model %s given, want %s", m.Version, m3.Version)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a good model published after the damaged ones was not given")
	}
	stopFollowing()
	if err := <-followed; err != nil {
		t.Fatal(err)
	}
}

// Opening refuses a topic that is missing or has more than one
// partition, naming it; an empty topic has no current model and no
// checkpoint.
func TestOpenKafka(t *testing.T) {
	c := kafkatest.Start(t, 2, "two")
	ctx := testContext(t)
	for _, tt := range []struct{ topic, wantErr string }{
		{"nope", "model topic nope does not exist: create it with one partition and cleanup.policy=compact"},
		{"two", "model topic two has 2 partitions, want 1"},
	} {
		_, err := OpenKafka(ctx, KafkaConfig{Conn: kafkaconn.Config{Brokers: c.Brokers}, Topic: tt.topic})
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("open %s: %v, want %q", tt.topic, err, tt.wantErr)
		}
	}
	empty := kafkatest.Start(t, 1, "models")
	k := openKafka(t, empty, "models", nil)
	if _, _, err := k.Current(ctx); !errors.Is(err, ErrNoModel) {
		t.Errorf("Current of an empty topic: %v", err)
	}
	if _, err := k.Checkpoint(ctx, "abc"); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("Checkpoint of an empty topic: %v", err)
	}
}

// The same model published again keeps its first publication: only a
// pointer is written, naming the first file.
func TestKafkaPublishAgain(t *testing.T) {
	c := kafkatest.Start(t, 1, "models")
	ctx := testContext(t)
	k := openKafka(t, c, "models", nil)
	m := smallModel(t, 1)
	first, err := k.Publish(ctx, m, Meta{Role: RoleTrain, Note: "first"}, false)
	if err != nil {
		t.Fatal(err)
	}
	before := len(c.ConsumeAll(t, "models"))
	again := *m
	again.Meta.Created = "2030-01-01T00:00:00Z" // another file of the same model
	man, err := openKafka(t, c, "models", nil).Publish(ctx, &again, Meta{Role: RoleTrain, Note: "again"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if js, firstJS := mustJSON(t, man), mustJSON(t, first); js != firstJS {
		t.Errorf("manifest %s, want the first %s", js, firstJS)
	}
	if after := len(c.ConsumeAll(t, "models")); after != before+1 {
		t.Errorf("%d messages written by the second publication, want the pointer only", after-before)
	}
	_, cur, err := openKafka(t, c, "models", nil).Current(ctx)
	if err != nil || cur.Note != "first" {
		t.Errorf("current %+v, %v; want the first publication", cur, err)
	}
}

// Checkpoints larger than a chunk come back whole, the latest one of each
// lineage, also to a store opened later; the chunks of a replaced
// checkpoint are deleted by tombstones.
func TestKafkaCheckpoints(t *testing.T) {
	c := kafkatest.Start(t, 1, "models")
	ctx := testContext(t)
	k, err := OpenKafka(ctx, KafkaConfig{Conn: kafkaconn.Config{Brokers: c.Brokers}, Topic: "models", ChunkSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close(ctx)
	lineage := smallModel(t, 1).Lineage()
	rng := rand.New(rand.NewPCG(1, 2))
	var last []byte
	for i := range 2 {
		last = make([]byte, 4500+i)
		for j := range last {
			last[j] = byte(rng.Uint32())
		}
		if err := k.PutCheckpoint(ctx, lineage, last); err != nil {
			t.Fatal(err)
		}
		got, err := k.Checkpoint(ctx, lineage)
		if err != nil || string(got) != string(last) {
			t.Fatalf("checkpoint %d: %d bytes, %v", i, len(got), err)
		}
	}
	got, err := openKafka(t, c, "models", nil).Checkpoint(ctx, lineage)
	if err != nil || string(got) != string(last) {
		t.Fatalf("checkpoint read by a new store: %d bytes, %v", len(got), err)
	}
	tombstones := 0
	for _, msg := range c.ConsumeAll(t, "models") {
		if msg.Value == nil && strings.HasPrefix(string(msg.Key), "checkpoint/"+lineage+"/") {
			tombstones++
		}
	}
	if tombstones != 5 {
		t.Errorf("%d tombstones, want the 5 chunks of the first checkpoint", tombstones)
	}
	if _, err := k.Checkpoint(ctx, "abcdef"); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("another lineage: %v", err)
	}
	if err := k.PutCheckpoint(ctx, "no/lineage", nil); err == nil {
		t.Error("a lineage with a slash was taken")
	}
}

// No message of the topic can stop a reader: the catalog takes any key,
// value and headers without panicking, and keeps a manifest, pointer or
// checkpoint only under its own key with a valid checksum.
func FuzzCatalogApply(f *testing.F) {
	sha := strings.Repeat("a1", 32)
	f.Add("current", fmt.Sprintf(`{"version":"v1","sha256":%q}`, sha), "", "", "", "")
	f.Add("model/v1", fmt.Sprintf(`{"version":"v1","sha256":%q,"bytes":10,"chunks":1}`, sha), "", "", "", "")
	f.Add("checkpoint/ab", fmt.Sprintf(`{"lineage":"ab","blob":"checkpoint/ab/x","sha256":%q,"bytes":1,"chunks":1}`, sha), "", "", "", "")
	f.Add("model/v1/chunk/0", "x", "model/v1", "0/1", sha, "1")
	f.Fuzz(func(t *testing.T, key, value, blob, chunk, chunkSHA, size string) {
		c := newCatalog()
		var headers []kafkaconn.Header
		if blob != "" {
			headers = []kafkaconn.Header{{Key: kafkaconn.HeaderBlob, Value: []byte(blob)}, {Key: kafkaconn.HeaderChunk, Value: []byte(chunk)},
				{Key: kafkaconn.HeaderBlobSHA256, Value: []byte(chunkSHA)}, {Key: kafkaconn.HeaderBlobBytes, Value: []byte(size)}}
		}
		c.apply(kafkaconn.Message{Key: []byte(key), Value: []byte(value), Headers: headers, Offset: 7}, slogTo(&syncbuf.Buffer{}))
		for v, m := range c.manifests {
			if modelKey(v) != key || checkBlob(v, m.SHA256, m.Bytes, m.Chunks) != nil {
				t.Fatalf("manifest %+v kept from key %q", m, key)
			}
		}
		if p := c.current; p != nil && (key != keyCurrent || checkSum(p.Version, p.SHA256) != nil) {
			t.Fatalf("pointer %+v kept from key %q", p, key)
		}
		for l, cp := range c.checkpoints {
			if checkpointKey(l) != key || !strings.HasPrefix(cp.Blob, key+"/") {
				t.Fatalf("checkpoint %+v kept from key %q", cp, key)
			}
		}
		c.apply(kafkaconn.Message{Key: []byte(key), Offset: 8}, slogTo(&syncbuf.Buffer{})) // its tombstone
		if len(c.manifests)+len(c.checkpoints)+len(c.chunks) != 0 || c.current != nil {
			t.Fatalf("a tombstone of %q left %+v", key, c)
		}
	})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	js, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(js)
}
