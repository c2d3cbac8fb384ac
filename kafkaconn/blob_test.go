package kafkaconn

import (
	"bytes"
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/mvml/mvml/internal/kafkatest"
)

// randomBytes are n seeded pseudo-random bytes.
func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func mustBlob(t *testing.T, key string, value []byte, chunkSize int) []Message {
	t.Helper()
	msgs, err := BlobMessages(key, value, []Header{{Key: "note", Value: []byte("kept")}}, chunkSize)
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// assemble feeds msgs to a new assembler in order and returns the values
// completed and the last error.
func assemble(msgs []Message) (a *Assembler, values [][]byte, err error) {
	a = NewAssembler()
	for _, m := range msgs {
		_, v, e := a.Add(m)
		if e != nil {
			err = e
		}
		if v != nil {
			values = append(values, v)
		}
	}
	return a, values, err
}

// A blob comes back whole from its chunks in any order, taken any number
// of times, and never in part: a chunk missing, damaged, truncated or
// padded gives no value, and the damage is an error naming the blob.
func TestAssembler(t *testing.T) {
	value := randomBytes(1000, 1)
	chunks := func() []Message { return mustBlob(t, "model/v1", value, 300) } // 300+300+300+100
	for _, tt := range []struct {
		name      string
		value     []byte // the value of the blob, when not value
		msgs      func() []Message
		wantValue bool
		wantErr   string
		missing   []int
	}{
		{name: "in order", msgs: chunks, wantValue: true},
		{name: "out of order", msgs: func() []Message {
			m := chunks()
			return []Message{m[2], m[0], m[3], m[1]}
		}, wantValue: true},
		{name: "duplicates", msgs: func() []Message {
			m := chunks()
			return []Message{m[1], m[1], m[0], m[2], m[0], m[3]}
		}, wantValue: true},
		{name: "a value of 0 bytes", value: []byte{}, msgs: func() []Message { return mustBlob(t, "model/v1", []byte{}, 300) }, wantValue: true},
		{name: "one chunk", value: value[:300], msgs: func() []Message { return mustBlob(t, "model/v1", value[:300], 300) }, wantValue: true},
		{name: "over many chunks", msgs: func() []Message { return mustBlob(t, "model/v1", value, 7) }, wantValue: true},
		{name: "with another blob's chunks between", msgs: func() []Message {
			m, o := chunks(), mustBlob(t, "model/v2", randomBytes(500, 2), 300)
			return []Message{m[0], o[0], m[1], m[2], m[3]}
		}, wantValue: true},
		{name: "a chunk missing", msgs: func() []Message {
			m := chunks()
			return []Message{m[0], m[1], m[3]}
		}, missing: []int{2}},
		{name: "a chunk damaged", msgs: func() []Message {
			m := chunks()
			m[2].Value[17] ^= 1
			return m
		}, wantErr: "blob model/v1: its 1000 bytes have SHA-256"},
		{name: "a chunk truncated", msgs: func() []Message {
			m := chunks()
			m[1].Value = m[1].Value[:299]
			return m
		}, wantErr: "hold 999 bytes, not its 1000: a chunk is truncated"},
		{name: "a chunk padded", msgs: func() []Message {
			m := chunks()
			m[3].Value = append(m[3].Value, 0)
			return m
		}, wantErr: "its chunks hold more than its 1000 bytes"},
		{name: "chunks of another write of the key", msgs: func() []Message {
			m, o := chunks(), mustBlob(t, "model/v1", randomBytes(1000, 3), 300)
			return []Message{m[0], m[1], o[2], o[3]}
		}, missing: []int{2, 3}},
		{name: "not a chunk", msgs: func() []Message {
			return []Message{{Key: []byte("model/v1"), Value: []byte("{}")}}
		}, wantErr: ErrNotChunk.Error()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			want := value
			if tt.value != nil {
				want = tt.value
			}
			a, values, err := assemble(tt.msgs())
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("error %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
			}
			if tt.wantValue {
				if len(values) != 1 || !bytes.Equal(values[0], want) {
					t.Fatalf("%d values, want exactly the blob's", len(values))
				}
			} else if len(values) > 0 {
				t.Fatalf("a value of %d bytes from a blob that is not whole", len(values[0]))
			}
			if tt.missing != nil {
				msgs := tt.msgs()
				c, err := ParseChunk(msgs[0].Key, msgs[0].Headers)
				if err != nil {
					t.Fatal(err)
				}
				if got := a.Missing("model/v1", c.SHA256); !slices.Equal(got, tt.missing) {
					t.Errorf("missing %v, want %v", got, tt.missing)
				}
				a.Drop("model/v1", c.SHA256)
				if got := a.Missing("model/v1", c.SHA256); got != nil {
					t.Errorf("missing %v after Drop, want nil", got)
				}
			}
		})
	}
}

