package statsbus

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/schemas"
)

// twoViews draws n rows of two views whose class (1, 2 or 3) shows in
// both.
func twoViews(seed uint64, n int) ([]*mat.Dense, []float64) {
	rng := rand.New(rand.NewPCG(seed, 1))
	views := []*mat.Dense{mat.NewDense(n, 2, nil), mat.NewDense(n, 3, nil)}
	labels := make([]float64, n)
	for i := range n {
		c := i % 3
		labels[i] = float64(c + 1)
		for l, v := range views {
			for j := range v.RawRowView(i) {
				v.Set(i, j, float64(c*(l+1))+0.5*rng.NormFloat64())
			}
		}
	}
	return views, labels
}

func trained(t testing.TB, seed uint64) *model.Model {
	t.Helper()
	spec := &schemas.ViewSpec{Task: schemas.Classification, ID: "id", Label: "label", Views: []schemas.View{
		{Name: "a", Prefix: "a_", Dim: 2}, {Name: "b", Prefix: "b_", Dim: 3},
	}}
	if err := spec.Validate(); err != nil {
		t.Fatal(err)
	}
	views, labels := twoViews(1, 90)
	cfg := model.DefaultTrainConfig()
	cfg.Landmarks, cfg.Seed = 20, seed
	m, err := model.Train(context.Background(), spec, views, labels, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// gathered returns the statistics of 40 rows on m, their label offsets
// being 100…139 of partition 2 of topic labels.
func gathered(t testing.TB, m *model.Model) (*model.Accumulator, Ranges) {
	t.Helper()
	views, labels := twoViews(2, 40)
	var u mat.Dense
	m.Project(&u, views)
	acc := m.NewAccumulator()
	if err := acc.AddProjected(&u, labels); err != nil {
		t.Fatal(err)
	}
	var rs Ranges
	for i := range 40 {
		rs.Add("labels", 2, int64(100+(i*7)%40)) // joined out of order
	}
	return acc, rs
}

func origin(rs Ranges) Header {
	return Header{BaseVersion: "v1", Replica: "serve-0", Epoch: NewEpoch(), Seq: 3,
		Created: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC), Ranges: rs}
}

// gatheredDelta is the delta of gathered's rows on m, with origin's
// header.
func gatheredDelta(t testing.TB, m *model.Model) *Delta {
	t.Helper()
	acc, rs := gathered(t, m)
	d, err := New(acc, origin(rs))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// A delta goes through bytes unchanged, and its statistics are read by a
// copy of the model they were gathered on.
func TestDeltaRoundTrip(t *testing.T) {
	m := trained(t, 0)
	acc, rs := gathered(t, m)
	d, err := New(acc, origin(rs))
	if err != nil {
		t.Fatal(err)
	}
	if d.Format != Format || d.Lineage != m.Lineage() || d.Rows != 40 {
		t.Errorf("header %+v: want format %d, lineage %s, 40 rows", d.Header, Format, m.Lineage())
	}
	if !rangesEqual(d.Ranges, Ranges{{Topic: "labels", Partition: 2, Runs: Runs{{100, 140}}}}) {
		t.Errorf("ranges %v, want labels/2 [100,140)", d.Ranges)
	}
	data, err := d.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if back.ID() != d.ID() || back.Lineage != d.Lineage || back.BaseVersion != "v1" || back.Rows != 40 ||
		!back.Created.Equal(d.Created) || !rangesEqual(back.Ranges, d.Ranges) || !bytes.Equal(back.Stats, d.Stats) {
		t.Errorf("read back %+v, want %+v", back.Header, d.Header)
	}
	var copied bytes.Buffer
	if err := m.Encode(&copied); err != nil {
		t.Fatal(err)
	}
	refitter, err := model.Decode(&copied)
	if err != nil {
		t.Fatal(err)
	}
	got, err := back.Accumulator(refitter)
	if err != nil {
		t.Fatal(err)
	}
	if got.Rows() != 40 {
		t.Errorf("statistics of %v rows, want 40", got.Rows())
	}
	a, err := acc.RefitCold(context.Background(), m.Config.Fit)
	if err != nil {
		t.Fatal(err)
	}
	b, err := got.RefitCold(context.Background(), m.Config.Fit)
	if err != nil {
		t.Fatal(err)
	}
	if a.Version != b.Version {
		t.Errorf("the delta's statistics refit to version %s, the replica's to %s", b.Version, a.Version)
	}
	if id := d.ID(); id.String() != "serve-0/"+d.Epoch+"/3" {
		t.Errorf("ID %s", id)
	}
}

// What a delta lacks or has wrong is refused, by name.
func TestDeltaRefuses(t *testing.T) {
	m := trained(t, 0)
	acc, rs := gathered(t, m)
	for _, tc := range []struct {
		name string
		set  func(*Header)
		want string
	}{
		{"no replica", func(h *Header) { h.Replica = "" }, "no replica"},
		{"no epoch", func(h *Header) { h.Epoch = "" }, "no epoch"},
		{"sequence 0", func(h *Header) { h.Seq = 0 }, "sequence number 0"},
		{"bad ranges", func(h *Header) { h.Ranges = Ranges{{Topic: "labels", Runs: Runs{{5, 2}}}} }, "label offsets: topic labels partition 0: run [5,2)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := origin(rs)
			tc.set(&h)
			if _, err := New(acc, h); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, want %q", err, tc.want)
			}
		})
	}
	decayed, _ := gathered(t, m)
	decayed.Decay(0.33)
	if _, err := New(decayed, origin(rs)); err == nil || !strings.Contains(err.Error(), "rows, not a whole number") {
		t.Errorf("decayed statistics: %v, want a refusal", err)
	}
	d, err := New(acc, origin(rs))
	if err != nil {
		t.Fatal(err)
	}
	stranger := trained(t, 7)
	if _, err := d.Accumulator(stranger); !errors.Is(err, model.ErrOtherLineage) ||
		!strings.Contains(err.Error(), m.Lineage()) || !strings.Contains(err.Error(), stranger.Lineage()) {
		t.Errorf("statistics for a model of another lineage: %v, want both lineages named", err)
	}
	lying := *d
	lying.Rows = 41
	if _, err := lying.Accumulator(m); !errors.Is(err, ErrCorruptDelta) || !strings.Contains(err.Error(), "header says 41 rows, the statistics hold 40") {
		t.Errorf("a header's row count that the statistics do not hold: %v", err)
	}
	mislabelled := *d
	mislabelled.Lineage = "0123456789abcdef"
	if _, err := mislabelled.Accumulator(m); !errors.Is(err, ErrCorruptDelta) || !strings.Contains(err.Error(), "header says lineage 0123456789abcdef") {
		t.Errorf("a header's lineage that the statistics do not have: %v", err)
	}
	damaged := *d
	damaged.Stats = bytes.Clone(d.Stats)
	damaged.Stats[50] ^= 1
	if _, err := damaged.Accumulator(m); !errors.Is(err, model.ErrCorruptStats) {
		t.Errorf("damaged statistics: %v", err)
	}
}

