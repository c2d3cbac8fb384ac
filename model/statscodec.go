package model

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/mvml/mvml/internal/envelope"
)

// The statistics of an Accumulator travel between processes (a replica's
// delta, the refitter's checkpoint) in one self-checking binary:
//
//	magic "MVMLSTAT" | uint32 format version | uint32 lineage length |
//	lineage | uint32 views | uint32 rank per view | uint32 outputs |
//	float64 N | S, upper triangle row by row | C (D×k, row by row) |
//	YtY (k) | USum (D) | YSum (k) | the residues of S, C, YtY, USum and
//	YSum, laid out as they are (format 2) | SHA-256 of everything before it
//
// Integers and floats are little endian. The residues (see residue) are
// what makes merged statistics equal those of one pass over the rows;
// format 1, without them, is still read (as residues of zero). The size is
// about 16·(D(D+1)/2 + D(k+1)) bytes: 852 KB at D = 324 and 4.7 MB at
// D = 768 with one output. The lineage says which model's feature space
// the sums live in, so that they are only ever merged into statistics of
// the same lineage.
//
// Statistics of K > 1 folds (NewFoldAccumulator) are written in format 3:
// after the outputs a uint32 K, then for every fold in turn its values as
// format 2 lays them out (N to the residues of YSum), then the checksum:
// K times the size. Statistics of one fold are written in format 2, as
// before folds existed.
const (
	statsMagic = "MVMLSTAT"
	// StatsFormatVersion is the statistics format this build writes for
	// statistics of one fold; it reads it, statsFormatPlain and
	// StatsFormatFolds.
	StatsFormatVersion = 2
	// StatsFormatFolds is the format of statistics of several folds.
	StatsFormatFolds = 3
	// statsFormatPlain is the format of the values without their residues.
	statsFormatPlain = 1
	// maxStatsLineage bounds the lineage field so that a corrupt length
	// is caught before it is used (a lineage is 16 hex digits).
	maxStatsLineage = 256
)

// statsEnvelope frames statistics; the lineage and shape lead the body.
var statsEnvelope = envelope.Format{Magic: statsMagic, Versioned: true, MinBody: statsHeaderSize(0, 0) - 12,
	Version: func(v uint32) error {
		if v != StatsFormatVersion && v != statsFormatPlain && v != StatsFormatFolds {
			return fmt.Errorf("statistics format version %d, this build reads versions %d to %d", v, statsFormatPlain, StatsFormatFolds)
		}
		return nil
	}}

var (
	// ErrCorruptStats reports statistics bytes that are damaged, truncated
	// or not statistics at all.
	ErrCorruptStats = errors.New("corrupt statistics")
	// ErrOtherLineage reports statistics gathered on a model of another
	// lineage than the one they are read for.
	ErrOtherLineage = errors.New("statistics of another lineage")
)

// MarshalBinary encodes the accumulated statistics and the lineage of the
// model they were gathered on; UnmarshalAccumulator reads them back.
func (a *Accumulator) MarshalBinary() ([]byte, error) {
	all := a.folds
	if all == nil { // an accumulator made of its sums alone
		all = []*Stats{a.stats}
	}
	st := all[0]
	lineage := a.Lineage()
	d, k := st.Dim(), st.Outputs()
	folds := len(all)
	format := uint32(StatsFormatVersion)
	if folds > 1 {
		format = StatsFormatFolds
	}
	out := statsEnvelope.Begin(nil, format, nil, statsHeaderSize(len(lineage), len(st.Ranks))+4+8*folds*statsValues(d, k, StatsFormatVersion))
	out = binary.LittleEndian.AppendUint32(out, uint32(len(lineage)))
	out = append(out, lineage...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(st.Ranks)))
	for _, r := range st.Ranks {
		out = binary.LittleEndian.AppendUint32(out, uint32(r))
	}
	out = binary.LittleEndian.AppendUint32(out, uint32(k))
	if folds > 1 {
		out = binary.LittleEndian.AppendUint32(out, uint32(folds))
	}
	for _, st := range all {
		out = appendStats(out, st)
	}
	return envelope.Seal(out), nil
}

