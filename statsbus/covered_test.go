package statsbus

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"

	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/model"
)

// A delta's bytes are hashed once on their way from the stats topic to
// the statistics merged: the blob's checksum for a delta in chunks, the
// delta's own for a delta in one message, and neither the delta's nor the
// statistics' checksum again behind it. A byte flipped on the wire is
// refused either way. What a producer framed damaged (bytes changed
// before their outer checksum was made) is read as it was framed, but
// for the checks behind the checksum: Messages does not frame statistics
// that do not match their own checksum (TestMessagesRefuseDamagedStats),
// and the readers of checkpoints and files verify every checksum.
func TestDeltaHashedOnce(t *testing.T) {
	m := trained(t, 0)
	d := gatheredDelta(t, m)
	data, err := d.Encode()
	if err != nil {
		t.Fatal(err)
	}
	dec := model.NewStatsDecoder(m)
	// The statistics lie between the delta's header and its checksum;
	// within them N follows the magic, version, lineage (16 bytes), views,
	// two ranks and outputs, then S[0,0].
	statsAt := len(data) - sha256.Size - len(d.Stats)
	nAt := statsAt + 8 + 4 + 4 + 16 + 4 + 8 + 4
	sAt := nAt + 8
	// framed is data as a producer would have sealed it had byte at of
	// its statistics been flipped before the delta's checksum was made.
	framed := func(at int) []byte {
		stats := bytes.Clone(data[statsAt : len(data)-sha256.Size])
		stats[at-statsAt] ^= 0x10
		js, _, err := unseal(deltaMagic, "delta", data)
		if err != nil {
			t.Fatal(err)
		}
		return seal(deltaMagic, js, stats)
	}
	outerSum := bytes.Clone(data)
	outerSum[len(outerSum)-1] ^= 1

	type outcome int
	const (
		refused    outcome = iota // the stream refuses the delta
		refusedAcc                // AccumulatorFrom refuses its statistics
		intact                    // read, the statistics sent
		changed                   // read, the statistics as framed
	)
	for _, tc := range []struct {
		name string
		// value is the delta's bytes as framed, wire the index of a byte
		// flipped on the wire (-1 for none).
		value        []byte
		wire         int
		one, chunked outcome
		// text is a fragment of the error, one message's then the
		// chunks'.
		text [2]string
	}{
		{"intact", data, -1, intact, intact, [2]string{}},
		{"a statistic flipped on the wire", data, sAt, refused, refused, [2]string{"checksum mismatch", "a chunk is damaged"}},
		{"the delta's header flipped on the wire", data, 20, refused, refused, [2]string{"checksum mismatch", "a chunk is damaged"}},
		{"the delta's checksum flipped on the wire", data, len(data) - 1, refused, refused, [2]string{"checksum mismatch", "a chunk is damaged"}},
		// The producer's own bytes, under a blob checksum of them: only
		// the single message's own checksum is computed.
		{"the delta's checksum framed damaged", outerSum, -1, refused, intact, [2]string{"checksum mismatch", ""}},
		// Statistics framed damaged under a delta checksum of them: not
		// hashed again, read as framed, but for what a read checks.
		{"the statistics' checksum framed damaged", framed(len(data) - sha256.Size - 1), -1, intact, intact, [2]string{}},
		{"the row count framed damaged", framed(nAt + 6), -1, refusedAcc, refusedAcc, [2]string{"header says 40 rows", "header says 40 rows"}},
		{"a statistic framed damaged", framed(sAt + 4), -1, changed, changed, [2]string{}},
	} {
		for i, chunked := range []bool{false, true} {
			want := tc.one
			name := tc.name + "/one message"
			msgs := []kafkaconn.Message{{Key: []byte(d.Replica), Value: tc.value}}
			if chunked {
				want, name = tc.chunked, tc.name+"/chunks"
				if msgs, err = kafkaconn.BlobMessages(d.Replica, tc.value, nil, 1000); err != nil {
					t.Fatal(err)
				}
			}
			t.Run(name, func(t *testing.T) {
				if tc.wire >= 0 {
					pos, c := tc.wire, 0
					for pos >= len(msgs[c].Value) {
						pos, c = pos-len(msgs[c].Value), c+1
					}
					msgs[c].Value = bytes.Clone(msgs[c].Value)
					msgs[c].Value[pos] ^= 1
				}
				s := NewStream()
				var got *Delta
				var err error
				for o, msg := range at(0, msgs) {
					var d *Delta
					if d, _, err = s.Add(msg); d != nil {
						got = d
					}
					if err != nil || o == len(msgs)-1 {
						break
					}
				}
				if want == refused {
					if got != nil || !errors.Is(err, ErrCorruptDelta) || !strings.Contains(err.Error(), tc.text[i]) {
						t.Fatalf("delta %v, error %v; want %v with %q", got != nil, err, ErrCorruptDelta, tc.text[i])
					}
					return
				}
				if got == nil || err != nil {
					t.Fatalf("no delta: %v", err)
				}
				a, err := got.AccumulatorFrom(dec, nil)
				if want == refusedAcc {
					if !errors.Is(err, ErrCorruptDelta) || !strings.Contains(err.Error(), tc.text[i]) {
						t.Fatalf("statistics %v, error %v; want %v with %q", a != nil, err, ErrCorruptDelta, tc.text[i])
					}
					return
				}
				if err != nil {
					t.Fatalf("statistics refused: %v", err)
				}
				out, _ := a.MarshalBinary()
				if same := bytes.Equal(out, d.Stats); same != (want == intact) {
					t.Errorf("the statistics read are those sent: %v, want %v", same, want == intact)
				}
				// Bytes read on their own are verified whole.
				if _, err := got.Accumulator(m); (err == nil) != bytes.Equal(got.Stats, d.Stats) {
					t.Errorf("Accumulator: %v", err)
				}
			})
		}
	}
}

