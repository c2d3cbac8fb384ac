package statsbus

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mvml/mvml/kafkaconn"
)

// from is d as replica's delta number seq.
func from(d *Delta, replica string, seq uint64) *Delta {
	c := *d
	c.Replica, c.Seq = replica, seq
	return &c
}

// at gives msgs consecutive offsets from first.
func at(first int64, msgs []kafkaconn.Message) []kafkaconn.Message {
	for i := range msgs {
		msgs[i].Offset = first + int64(i)
	}
	return msgs
}

// Deltas come back from their messages, one message or a blob's chunks
// interleaved with others, in the order they complete; a
// damaged message costs itself alone; Resume points at the first chunk of
// a blob not complete, and Abandon forgets one left incomplete long
// enough.
func TestStream(t *testing.T) {
	m := trained(t, 0)
	d := gatheredDelta(t, m)
	small, big := from(d, "small", 1), from(d, "big", 1)
	one, err := Messages(small, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(one) != 1 || string(one[0].Key) != "small" {
		t.Fatalf("a delta below the chunk size: %d messages, key %q", len(one), one[0].Key)
	}
	chunks, err := Messages(big, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(chunks) < 3 || !strings.HasPrefix(string(chunks[0].Key), "big/chunk/") {
		t.Fatalf("a delta above the chunk size: %d messages, first key %q", len(chunks), chunks[0].Key)
	}
	garbage := kafkaconn.Message{Key: []byte("x"), Value: []byte("not a delta")}
	// chunk 0, the small delta, garbage, the other chunks, then every
	// chunk again (a producer's retry: the delta again, for the ledger to
	// drop).
	msgs := append([]kafkaconn.Message{chunks[0], one[0], garbage}, chunks[1:]...)
	msgs = at(100, append(msgs, chunks...))
	s := NewStream()
	var got []string
	for i, msg := range msgs {
		delta, first, err := s.Add(msg)
		switch {
		case i == 2:
			if !errors.Is(err, ErrCorruptDelta) || !strings.Contains(err.Error(), "offset 102") {
				t.Errorf("garbage: %v, want a corrupt delta at offset 102", err)
			}
			continue
		case err != nil:
			t.Fatalf("message %d: %v", i, err)
		case delta != nil:
			got = append(got, fmt.Sprint(delta.Replica, "@", first))
			if !bytes.Equal(delta.Stats, d.Stats) || delta.Rows != 40 {
				t.Errorf("delta of %s differs from the one sent", delta.Replica)
			}
		}
		if i == 1 && s.Resume(102) != 100 {
			t.Errorf("with a blob open since offset 100, resume at %d", s.Resume(102))
		}
	}
	if want := fmt.Sprintf("small@101,big@100,big@%d", 103+len(chunks)-1); strings.Join(got, ",") != want {
		t.Errorf("deltas@first offsets %v, want %s", got, want)
	}
	if r := s.Resume(200); r != 200 {
		t.Errorf("nothing open: resume at %d, want 200", r)
	}

	// A blob whose writer died after its first chunk.
	s.Add(at(300, slices.Clone(chunks[:1]))[0])
	if gone := s.Abandon(350, 100); gone != nil || s.Resume(360) != 300 {
		t.Errorf("abandoned %v too early, resume at %d", gone, s.Resume(360))
	}
	if gone := s.Abandon(401, 100); len(gone) != 1 || !strings.Contains(gone[0], "big from offset 300") || s.Resume(402) != 402 {
		t.Errorf("abandoned %v, resume at %d", gone, s.Resume(402))
	}
	// A damaged chunk costs its blob.
	bad := at(500, slices.Clone(chunks))
	bad[1].Value = bytes.Clone(bad[1].Value)
	bad[1].Value[0] ^= 1
	var errs int
	for _, msg := range bad {
		if delta, _, err := s.Add(msg); err != nil {
			errs++
		} else if delta != nil {
			t.Error("a damaged blob gave a delta")
		}
	}
	if errs != 1 || s.Resume(600) != 600 {
		t.Errorf("%d errors for a damaged blob, resume at %d", errs, s.Resume(600))
	}
}