// appendStats appends the values of st in format 2's layout.
func appendStats(out []byte, st *Stats) []byte {
	d, k := st.Dim(), st.Outputs()
	put := func(vs ...float64) {
		for _, v := range vs {
			out = binary.LittleEndian.AppendUint64(out, math.Float64bits(v))
		}
	}
	put(st.N)
	s := st.S.RawSymmetric()
	for i := range d {
		put(s.Data[i*s.Stride+i : i*s.Stride+d]...)
	}
	c := st.C.RawMatrix()
	for i := range d {
		put(c.Data[i*c.Stride : i*c.Stride+k]...)
	}
	put(st.YtY...)
	put(st.USum...)
	put(st.YSum...)
	for i := range d {
		put(st.res.s[i*s.Stride+i : i*s.Stride+d]...)
	}
	put(st.res.c...)
	put(st.res.yty...)
	put(st.res.uSum...)
	put(st.res.ySum...)
	return out
}

// statsHeaderSize is the length of everything before N.
func statsHeaderSize(lineage, views int) int { return 8 + 4 + 4 + lineage + 4 + 4*views + 4 }

// statsValues is the number of float64 values after the header in a
// format: N, S's upper triangle, C, YtY, USum and YSum, and in format 2
// the residues of all but N.
func statsValues(d, k int, format uint32) int {
	sums := d*(d+1)/2 + d*k + k + d + k
	if format == statsFormatPlain {
		return 1 + sums
	}
	return 1 + 2*sums
}

// UnmarshalAccumulator reads statistics written by MarshalBinary (in
// format 2 or 3, or format 1) into a new accumulator of m with the folds
// they were written with, which must be of the lineage they were gathered
// on (a refit of that model or a copy of it will do). Damaged bytes are
// an error wrapping ErrCorruptStats that says what is wrong (checksum,
// length, shape, a value that is not finite), statistics of another
// lineage one wrapping ErrOtherLineage that names both lineages.
func UnmarshalAccumulator(data []byte, m *Model) (*Accumulator, error) {
	return unmarshalAccumulator(data, m, "", true, nil)
}

// StatsDecoder reads statistics for one model as UnmarshalAccumulator
// does, with the model's lineage hashed once, when it is made, rather
// than at every read: a refitter reads every delta of its lineage for one
// model. The model must not change while the decoder is used. It is safe
// for concurrent use.
type StatsDecoder struct {
	m       *Model
	lineage string
}

// NewStatsDecoder returns a decoder of statistics for m.
func NewStatsDecoder(m *Model) *StatsDecoder { return &StatsDecoder{m: m, lineage: m.Lineage()} }

// Model is the model the decoder reads statistics for.
func (d *StatsDecoder) Model() *Model { return d.m }

// Lineage is the decoder's model's lineage (Model.Lineage).
func (d *StatsDecoder) Lineage() string { return d.lineage }

// Decode is UnmarshalAccumulator(data, d.Model()).
func (d *StatsDecoder) Decode(data []byte) (*Accumulator, error) {
	return unmarshalAccumulator(data, d.m, d.lineage, true, nil)
}

// DecodeCovered is Decode for data whose every byte a checksum the caller
// has just verified covers (the statistics of a delta whose checksum
// matched): the statistics' own checksum is not computed again, every
// other check (magic, format, lineage, shape, length, finite values and
// residues) is made.
func (d *StatsDecoder) DecodeCovered(data []byte) (*Accumulator, error) {
	return unmarshalAccumulator(data, d.m, d.lineage, false, nil)
}

// DecodeCoveredReusing is DecodeCovered into the memory of reuse, an
// accumulator that d returned before and that is no longer needed, when
// it keeps as many folds as data; otherwise, or with reuse nil, into a
// new accumulator. A refitter reads thousands of deltas, each merged
// once and dropped: reading them into one accumulator spares allocating
// and clearing megabytes for every one. After an error reuse holds
// whatever was read.
func (d *StatsDecoder) DecodeCoveredReusing(data []byte, reuse *Accumulator) (*Accumulator, error) {
	return unmarshalAccumulator(data, d.m, d.lineage, false, reuse)
}

// CheckStats verifies that data are statistics (MarshalBinary's, of a
// format this build reads) whose bytes match their checksum, without
// reading them: what a delta's producer checks before sealing them under
// a checksum of its own, which its readers then verify for both. Damaged
// bytes are an error wrapping ErrCorruptStats.
func CheckStats(data []byte) error {
	_, err := openStats(data, true)
	return err
}

