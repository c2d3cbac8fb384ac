package model

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// gatheredToy is trainedToy's model with an accumulator of its rows, some
// of them decayed, so that N is not a whole number.
func gatheredToy(t testing.TB) (*Model, *Accumulator) {
	t.Helper()
	m, views := trainedToy(t)
	labels := toyLabels()
	acc := m.NewAccumulator()
	v, l := rowsOf(views, labels, 0, 70)
	if err := acc.Add(v, l); err != nil {
		t.Fatal(err)
	}
	acc.Decay(0.75)
	v, l = rowsOf(views, labels, 70, 120)
	if err := acc.Add(v, l); err != nil {
		t.Fatal(err)
	}
	return m, acc
}

// resum replaces the SHA-256 trailer of encoded statistics with the sum of
// the bytes before it, so that a test reaches the checks behind the
// checksum.
func resum(data []byte) []byte {
	body := data[:len(data)-sha256.Size]
	sum := sha256.Sum256(body)
	return append(bytes.Clone(body), sum[:]...)
}

// plainFormat rewrites statistics of format 2 in format 1: the values
// without their residues, as a build before the residues wrote them.
func plainFormat(data []byte, st *Stats) []byte {
	resid := 8 * (statsValues(st.Dim(), st.Outputs(), StatsFormatVersion) - statsValues(st.Dim(), st.Outputs(), statsFormatPlain))
	out := bytes.Clone(data[:len(data)-sha256.Size-resid])
	binary.LittleEndian.PutUint32(out[8:], statsFormatPlain)
	sum := sha256.Sum256(out)
	return append(out, sum[:]...)
}

// Statistics read back on a copy of their model (another process's) are
// the statistics written, bit for bit, and refit to the same model.
func TestAccumulatorRoundTrip(t *testing.T) {
	m, acc := gatheredToy(t)
	data, err := acc.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	back, err := UnmarshalAccumulator(data, copyOf(t, m))
	if err != nil {
		t.Fatal(err)
	}
	if back.Rows() != acc.Rows() || back.Rows() != 70*0.75+50 {
		t.Errorf("rows %v, want %v", back.Rows(), acc.Rows())
	}
	want, got := acc.stats, back.stats
	if !mat.Equal(got.S, want.S) || !mat.Equal(got.C, want.C) || !slices.Equal(got.YtY, want.YtY) ||
		!slices.Equal(got.USum, want.USum) || !slices.Equal(got.YSum, want.YSum) || !slices.Equal(got.Ranks, want.Ranks) {
		t.Error("statistics changed on their way through bytes")
	}
	again, err := back.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, data) {
		t.Error("statistics read back encode to other bytes")
	}
	a, err := acc.RefitCold(context.Background(), m.Config.Fit)
	if err != nil {
		t.Fatal(err)
	}
	b, err := back.RefitCold(context.Background(), m.Config.Fit)
	if err != nil {
		t.Fatal(err)
	}
	if a.Version != b.Version {
		t.Errorf("refit of the statistics read back is version %s, of the original %s", b.Version, a.Version)
	}
	// Format 1 (a delta of a replica not yet upgraded) is read with
	// residues of zero: the same values, which refit to the same model.
	plain, err := UnmarshalAccumulator(plainFormat(data, acc.stats), copyOf(t, m))
	if err != nil {
		t.Fatal(err)
	}
	if diff := statsDiffer(plain.stats, acc.stats); diff != "" || slices.ContainsFunc(plain.stats.res.s, func(v float64) bool { return v != 0 }) {
		t.Errorf("format 1 read back: %s", diff)
	}
	if c, err := plain.RefitCold(context.Background(), m.Config.Fit); err != nil || c.Version != a.Version {
		t.Errorf("refit of format 1 statistics: %v, want version %s", err, a.Version)
	}
	empty, err := m.NewAccumulator().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if e, err := UnmarshalAccumulator(empty, m); err != nil || e.Rows() != 0 {
		t.Errorf("empty statistics: %v rows, error %v", e.Rows(), err)
	}
}

