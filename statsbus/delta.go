package statsbus

import (
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/mvml/mvml/model"
)

// A delta is sealed under the magic "MVMLDLTA" (see seal). The header
// says whose labels the statistics hold, so that the refitter can drop a
// repeat and refuse an overlap without reading the statistics, and a
// replica taking over a partition can skip labels a crashed owner already
// published.
const (
	deltaMagic = "MVMLDLTA"
	// Format is the delta format this build writes and reads, the
	// header's "format".
	Format = 1
)

// ErrCorruptDelta reports bytes that are not a whole, intact delta.
var ErrCorruptDelta = errors.New("corrupt statistics delta")

// Header describes a delta: the lineage and model its statistics were
// gathered on, who published it, and the label offsets they hold.
type Header struct {
	// Format is the envelope's format, Format when written by this build.
	Format int `json:"format"`
	// Lineage is the lineage of the model the statistics were gathered on
	// (model.Model.Lineage); only statistics of one lineage merge.
	Lineage string `json:"lineage"`
	// BaseVersion is the version of the model in service when the labels
	// were joined.
	BaseVersion string `json:"base_version"`
	// Replica names the publishing serve replica (its host or pod); it
	// is the key of the delta's message.
	Replica string `json:"replica"`
	// Epoch is random per start of the replica's process (NewEpoch), so
	// that Seq, counted from 1 at every start, identifies a delta with
	// it.
	Epoch string `json:"epoch"`
	// Seq numbers the replica's deltas within its epoch, from 1.
	Seq uint64 `json:"seq"`
	// Rows is the number of labelled rows in the statistics.
	Rows int64 `json:"rows"`
	// Created is when the delta was made.
	Created time.Time `json:"created"`
	// Ranges are the offsets of the labels whose rows are in the
	// statistics, or that were used up without a row (a label the model
	// cannot learn from): per topic and partition, the offsets a replica
	// commits only once the delta is acknowledged.
	Ranges Ranges `json:"ranges"`
}

// ID identifies a delta among all deltas: the refitter merges each ID
// once.
type ID struct {
	Replica, Epoch string
	Seq            uint64
}

// ID is the delta's identity.
func (h *Header) ID() ID { return ID{Replica: h.Replica, Epoch: h.Epoch, Seq: h.Seq} }

func (id ID) String() string { return fmt.Sprintf("%s/%s/%d", id.Replica, id.Epoch, id.Seq) }

// Delta is a replica's statistics delta: a header and the statistics of
// the labelled rows it names.
type Delta struct {
	Header
	// Stats are the statistics' bytes (model.Accumulator.MarshalBinary).
	Stats []byte
	// decoded is Stats as decoded, which the delta's checksum (or its
	// blob's) covered: while Stats is that slice, AccumulatorFrom does
	// not compute the statistics' own checksum again.
	decoded []byte
}

// New makes the delta of the statistics acc has gathered, with h's
// origin (BaseVersion, Replica, Epoch, Seq, Created) and label offsets
// (Ranges); the format, lineage and row count come from acc.
func New(acc *model.Accumulator, h Header) (*Delta, error) {
	stats, err := acc.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("statistics delta: %w", err)
	}
	h.Format, h.Lineage, h.Rows = Format, acc.Lineage(), int64(acc.Rows())
	if float64(h.Rows) != acc.Rows() {
		return nil, fmt.Errorf("statistics delta: %v rows, not a whole number: a delta holds statistics that were never decayed", acc.Rows())
	}
	d := &Delta{Header: h, Stats: stats}
	if err := d.check(); err != nil {
		return nil, fmt.Errorf("statistics delta: %w", err)
	}
	return d, nil
}

// deltaEnvelope seals deltas.
var deltaEnvelope = envelope{magic: deltaMagic, what: "statistics delta", format: Format, corrupt: ErrCorruptDelta}

func (d *Delta) header() any       { return &d.Header }
func (d *Delta) headerFormat() int { return d.Format }
func (d *Delta) stats() *[]byte    { return &d.Stats }

// Encode writes the delta.
func (d *Delta) Encode() ([]byte, error) { return deltaEnvelope.encode(d) }