// openStats opens the envelope of statistics, verifying its checksum
// when verify is set.
func openStats(data []byte, verify bool) (envelope.Frame, error) {
	open := statsEnvelope.Open
	if !verify {
		open = statsEnvelope.OpenCovered
	}
	fr, err := open(data)
	switch {
	case errors.Is(err, envelope.ErrNotFramed):
		return fr, fmt.Errorf("%w: not mvml statistics (bad magic or %d bytes, too short)", ErrCorruptStats, len(data))
	case errors.Is(err, envelope.ErrChecksum):
		return fr, fmt.Errorf("%w: %v", ErrCorruptStats, err)
	}
	return fr, err
}

// unmarshalAccumulator is UnmarshalAccumulator for m of the given
// lineage ("": hashed here), verifying the checksum when verify is set,
// into reuse when it is an accumulator of m with the data's folds
// (readStats writes every value and residue a fold holds).
func unmarshalAccumulator(data []byte, m *Model, lineageOfM string, verify bool, reuse *Accumulator) (*Accumulator, error) {
	fr, err := openStats(data, verify)
	if err != nil {
		return nil, err
	}
	format := fr.Version
	r := statsReader{buf: fr.Body}
	lineage := string(r.bytes(int(min(r.uint32(), maxStatsLineage+1))))
	views := r.uint32()
	if r.err != nil || len(lineage) > maxStatsLineage || views > uint32(len(r.buf)/4) {
		return nil, fmt.Errorf("%w: header cut short or lineage of %d bytes", ErrCorruptStats, len(lineage))
	}
	ranks := make([]int, views)
	for l := range ranks {
		ranks[l] = int(r.uint32())
	}
	k := int(r.uint32())
	folds, values := 1, format
	if format == StatsFormatFolds {
		folds, values = int(r.uint32()), StatsFormatVersion
	}
	if r.err != nil {
		return nil, fmt.Errorf("%w: header cut short", ErrCorruptStats)
	}
	if format == StatsFormatFolds && (folds < 2 || folds > MaxFolds) {
		return nil, fmt.Errorf("%w: %d folds, format %d holds 2 to %d", ErrCorruptStats, folds, StatsFormatFolds, MaxFolds)
	}
	acc := reuse
	if acc == nil || acc.m != m || len(acc.folds) != folds {
		if acc, err = m.NewFoldAccumulator(folds); err != nil {
			return nil, err
		}
	}
	acc.changed()
	acc.lineage = lineageOfM
	if want := acc.Lineage(); lineage != want {
		return nil, fmt.Errorf("%w: gathered on lineage %q, model %s is of lineage %s", ErrOtherLineage, lineage, m.Version, want)
	}
	st := acc.folds[0]
	if !slices.Equal(ranks, st.Ranks) || k != st.Outputs() {
		return nil, fmt.Errorf("%w: shape of views of ranks %v and %d outputs, the model has ranks %v and %d outputs",
			ErrCorruptStats, ranks, k, st.Ranks, st.Outputs())
	}
	if want := 8 * folds * statsValues(st.Dim(), k, values); len(r.buf) != want {
		return nil, fmt.Errorf("%w: %d bytes of values, the shape needs %d", ErrCorruptStats, len(r.buf), want)
	}
	for f, st := range acc.folds {
		if err := readStats(&r, st, values); err != nil {
			if folds > 1 {
				return nil, fmt.Errorf("%w: fold %d: %v", ErrCorruptStats, f, err)
			}
			return nil, fmt.Errorf("%w: %v", ErrCorruptStats, err)
		}
	}
	return acc, nil
}

