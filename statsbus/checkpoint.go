package statsbus

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/mvml/mvml/model"
)

// A checkpoint is sealed under the magic "MVMLCKPT" (see seal), so that
// NextSOffset is read without the statistics.
const (
	checkpointMagic = "MVMLCKPT"
	// CheckpointFormat is the checkpoint format this build writes and
	// reads, the header's "format".
	CheckpointFormat = 1
)

// ErrCorruptCheckpoint reports bytes that are not a whole, intact
// checkpoint.
var ErrCorruptCheckpoint = errors.New("corrupt refitter checkpoint")

// CheckpointHeader describes a refitter's checkpoint of one lineage.
type CheckpointHeader struct {
	// Format is the checkpoint's format, CheckpointFormat when written by
	// this build.
	Format int `json:"format"`
	// Lineage is the lineage of the statistics.
	Lineage string `json:"lineage"`
	// NextSOffset is where the stats topic is read again from: every
	// delta of the lineage below it is in the statistics (or was dropped
	// or refused), none at or above it is but those the Ledger names.
	// A serve replica taking over a partition of labels scans the stats
	// topic from here for the labels a crashed owner published.
	NextSOffset int64 `json:"next_s_offset"`
	// Model is the version the refitter published from these statistics,
	// "" when it published none (the first checkpoint of a lineage).
	Model string `json:"model_version,omitempty"`
	// Rows is the statistics' (decayed) row count.
	Rows float64 `json:"rows"`
	// Created is when the checkpoint was made.
	Created time.Time `json:"created"`
	// Ledger names the deltas and labels in the statistics.
	Ledger
}

// Checkpoint is the refitter's state of one lineage, written to the model
// store (registry.Store.PutCheckpoint, key checkpoint/LINEAGE) after each
// model it publishes: the statistics of that model, the ledger of the
// deltas they hold and where the stats topic is read from to find the
// others. A refitter that takes over starts from it.
type Checkpoint struct {
	CheckpointHeader
	// Stats are the statistics' bytes (model.Accumulator.MarshalBinary).
	Stats []byte
}

// NewCheckpoint makes the checkpoint of the statistics acc holds, with
// h's NextSOffset, Model, Created and Ledger; the format, lineage and row
// count come from acc.
func NewCheckpoint(acc *model.Accumulator, h CheckpointHeader) (*Checkpoint, error) {
	stats, err := acc.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("refitter checkpoint: %w", err)
	}
	h.Format, h.Lineage, h.Rows = CheckpointFormat, acc.Lineage(), acc.Rows()
	c := &Checkpoint{CheckpointHeader: h, Stats: stats}
	if err := c.check(); err != nil {
		return nil, fmt.Errorf("refitter checkpoint: %w", err)
	}
	return c, nil
}

// checkpointEnvelope seals checkpoints.
var checkpointEnvelope = envelope{magic: checkpointMagic, what: "refitter checkpoint", format: CheckpointFormat, corrupt: ErrCorruptCheckpoint}

func (c *Checkpoint) header() any       { return &c.CheckpointHeader }
func (c *Checkpoint) headerFormat() int { return c.Format }
func (c *Checkpoint) stats() *[]byte    { return &c.Stats }

// Encode writes the checkpoint.
func (c *Checkpoint) Encode() ([]byte, error) { return checkpointEnvelope.encode(c) }

// DecodeCheckpoint reads a checkpoint written by Encode, verifying its
// checksum and its header; the statistics are read with Accumulator.
// Damaged bytes are an error wrapping ErrCorruptCheckpoint.
func DecodeCheckpoint(data []byte) (*Checkpoint, error) {
	return open[Checkpoint](checkpointEnvelope, data)
}

// check says what a checkpoint lacks.
func (c *Checkpoint) check() error {
	switch {
	case c.Format != CheckpointFormat:
		return fmt.Errorf("format %d, want %d", c.Format, CheckpointFormat)
	case c.Lineage == "":
		return errors.New("no lineage")
	case c.NextSOffset < 0:
		return fmt.Errorf("next stats topic offset %d", c.NextSOffset)
	case !(c.Rows >= 0) || math.IsInf(c.Rows, 0):
		return fmt.Errorf("%v rows", c.Rows)
	case len(c.Stats) == 0:
		return errors.New("no statistics")
	}
	if err := c.Ledger.check(); err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	return nil
}

// Accumulator reads the checkpoint's statistics into an accumulator of m,
// which must be of the checkpoint's lineage (errors.Is
// model.ErrOtherLineage otherwise). Statistics that do not hold the
// header's lineage or rows are refused (ErrCorruptCheckpoint).
func (c *Checkpoint) Accumulator(m *model.Model) (*model.Accumulator, error) {
	acc, err := model.UnmarshalAccumulator(c.Stats, m)
	if err != nil {
		return nil, fmt.Errorf("refitter checkpoint of lineage %s: %w", c.Lineage, err)
	}
	switch {
	case c.Lineage != acc.Lineage():
		return nil, fmt.Errorf("refitter checkpoint: %w: the header says lineage %s, the statistics are of lineage %s", ErrCorruptCheckpoint, c.Lineage, acc.Lineage())
	case acc.Rows() != c.Rows:
		return nil, fmt.Errorf("refitter checkpoint of lineage %s: %w: the header says %v rows, the statistics hold %v", c.Lineage, ErrCorruptCheckpoint, c.Rows, acc.Rows())
	}
	return acc, nil
}