// Damaged statistics, statistics of another lineage and statistics of
// another shape are refused with an error that says which.
func TestUnmarshalAccumulatorRefuses(t *testing.T) {
	m, acc := gatheredToy(t)
	data, err := acc.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	views, labels := toyViews(7, 120)
	stranger, err := Train(context.Background(), m.Spec, views, labels, trainWith(func(c *TrainConfig) { c.Landmarks, c.Seed = 25, 9 }))
	if err != nil {
		t.Fatal(err)
	}
	// Offsets into data: the lineage is 16 bytes, then the view count,
	// the two ranks, the outputs and N.
	const lineageAt, viewsAt = 16, 32
	rank0At, outputsAt, nAt := viewsAt+4, viewsAt+12, viewsAt+16
	sAt := nAt + 8
	patched := func(at int, b ...byte) []byte {
		out := bytes.Clone(data)
		copy(out[at:], b)
		return resum(out)
	}
	le32 := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
	le64 := func(v float64) []byte { return binary.LittleEndian.AppendUint64(nil, math.Float64bits(v)) }
	flipped := bytes.Clone(data)
	flipped[len(flipped)/2] ^= 0x10
	wrongVersion := bytes.Clone(data)
	binary.LittleEndian.PutUint32(wrongVersion[8:], 4)
	// The residues follow the values: the last value, YSum[2], comes
	// before them, and the first residue is S[0,0]'s.
	st := acc.stats
	residuesAt := len(data) - sha256.Size - 8*(statsValues(st.Dim(), st.Outputs(), StatsFormatVersion)-statsValues(st.Dim(), st.Outputs(), statsFormatPlain))

	for _, tc := range []struct {
		name string
		data []byte
		m    *Model
		is   error  // the sentinel the error wraps, nil for none
		want string // a fragment of the message
	}{
		{"empty", nil, m, ErrCorruptStats, "too short"},
		{"not statistics", []byte("MVMLMODL and then some more bytes to pass the length check, yes"), m, ErrCorruptStats, "bad magic"},
		{"truncated", data[:len(data)-100], m, ErrCorruptStats, "checksum mismatch"},
		{"a changed byte", flipped, m, ErrCorruptStats, "checksum mismatch"},
		{"another format", wrongVersion, m, nil, "format version 4, this build reads versions 1 to 3"},
		{"format 1 of format 2's length", patched(8, le32(1)...), m, ErrCorruptStats, "bytes of values, the shape needs"},
		{"another lineage", data, stranger, ErrOtherLineage, acc.Lineage()},
		{"another lineage's name", data, stranger, ErrOtherLineage, stranger.Lineage()},
		{"changed lineage", patched(lineageAt, 'x'), m, ErrOtherLineage, "lineage \"x"},
		{"huge lineage length", patched(12, le32(1<<31)...), m, ErrCorruptStats, "header cut short"},
		{"huge view count", patched(viewsAt, le32(1<<30)...), m, ErrCorruptStats, "header cut short"},
		{"another rank", patched(rank0At, le32(3)...), m, ErrCorruptStats, "ranks [3"},
		{"another output count", patched(outputsAt, le32(1)...), m, ErrCorruptStats, "and 1 outputs"},
		{"extra values", resum(append(bytes.Clone(data[:len(data)-sha256.Size]), make([]byte, 8+sha256.Size)...)), m, ErrCorruptStats, "bytes of values, the shape needs"},
		{"negative rows", patched(nAt, le64(-1)...), m, ErrCorruptStats, "row count -1"},
		{"NaN in S", patched(sAt+8, le64(math.NaN())...), m, ErrCorruptStats, "S[0,1] is NaN"},
		{"infinity in YSum", patched(residuesAt-8, le64(math.Inf(1))...), m, ErrCorruptStats, "YSum[2] is +Inf"},
		{"a residue as large as its value", patched(residuesAt, le64(st.S.At(0, 0))...), m, ErrCorruptStats, "the residue of S[0,0]"},
		{"NaN in a residue", patched(len(data)-sha256.Size-8, le64(math.NaN())...), m, ErrCorruptStats, "the residue of YSum[2]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := UnmarshalAccumulator(tc.data, tc.m)
			if err == nil {
				t.Fatalf("accepted, %v rows", got.Rows())
			}
			if tc.is != nil && !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want %v with %q", err, tc.is, tc.want)
			}
		})
	}
}