// readStats reads the values of st in format 2's layout (or format 1's,
// without the residues) and checks them.
func readStats(r *statsReader, st *Stats, format uint32) error {
	d, k := st.Dim(), st.Outputs()
	if st.N = r.float(); !(st.N >= 0) || math.IsInf(st.N, 0) {
		return fmt.Errorf("row count %v", st.N)
	}
	s := st.S.RawSymmetric()
	for i := range d {
		r.floats(s.Data[i*s.Stride+i : i*s.Stride+d])
	}
	c := st.C.RawMatrix()
	for i := range d {
		r.floats(c.Data[i*c.Stride : i*c.Stride+k])
	}
	for _, xs := range [][]float64{st.YtY, st.USum, st.YSum} {
		r.floats(xs)
	}
	if format == StatsFormatVersion {
		for i := range d {
			r.floats(st.res.s[i*s.Stride+i : i*s.Stride+d])
		}
		for _, xs := range [][]float64{st.res.c, st.res.yty, st.res.uSum, st.res.ySum} {
			r.floats(xs)
		}
	} else {
		// Format 1 has no residues: zero, also in a reused accumulator.
		for _, xs := range [][]float64{st.res.s, st.res.c, st.res.yty, st.res.uSum, st.res.ySum} {
			clear(xs)
		}
	}
	return nonFiniteStats(st)
}

// ddValid says whether every hi[j] is finite and every lo[j] finite and at
// most ulp(hi[j])/2 in magnitude.
func ddValid(hi, lo []float64) bool {
	lo = lo[:len(hi)]
	for j, v := range hi {
		a, l := math.Abs(v), math.Abs(lo[j])
		if !(a <= math.MaxFloat64 && l <= math.MaxFloat64) {
			return false
		}
		// ulp(a): the next float64 up is one more in the bits (+Inf
		// after the largest).
		if !(l <= (math.Float64frombits(math.Float64bits(a)+1)-a)/2) {
			return false
		}
	}
	return true
}

// nonFiniteStats names the first statistic that is not a finite number:
// one would spoil every refit of the statistics it is merged into. A
// residue must also be finite and at most half a unit in the last place
// of its value, as it is after every batch and merge. Each row is tested
// at once (ddValid); only a row that fails is walked for its first bad
// element.
func nonFiniteStats(st *Stats) error {
	d, k := st.Dim(), st.Outputs()
	s, c := st.S.RawSymmetric(), st.C.RawMatrix()
	// check names the first bad element of hi (lo its residues), the
	// element j being called name(j).
	check := func(hi, lo []float64, name func(j int) string) error {
		if ddValid(hi, lo) {
			return nil
		}
		for j, v := range hi {
			switch {
			case math.IsNaN(v) || math.IsInf(v, 0):
				return fmt.Errorf("%s is %v", name(j), v)
			case !ddValid(hi[j:j+1], lo[j:j+1]):
				return fmt.Errorf("the residue of %s = %v is %v", name(j), v, lo[j])
			}
		}
		return nil
	}
	for i := range d {
		if err := check(s.Data[i*s.Stride+i:i*s.Stride+d], st.res.s[i*s.Stride+i:i*s.Stride+d],
			func(j int) string { return fmt.Sprintf("S[%d,%d]", i, i+j) }); err != nil {
			return err
		}
		if err := check(c.Data[i*c.Stride:i*c.Stride+k], st.res.c[i*k:i*k+k],
			func(j int) string { return fmt.Sprintf("C[%d,%d]", i, j) }); err != nil {
			return err
		}
	}
	for _, vec := range []struct {
		name    string
		xs, res []float64
	}{{"YtY", st.YtY, st.res.yty}, {"USum", st.USum, st.res.uSum}, {"YSum", st.YSum, st.res.ySum}} {
		if err := check(vec.xs, vec.res, func(j int) string { return fmt.Sprintf("%s[%d]", vec.name, j) }); err != nil {
			return err
		}
	}
	return nil
}

// statsReader reads little-endian values off a buffer, remembering
// whether it ran short.
type statsReader struct {
	buf []byte
	err error
}

func (r *statsReader) bytes(n int) []byte {
	if r.err != nil || n > len(r.buf) {
		r.err = io.ErrUnexpectedEOF
		return nil
	}
	b := r.buf[:n]
	r.buf = r.buf[n:]
	return b
}

func (r *statsReader) uint32() uint32 {
	b := r.bytes(4)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint32(b)
}

// floats reads len(dst) values into dst, NaN where the buffer runs short.
func (r *statsReader) floats(dst []float64) {
	b := r.bytes(8 * len(dst))
	if b == nil {
		for j := range dst {
			dst[j] = math.NaN()
		}
		return
	}
	for j := range dst {
		dst[j] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*j:]))
	}
}

func (r *statsReader) float() float64 {
	b := r.bytes(8)
	if b == nil {
		return math.NaN()
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(b))
}