// Damaged bytes are refused with ErrCorruptDelta and what is wrong.
func TestDecodeRefuses(t *testing.T) {
	m := trained(t, 0)
	d := gatheredDelta(t, m)
	data, err := d.Encode()
	if err != nil {
		t.Fatal(err)
	}
	withStats := func(js string, stats []byte) []byte {
		out := []byte(deltaMagic)
		out = binary.LittleEndian.AppendUint32(out, uint32(len(js)))
		out = append(out, js...)
		out = append(out, stats...)
		sum := sha256.Sum256(out)
		return append(out, sum[:]...)
	}
	withHeader := func(js string) []byte { return withStats(js, d.Stats) }
	valid := func(set string) string {
		return fmt.Sprintf(`{"format":1,"lineage":"%s","replica":"r","epoch":"e","seq":1,"rows":40,"ranges":[]%s}`, m.Lineage(), set)
	}
	flipped := bytes.Clone(data)
	flipped[20] ^= 4
	longHeader := bytes.Clone(data)
	binary.LittleEndian.PutUint32(longHeader[8:], math.MaxUint32)
	sum := sha256.Sum256(longHeader[:len(longHeader)-sha256.Size])
	copy(longHeader[len(longHeader)-sha256.Size:], sum[:])
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "too short"},
		{"statistics, not a delta", d.Stats, "bad magic"},
		{"truncated", data[:len(data)-1], "checksum mismatch"},
		{"a changed byte", flipped, "checksum mismatch"},
		{"header longer than the delta", longHeader, "header of 4294967295 bytes"},
		{"header not JSON", withHeader(`{"format":1,`), "header:"},
		{"no statistics", withStats(valid(""), nil), "no statistics"},
		{"no lineage", withHeader(`{"format":1,"replica":"r","epoch":"e","seq":1}`), "no lineage"},
		{"unsorted runs", withHeader(valid(`,"ranges":[{"topic":"l","partition":0,"runs":[[4,5],[1,2]]}]`)), "label offsets"},
		{"negative rows", withHeader(valid(`,"rows":-1`)), "-1 rows"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(tc.data)
			if !errors.Is(err, ErrCorruptDelta) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %v with %q", err, ErrCorruptDelta, tc.want)
			}
		})
	}
	if _, err := Decode(withHeader(valid(`,"format":2`))); err == nil || !strings.Contains(err.Error(), "format 2, this build reads format 1") {
		t.Errorf("another format: %v", err)
	}
	if _, err := Decode(withHeader(valid(""))); err != nil {
		t.Errorf("the valid header of these cases is refused: %v", err)
	}
}