// The headers of a chunk are read exactly or refused with the reason.
func TestParseChunk(t *testing.T) {
	good := mustBlob(t, "b", randomBytes(10, 4), 4)[1]
	with := func(name, value string) []Header {
		hs := slices.Clone(good.Headers)
		for i := range hs {
			if hs[i].Key == name {
				hs[i].Value = []byte(value)
			}
		}
		return hs
	}
	for _, tt := range []struct {
		name    string
		key     string
		headers []Header
		wantErr string
	}{
		{"good", "b/chunk/1", good.Headers, ""},
		{"no blob header", "b/chunk/1", good.Headers[:1], "not a chunk"},
		{"no size", "b/chunk/1", good.Headers[:len(good.Headers)-1], "no header mvml-blob-bytes"},
		{"header twice", "b/chunk/1", append(slices.Clone(good.Headers), Header{Key: HeaderChunk, Value: []byte("1/3")}), "given twice"},
		{"index past count", "b/chunk/1", with(HeaderChunk, "3/3"), "want i/n"},
		{"no count", "b/chunk/1", with(HeaderChunk, "1"), "want i/n"},
		{"uppercase sha", "b/chunk/1", with(HeaderBlobSHA256, strings.ToUpper(string(good.Headers[3].Value))), "lowercase hex"},
		{"negative size", "b/chunk/1", with(HeaderBlobBytes, "-1"), "want a size from 0"},
		{"size too large", "b/chunk/1", with(HeaderBlobBytes, "1099511627776"), "want a size from 0"},
		{"more chunks than bytes", "b/chunk/1", with(HeaderBlobBytes, "2"), "3 chunks cannot hold 2 bytes"},
		{"key of another chunk", "b/chunk/2", good.Headers, `its headers make it b/chunk/1`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseChunk([]byte(tt.key), tt.headers)
			if tt.wantErr == "" {
				if err != nil || c.Blob != "b" || c.Index != 1 || c.Count != 3 || c.Bytes != 10 {
					t.Fatalf("%+v, %v", c, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

// ParseChunk never panics, and a chunk it accepts is consistent with its
// key; the assembler never yields a value from chunks whose content does
// not match their checksum.
func FuzzParseChunk(f *testing.F) {
	for _, m := range mustBlobF(f, "model/abc", randomBytes(10, 5), 4) {
		f.Add(string(m.Key), string(m.Headers[2].Value), string(m.Headers[3].Value), string(m.Headers[4].Value), string(m.Value))
	}
	f.Add("x/chunk/0", "0/1", strings.Repeat("0", 64), "0", "")
	f.Add("x/chunk/-1", "-1/0", "zz", "-5", "a")
	f.Fuzz(func(t *testing.T, key, chunk, sha, size, value string) {
		blob, _, _ := strings.Cut(key, "/chunk/")
		hs := []Header{{Key: HeaderBlob, Value: []byte(blob)}, {Key: HeaderChunk, Value: []byte(chunk)},
			{Key: HeaderBlobSHA256, Value: []byte(sha)}, {Key: HeaderBlobBytes, Value: []byte(size)}}
		c, err := ParseChunk([]byte(key), hs)
		if err != nil {
			return
		}
		if ChunkKey(c.Blob, c.Index) != key || c.Index < 0 || c.Index >= c.Count || c.Bytes < 0 || c.Bytes > MaxBlobBytes {
			t.Fatalf("accepted %+v for key %q", c, key)
		}
		a := NewAssembler()
		_, v, err := a.Add(Message{Key: []byte(key), Value: []byte(value), Headers: hs})
		if v != nil && (err != nil || len(v) != len(value) || c.Count != 1) {
			t.Fatalf("value %q, error %v from one chunk %+v", v, err, c)
		}
	})
}

func mustBlobF(f *testing.F, key string, value []byte, chunkSize int) []Message {
	msgs, err := BlobMessages(key, value, []Header{{Key: "note", Value: []byte("kept")}}, chunkSize)
	if err != nil {
		f.Fatal(err)
	}
	return msgs
}

// fetchAll reads every message of partition 0 of topic as the broker
// sends it (kafka-go's Reader reads an empty value as none).
func fetchAll(t *testing.T, brokers []string, topic string) []Message {
	t.Helper()
	transport := &kafka.Transport{}
	defer transport.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Transport: transport}
	var msgs []Message
	for offset := int64(0); ; {
		res, err := client.Fetch(context.Background(), &kafka.FetchRequest{Topic: topic, Offset: offset, MaxBytes: 1 << 20, MaxWait: 10 * time.Millisecond})
		if err == nil {
			err = res.Error
		}
		if err != nil {
			t.Fatal(err)
		}
		for {
			r, err := res.Records.ReadRecord()
			if err != nil {
				break
			}
			key, _ := kafka.ReadAll(r.Key)
			value, _ := kafka.ReadAll(r.Value)
			if r.Offset >= offset {
				msgs = append(msgs, Message{Offset: r.Offset, Key: key, Value: value, Headers: headersOf(slices.Clone(r.Headers))})
				offset = r.Offset + 1
			}
		}
		if offset >= res.HighWatermark {
			return msgs
		}
	}
}

// A blob larger than the broker's default message.max.bytes (1 MB) goes
// through a real broker in chunks of the default size and comes back
// whole; so does an empty value, which must not read as a tombstone.
func TestWriteBlobThroughBroker(t *testing.T) {
	c := kafkatest.Start(t, 1, "blobs")
	w := Config{Brokers: c.Brokers}.NewWriter(WriterConfig{Topic: "blobs", BatchTimeout: time.Millisecond})
	defer w.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	big := randomBytes(3<<20+5, 6)
	for _, v := range [][]byte{big, {}} {
		if err := WriteBlob(ctx, w, "big", v, nil, 0); err != nil {
			t.Fatal(err)
		}
	}
	msgs := fetchAll(t, c.Brokers, "blobs")
	if len(msgs) != 8 {
		t.Fatalf("%d messages, want 7 chunks of 512 KiB at most and one empty", len(msgs))
	}
	a := NewAssembler()
	var got [][]byte
	for _, m := range msgs {
		if m.Value == nil {
			t.Errorf("chunk %s read back without a value (a tombstone)", m.Key)
		}
		_, v, err := a.Add(m)
		if err != nil {
			t.Fatal(err)
		}
		if v != nil {
			got = append(got, v)
		}
	}
	if len(got) != 2 || !bytes.Equal(got[0], big) || len(got[1]) != 0 {
		t.Fatalf("%d values back, want the big one and the empty one", len(got))
	}
	if err := WriteBlob(ctx, w, "", big, nil, 0); err == nil || !strings.Contains(err.Error(), "empty key") {
		t.Errorf("a blob without a key: %v", err)
	}
}