// A StatsDecoder reads what UnmarshalAccumulator reads, without hashing
// its model's lineage per read; DecodeCovered makes every check but the
// checksum, which the caller's outer checksum has verified.
func TestStatsDecoder(t *testing.T) {
	m, acc := gatheredToy(t)
	data, err := acc.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	dec := NewStatsDecoder(m)
	if dec.Lineage() != m.Lineage() || dec.Model() != m {
		t.Fatalf("decoder of lineage %s, model %p; want %s, %p", dec.Lineage(), dec.Model(), m.Lineage(), m)
	}
	le64 := func(v float64) []byte { return binary.LittleEndian.AppendUint64(nil, math.Float64bits(v)) }
	patched := func(at int, b ...byte) []byte {
		out := bytes.Clone(data)
		copy(out[at:], b)
		return out
	}
	const lineageAt, sAt = 16, 32 + 16 + 8
	badSum := patched(len(data)-1, data[len(data)-1]^1)
	for _, tc := range []struct {
		name          string
		data          []byte
		decode, cover string // "": accepted, else a fragment of the error
	}{
		{"intact", data, "", ""},
		{"checksum changed", badSum, "checksum mismatch", ""},
		{"truncated", data[:len(data)-100], "checksum mismatch", "bytes of values, the shape needs"},
		{"too short", data[:40], "too short", "too short"},
		{"changed lineage", patched(lineageAt, 'x'), "checksum mismatch", "lineage \"x"},
		{"NaN in S", patched(sAt+8, le64(math.NaN())...), "checksum mismatch", "S[0,1] is NaN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, c := range []struct {
				name   string
				decode func([]byte) (*Accumulator, error)
				want   string
			}{{"Decode", dec.Decode, tc.decode}, {"DecodeCovered", dec.DecodeCovered, tc.cover}} {
				got, err := c.decode(tc.data)
				switch {
				case c.want == "" && err != nil:
					t.Errorf("%s: %v, want the statistics", c.name, err)
				case c.want == "":
					out, _ := got.MarshalBinary()
					if !bytes.Equal(out, data) || got.Lineage() != m.Lineage() {
						t.Errorf("%s: read statistics that encode to other bytes, or of lineage %s", c.name, got.Lineage())
					}
				case !errors.Is(err, ErrCorruptStats) && !errors.Is(err, ErrOtherLineage) || !strings.Contains(err.Error(), c.want):
					t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
				}
			}
		})
	}
	// The lineage is hashed when the decoder is made, not at every read:
	// a read allocates less than UnmarshalAccumulator's, which hashes it.
	perRead := testing.AllocsPerRun(5, func() { _, _ = dec.Decode(data) })
	hashing := testing.AllocsPerRun(5, func() { _, _ = UnmarshalAccumulator(data, m) })
	if perRead >= hashing {
		t.Errorf("Decode allocates %v times, UnmarshalAccumulator %v: want fewer, without the lineage's hash", perRead, hashing)
	}
}