func TestNewEpoch(t *testing.T) {
	a, b := NewEpoch(), NewEpoch()
	if a == b || len(a) < 16 {
		t.Errorf("epochs %q and %q: want two distinct random strings", a, b)
	}
}

// The decoder never panics, what it accepts is a valid delta (and so is
// what it accepts without computing the checksum, which accepts all that
// Decode does), and no byte of a valid delta can change unnoticed.
func FuzzDecode(f *testing.F) {
	m := trained(f, 0)
	d := gatheredDelta(f, m)
	data, err := d.Encode()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data, uint32(0), byte(0))
	f.Add(data, uint32(12), byte(0x20))
	f.Add(data[:40], uint32(3), byte(1))
	f.Add([]byte(deltaMagic), uint32(0), byte(0))
	f.Fuzz(func(t *testing.T, in []byte, pos uint32, flip byte) {
		resummed := append(bytes.Clone(in), make([]byte, sha256.Size)...)
		sum := sha256.Sum256(in)
		copy(resummed[len(in):], sum[:])
		for _, candidate := range [][]byte{in, resummed} {
			covered, errCovered := decode(bytes.Clone(candidate), opening{covered: true, owned: true})
			if errCovered == nil {
				if err := covered.check(); err != nil {
					t.Fatalf("accepted an invalid delta without its checksum: %v", err)
				}
			}
			got, err := Decode(candidate)
			if err != nil {
				continue
			}
			if errCovered != nil {
				t.Fatalf("Decode accepts what a covered decode refuses: %v", errCovered)
			}
			if err := got.check(); err != nil {
				t.Fatalf("accepted an invalid delta: %v", err)
			}
			again, err := got.Encode()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Decode(again); err != nil {
				t.Fatalf("an accepted delta encodes to bytes that are refused: %v", err)
			}
		}
		if flip == 0 {
			return
		}
		changed := bytes.Clone(data)
		changed[int(pos)%len(changed)] ^= flip
		if _, err := Decode(changed); err == nil {
			t.Fatalf("byte %d changed by %#x: accepted", int(pos)%len(changed), flip)
		}
	})
}