// Decode reads a delta written by Encode, verifying its checksum and its
// header; the statistics are read with Accumulator. Damaged bytes are an
// error wrapping ErrCorruptDelta.
func Decode(data []byte) (*Delta, error) { return decode(data, opening{}) }

// decode is Decode, reading as how says.
func decode(data []byte, how opening) (*Delta, error) {
	d, err := open[Delta](deltaEnvelope, data, how)
	if err != nil {
		return nil, err
	}
	d.decoded = d.Stats
	return d, nil
}

// check says what a delta lacks.
func (d *Delta) check() error {
	switch {
	case d.Format != Format:
		return fmt.Errorf("format %d, want %d", d.Format, Format)
	case d.Lineage == "":
		return errors.New("no lineage")
	case d.Replica == "":
		return errors.New("no replica")
	case d.Epoch == "":
		return errors.New("no epoch")
	case d.Seq < 1:
		return errors.New("sequence number 0, they count from 1")
	case d.Seq > math.MaxInt64:
		// A Ledger keeps sequence numbers as runs of int64.
		return fmt.Errorf("sequence number %d out of range", d.Seq)
	case d.Rows < 0:
		return fmt.Errorf("%d rows", d.Rows)
	case len(d.Stats) == 0:
		return errors.New("no statistics")
	}
	if err := d.Ranges.check(); err != nil {
		return fmt.Errorf("label offsets: %w", err)
	}
	return nil
}

// Accumulator reads the delta's statistics into an accumulator of m,
// which must be of the delta's lineage (errors.Is model.ErrOtherLineage
// otherwise, naming both). Statistics that do not hold the header's
// lineage or number of rows are refused (ErrCorruptDelta). A refitter
// skips deltas of other lineages by their header before reading them.
func (d *Delta) Accumulator(m *model.Model) (*model.Accumulator, error) {
	return d.accumulator(model.UnmarshalAccumulator(d.Stats, m))
}

// AccumulatorFrom is Accumulator for dec's model, read with dec, which
// hashed the model's lineage once for all the deltas it reads. When d
// was decoded (Decode, Stream) and its Stats are still the bytes decoded,
// the statistics' own checksum is not computed again: the delta's, which
// covers every byte of them, was verified (or its blob's), and Messages
// sealed them only after checking theirs; they are then read into the
// memory of reuse, an accumulator AccumulatorFrom returned before that
// is no longer needed, when it fits (model.StatsDecoder.
// DecodeCoveredReusing). Otherwise they are verified and read into a new
// accumulator. reuse may be nil.
func (d *Delta) AccumulatorFrom(dec *model.StatsDecoder, reuse *model.Accumulator) (*model.Accumulator, error) {
	if len(d.Stats) > 0 && len(d.Stats) == len(d.decoded) && &d.Stats[0] == &d.decoded[0] {
		return d.accumulator(dec.DecodeCoveredReusing(d.Stats, reuse))
	}
	return d.accumulator(dec.Decode(d.Stats))
}

// accumulator checks acc, read from d's statistics, against d's header.
func (d *Delta) accumulator(acc *model.Accumulator, err error) (*model.Accumulator, error) {
	id := d.ID()
	if err != nil {
		return nil, fmt.Errorf("statistics delta %s: %w", id, err)
	}
	// The statistics carry their own lineage, which UnmarshalAccumulator
	// checked against m's; the header must say the same.
	switch {
	case d.Lineage != acc.Lineage():
		return nil, fmt.Errorf("statistics delta %s: %w: the header says lineage %s, the statistics are of lineage %s", id, ErrCorruptDelta, d.Lineage, acc.Lineage())
	case acc.Rows() != float64(d.Rows):
		return nil, fmt.Errorf("statistics delta %s: %w: the header says %d rows, the statistics hold %v", id, ErrCorruptDelta, d.Rows, acc.Rows())
	}
	return acc, nil
}

// NewEpoch returns a random epoch for a replica's process start (128
// random bits as 26 base32 letters), so that two starts never share one.
func NewEpoch() string { return rand.Text() }
