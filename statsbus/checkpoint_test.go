package statsbus

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mvml/mvml/model"
)

func checkpointOf(t testing.TB, acc *model.Accumulator, rs Ranges) *Checkpoint {
	t.Helper()
	var l Ledger
	l.Add(&Header{Replica: "serve-0", Epoch: "E", Seq: 1, Ranges: rs})
	c, err := NewCheckpoint(acc, CheckpointHeader{NextSOffset: 42, Model: "abc", Ledger: l,
		Created: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A checkpoint goes through bytes unchanged, decayed statistics and all,
// and its statistics are read by a copy of the model.
func TestCheckpointRoundTrip(t *testing.T) {
	m := trained(t, 0)
	acc, rs := gathered(t, m)
	acc.Decay(0.5)
	c := checkpointOf(t, acc, rs)
	if c.Lineage != m.Lineage() || c.Rows != 20 || c.Format != CheckpointFormat {
		t.Errorf("header %+v", c.CheckpointHeader)
	}
	data, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeCheckpoint(data)
	if err != nil {
		t.Fatal(err)
	}
	if back.NextSOffset != 42 || back.Model != "abc" || back.Rows != 20 || !back.Created.Equal(c.Created) ||
		!rangesEqual(back.Merged, rs) || len(back.Seen) != 1 || back.Seen[0].Epoch != "E" || !bytes.Equal(back.Stats, c.Stats) {
		t.Errorf("read back %+v, want %+v", back.CheckpointHeader, c.CheckpointHeader)
	}
	got, err := back.Accumulator(m)
	if err != nil {
		t.Fatal(err)
	}
	if got.Rows() != 20 {
		t.Errorf("%v rows, want 20", got.Rows())
	}
	if v, _ := back.Judge(&Header{Replica: "serve-0", Epoch: "E", Seq: 1}); v != Repeat {
		t.Errorf("the checkpoint's ledger judges its own delta %v", v)
	}
	empty, err := NewCheckpoint(m.NewAccumulator(), CheckpointHeader{NextSOffset: 7})
	if err != nil {
		t.Fatalf("the first checkpoint of a lineage, without statistics: %v", err)
	}
	if empty.Rows != 0 || empty.Model != "" {
		t.Errorf("empty checkpoint %+v", empty.CheckpointHeader)
	}
}

// What a checkpoint lacks or has wrong is refused, by name.
func TestCheckpointRefuses(t *testing.T) {
	m := trained(t, 0)
	acc, rs := gathered(t, m)
	c := checkpointOf(t, acc, rs)
	if _, err := NewCheckpoint(acc, CheckpointHeader{NextSOffset: -1}); err == nil || !strings.Contains(err.Error(), "next stats topic offset -1") {
		t.Errorf("a negative offset: %v", err)
	}
	stranger := trained(t, 7)
	if _, err := c.Accumulator(stranger); !errors.Is(err, model.ErrOtherLineage) {
		t.Errorf("statistics for a model of another lineage: %v", err)
	}
	lying := *c
	lying.Rows = 41
	if _, err := lying.Accumulator(m); !errors.Is(err, ErrCorruptCheckpoint) || !strings.Contains(err.Error(), "header says 41 rows") {
		t.Errorf("a header's row count the statistics do not hold: %v", err)
	}
	data, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	withHeader := func(js string) []byte { return seal(checkpointMagic, []byte(js), c.Stats) }
	valid := func(set string) string {
		return fmt.Sprintf(`{"format":1,"lineage":"%s","next_s_offset":3,"rows":40%s}`, m.Lineage(), set)
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "too short"},
		{"a delta", seal(deltaMagic, []byte(valid("")), c.Stats), "bad magic"},
		{"truncated", data[:len(data)-1], "checksum mismatch"},
		{"header not JSON", withHeader(`{"format":1`), "header:"},
		{"no lineage", withHeader(`{"format":1,"next_s_offset":3}`), "no lineage"},
		{"no statistics", seal(checkpointMagic, []byte(valid("")), nil), "no statistics"},
		{"negative rows", withHeader(valid(`,"rows":-1`)), "-1 rows"},
		{"unsorted merged runs", withHeader(valid(`,"merged":[{"topic":"l","partition":0,"runs":[[4,5],[1,2]]}]`)), "ledger"},
		{"an epoch seen twice", withHeader(valid(`,"seen":[{"replica":"a","epoch":"e","seqs":[[1,2]]},{"replica":"a","epoch":"e","seqs":[[3,4]]}]`)), "seen twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeCheckpoint(tc.data)
			if !errors.Is(err, ErrCorruptCheckpoint) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %v with %q", err, ErrCorruptCheckpoint, tc.want)
			}
		})
	}
	if _, err := DecodeCheckpoint(withHeader(valid(`,"format":3`))); err == nil || !strings.Contains(err.Error(), "format 3, this build reads formats 1 to 2") {
		t.Errorf("another format: %v", err)
	}
	if _, err := DecodeCheckpoint(withHeader(valid(""))); err != nil {
		t.Errorf("the valid header of these cases is refused: %v", err)
	}
}

// The decoder never panics, what it accepts is a valid checkpoint, and no
// byte of a valid checkpoint can change unnoticed.
func FuzzDecodeCheckpoint(f *testing.F) {
	m := trained(f, 0)
	acc, rs := gathered(f, m)
	data, err := checkpointOf(f, acc, rs).Encode()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data, uint32(0), byte(0))
	f.Add(data, uint32(20), byte(0x10))
	f.Add([]byte(checkpointMagic), uint32(0), byte(0))
	f.Fuzz(func(t *testing.T, in []byte, pos uint32, flip byte) {
		resummed := append(bytes.Clone(in), make([]byte, sha256.Size)...)
		sum := sha256.Sum256(in)
		copy(resummed[len(in):], sum[:])
		for _, candidate := range [][]byte{in, resummed} {
			got, err := DecodeCheckpoint(candidate)
			if err != nil {
				continue
			}
			if err := got.check(); err != nil {
				t.Fatalf("accepted an invalid checkpoint: %v", err)
			}
			again, err := got.Encode()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := DecodeCheckpoint(again); err != nil {
				t.Fatalf("an accepted checkpoint encodes to bytes that are refused: %v", err)
			}
		}
		if flip == 0 {
			return
		}
		changed := bytes.Clone(data)
		changed[int(pos)%len(changed)] ^= flip
		if _, err := DecodeCheckpoint(changed); err == nil {
			t.Fatalf("byte %d changed by %#x: accepted", int(pos)%len(changed), flip)
		}
	})
}