// CheckStats verifies the checksum of statistics without reading them.
func TestCheckStats(t *testing.T) {
	_, acc := gatheredToy(t)
	data, err := acc.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(data)
	flipped[len(flipped)/2] ^= 0x10
	for _, tc := range []struct {
		name string
		data []byte
		want string // "": accepted
	}{
		{"intact", data, ""},
		{"a changed byte", flipped, "checksum mismatch"},
		{"truncated", data[:len(data)-1], "checksum mismatch"},
		{"not statistics", []byte("MVMLMODL and then some more bytes to pass the length check, yes"), "bad magic"},
	} {
		err := CheckStats(tc.data)
		if tc.want == "" && err != nil || tc.want != "" && (!errors.Is(err, ErrCorruptStats) || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// Size of the statistics at the design's dimensions: 84 bytes of header
// and checksum (three views) and 8·(1 + 2·(D(D+1)/2 + D(k+1) + 2k)) bytes
// of values and residues, O((vp)²).
func TestStatsSize(t *testing.T) {
	for _, tc := range []struct {
		ranks []int
		k     int
		want  int
	}{
		{[]int{108, 108, 108}, 1, 852_892},
		{[]int{108, 108, 108}, 8, 889_404},
		{[]int{256, 256, 256}, 1, 4_749_436},
		{[]int{256, 256, 256}, 8, 4_835_676},
	} {
		acc := &Accumulator{stats: NewStats(tc.ranks, tc.k), lineage: "0123456789abcdef"}
		data, err := acc.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if len(data) != tc.want {
			t.Errorf("D = %d, %d outputs: %d bytes, want %d", acc.stats.Dim(), tc.k, len(data), tc.want)
		}
		t.Logf("D = %d, %d outputs: %d bytes", acc.stats.Dim(), tc.k, len(data))
	}
}

// The decoder never panics; what it accepts it encodes back to the same
// bytes (format 1 in format 2, with residues of zero), and DecodeCovered
// accepts it too; and no byte of valid statistics can change unnoticed.
func FuzzUnmarshalAccumulator(f *testing.F) {
	m, acc := gatheredToy(f)
	data, err := acc.MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	dec := NewStatsDecoder(m)
	f.Add(data, uint32(0), byte(0))
	f.Add(data, uint32(len(data)/2), byte(1))
	f.Add(data[:60], uint32(8), byte(0x80))
	f.Add([]byte(statsMagic), uint32(0), byte(0))
	f.Add(plainFormat(data, acc.stats), uint32(0), byte(0))
	f.Fuzz(func(t *testing.T, in []byte, pos uint32, flip byte) {
		for _, candidate := range [][]byte{in, resum(append(bytes.Clone(in), make([]byte, sha256.Size)...))} {
			covered, errCovered := dec.DecodeCovered(candidate)
			if errCovered == nil {
				// What DecodeCovered accepts is statistics up to the
				// checksum, which it does not compute.
				out, err := covered.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				if binary.LittleEndian.Uint32(candidate[8:]) == statsFormatPlain {
					out = plainFormat(out, covered.stats)
				}
				if !bytes.Equal(out[:len(out)-sha256.Size], candidate[:len(candidate)-sha256.Size]) {
					t.Fatal("statistics read without their checksum encode to other bytes")
				}
			}
			got, err := UnmarshalAccumulator(candidate, m)
			if err != nil {
				continue
			}
			if errCovered != nil {
				t.Fatalf("UnmarshalAccumulator reads what DecodeCovered refuses: %v", errCovered)
			}
			out, err := got.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if binary.LittleEndian.Uint32(candidate[8:]) == statsFormatPlain {
				out = plainFormat(out, got.stats)
			}
			if !bytes.Equal(out, candidate) {
				t.Fatal("accepted statistics encode to other bytes")
			}
		}
		if flip == 0 {
			return
		}
		changed := bytes.Clone(data)
		changed[int(pos)%len(changed)] ^= flip
		if _, err := UnmarshalAccumulator(changed, m); err == nil {
			t.Fatalf("byte %d changed by %#x: accepted", int(pos)%len(changed), flip)
		}
	})
}

// TestDDValidAgreesWithNonFiniteStats checks the decoder's test of a
// value and its residue, ddValid, and nonFiniteStats, which reads with
// it, against the rule written out (finite, and a residue of at most
// ulp/2), at the edges: a residue of exactly half a unit in the last
// place and one just above, zero and subnormal values, the largest
// float64, and NaN or infinity on either side.
func TestDDValidAgreesWithNonFiniteStats(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	tiny := math.SmallestNonzeroFloat64
	bad := func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }
	var cases [][2]float64
	for _, v := range []float64{0, tiny, 3 * tiny, 0x1p-1022, 1, 1.5, 3, -7.25, 1e300, math.MaxFloat64, -math.MaxFloat64, inf, -inf, nan} {
		half := ulp(v) / 2
		for _, lo := range []float64{0, half, -half, math.Nextafter(half, inf), -math.Nextafter(half, inf), half / 2, tiny, inf, nan} {
			cases = append(cases, [2]float64{v, lo})
		}
	}
	for _, c := range cases {
		v, lo := c[0], c[1]
		want := !bad(v) && !bad(lo) && math.Abs(lo) <= ulp(v)/2
		if got := ddValid([]float64{v}, []float64{lo}); got != want {
			t.Errorf("ddValid(%v, %v) = %v, want %v", v, lo, got, want)
		}
		st := NewStats([]int{1}, 1)
		st.S.SetSym(0, 0, v)
		st.res.s[0] = lo
		if err := nonFiniteStats(st); (err == nil) != want {
			t.Errorf("nonFiniteStats with S[0,0] = %v, residue %v: %v, want valid %v", v, lo, err, want)
		}
	}
}

// ulp is the distance from |v| to the next float64 away from zero.
func ulp(v float64) float64 {
	v = math.Abs(v)
	return math.Nextafter(v, math.Inf(1)) - v
}

// A delta read into the memory of an earlier one holds its own sums and
// nothing of the earlier one's, its merged sums and residues included:
// the same bytes re-encoded, and the same sums, as a fresh read gives,
// also when the delta is of format 1, without residues. An accumulator
// of other folds is not reused.
func TestDecodeCoveredReusing(t *testing.T) {
	m, views := trainedToy(t)
	labels := toyLabels()
	encoded := func(folds, lo, hi int) []byte {
		acc, err := m.NewFoldAccumulator(folds)
		if err != nil {
			t.Fatal(err)
		}
		v, l := rowsOf(views, labels, lo, hi)
		if err := acc.AddFolds(seqIDs(lo, hi), v, l); err != nil {
			t.Fatal(err)
		}
		data, err := acc.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	dec := NewStatsDecoder(m)
	oneSum := encoded(1, 20, 90)
	plain, err := UnmarshalAccumulator(oneSum, m)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		first, data []byte
		again       bool
	}{
		{"same folds", encoded(3, 0, 70), encoded(3, 50, 120), true},
		{"other folds", encoded(3, 0, 70), encoded(2, 0, 120), false},
		{"format 1", encoded(1, 0, 70), plainFormat(oneSum, plain.stats), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reuse, err := dec.DecodeCovered(tc.first)
			if err != nil {
				t.Fatal(err)
			}
			reuse.sums() // merged and kept, as a one-sum refitter's merge does
			got, err := dec.DecodeCoveredReusing(tc.data, reuse)
			if err != nil {
				t.Fatal(err)
			}
			if (got == reuse) != tc.again {
				t.Errorf("reused the accumulator: %v, want %v", got == reuse, tc.again)
			}
			fresh, err := dec.DecodeCovered(tc.data)
			if err != nil {
				t.Fatal(err)
			}
			again, err := got.MarshalBinary()
			if want, _ := fresh.MarshalBinary(); err != nil || !bytes.Equal(again, want) {
				t.Errorf("the accumulator read into reused memory encodes to other bytes than a fresh read (%v)", err)
			}
			if !mat.Equal(got.sums().S, fresh.sums().S) || got.Rows() != fresh.Rows() {
				t.Errorf("its merged sums are of %v rows, a fresh read's of %v, or differ", got.Rows(), fresh.Rows())
			}
		})
	}
}