// Messages does not frame statistics that no longer match their own
// checksum (changed since New): the delta's checksum made over them would
// vouch for them.
func TestMessagesRefuseDamagedStats(t *testing.T) {
	m := trained(t, 0)
	d := gatheredDelta(t, m)
	damaged := *d
	damaged.Stats = bytes.Clone(d.Stats)
	damaged.Stats[60] ^= 0x10
	for _, chunkSize := range []int{0, 1000} {
		if msgs, err := Messages(&damaged, chunkSize); !errors.Is(err, model.ErrCorruptStats) || !strings.Contains(err.Error(), "checksum mismatch") || msgs != nil {
			t.Errorf("chunk size %d: %d messages, %v; want %v", chunkSize, len(msgs), err, model.ErrCorruptStats)
		}
	}
	if msgs, err := Messages(d, 0); err != nil || len(msgs) != 1 {
		t.Errorf("the intact delta: %d messages, %v", len(msgs), err)
	}
}

// AccumulatorFrom verifies the statistics' checksum unless the delta was
// decoded and its statistics are still the bytes decoded; it reads for
// the decoder's model alone.
func TestAccumulatorFromVerifies(t *testing.T) {
	m := trained(t, 0)
	d := gatheredDelta(t, m)
	data, err := d.Encode()
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	dec := model.NewStatsDecoder(m)
	damage := func(d *Delta) *Delta {
		c := *d
		c.Stats = bytes.Clone(d.Stats)
		c.Stats[len(c.Stats)-1] ^= 1 // the checksum: the values are intact
		return &c
	}
	for _, tc := range []struct {
		name string
		d    *Delta
		dec  *model.StatsDecoder
		is   error
		want string
	}{
		{"decoded", decoded, dec, nil, ""},
		{"made", d, dec, nil, ""},
		{"decoded, statistics replaced", damage(decoded), dec, model.ErrCorruptStats, "checksum mismatch"},
		{"made, statistics replaced", damage(d), dec, model.ErrCorruptStats, "checksum mismatch"},
		{"for a model of another lineage", decoded, model.NewStatsDecoder(trained(t, 7)), model.ErrOtherLineage, m.Lineage()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.d.AccumulatorFrom(tc.dec, nil)
			switch {
			case tc.is == nil && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.is == nil:
				if out, _ := got.MarshalBinary(); !bytes.Equal(out, d.Stats) {
					t.Error("read other statistics than those sent")
				}
			case !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want):
				t.Errorf("error %v, want %v with %q", err, tc.is, tc.want)
			}
		})
	}
}
