package statsbus

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/mvml/mvml/model"
)

// A checkpoint is sealed under the magic "MVMLCKPT" (see seal), so that
// NextSOffset is read without the statistics.
const (
	checkpointMagic = "MVMLCKPT"
	// CheckpointFormat is the format of a checkpoint without the labels
	// since the serving model (KeepSince), the header's "format": such a
	// checkpoint is the same bytes as the builds before format 2 wrote.
	CheckpointFormat = 1
	// CheckpointSinceFormat is the format of a checkpoint that also keeps
	// the statistics of the labels since the serving model (KeepSince);
	// a build that reads only format 1 refuses it.
	CheckpointSinceFormat = 2
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
	// SinceModel, SinceRows and SinceBytes describe the statistics of
	// the labels merged since the serving model was made current, when
	// the checkpoint keeps them (format 2, KeepSince): that model's
	// version, their (decayed) row count and their size, the trailing
	// part of the sealed statistics.
	SinceModel string  `json:"since_model,omitempty"`
	SinceRows  float64 `json:"since_rows,omitempty"`
	SinceBytes int     `json:"since_bytes,omitempty"`
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
	// Since are the bytes of the statistics of the labels since the
	// serving model (KeepSince), nil when the checkpoint keeps none.
	Since []byte
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
var checkpointEnvelope = envelope{magic: checkpointMagic, what: "refitter checkpoint", format: CheckpointSinceFormat, oldest: CheckpointFormat,
	corrupt: ErrCorruptCheckpoint}

func (c *Checkpoint) header() any       { return &c.CheckpointHeader }
func (c *Checkpoint) headerFormat() int { return c.Format }
func (c *Checkpoint) stats() *[]byte    { return &c.Stats }

// Encode writes the checkpoint; the statistics of the labels since
// follow the others in the sealed statistics.
func (c *Checkpoint) Encode() ([]byte, error) {
	if err := c.check(); err != nil {
		return nil, fmt.Errorf("encode refitter checkpoint: %w", err)
	}
	joined := *c
	if len(c.Since) > 0 {
		joined.Stats = append(slices.Clip(c.Stats), c.Since...)
		joined.Since = nil
	}
	return checkpointEnvelope.encode(&joined)
}

// DecodeCheckpoint reads a checkpoint written by Encode, verifying its
// checksum and its header; the statistics are read with Accumulator and
// SinceAccumulator. Damaged bytes are an error wrapping
// ErrCorruptCheckpoint.
func DecodeCheckpoint(data []byte) (*Checkpoint, error) {
	c, err := open[Checkpoint](checkpointEnvelope, data, opening{})
	if err != nil {
		return nil, err
	}
	if n := c.SinceBytes; n > 0 {
		c.Stats, c.Since = c.Stats[:len(c.Stats)-n:len(c.Stats)-n], c.Stats[len(c.Stats)-n:]
	}
	return c, nil
}

// KeepSince makes the checkpoint keep since, the statistics of the labels
// merged since model version serving was made current (a gate compares
// refits with it on them), in format 2; statistics without a row are not
// kept.
func (c *Checkpoint) KeepSince(since *model.Accumulator, serving string) error {
	if since.Rows() == 0 {
		return nil
	}
	b, err := since.MarshalBinary()
	if err != nil {
		return fmt.Errorf("refitter checkpoint: %w", err)
	}
	c.Format, c.Since, c.SinceModel, c.SinceRows, c.SinceBytes = CheckpointSinceFormat, b, serving, since.Rows(), len(b)
	if err := c.check(); err != nil {
		return fmt.Errorf("refitter checkpoint: %w", err)
	}
	return nil
}

// SinceAccumulator reads the statistics of the labels since the model
// SinceModel into an accumulator of m, as Accumulator does; nil when the
// checkpoint keeps none.
func (c *Checkpoint) SinceAccumulator(m *model.Model) (*model.Accumulator, error) {
	if len(c.Since) == 0 {
		return nil, nil
	}
	acc, err := model.UnmarshalAccumulator(c.Since, m)
	if err != nil {
		return nil, fmt.Errorf("refitter checkpoint of lineage %s, labels since %s: %w", c.Lineage, c.SinceModel, err)
	}
	if acc.Lineage() != c.Lineage || acc.Rows() != c.SinceRows {
		return nil, fmt.Errorf("refitter checkpoint of lineage %s: %w: the labels since %s hold lineage %s, %v rows; the header says %v rows",
			c.Lineage, ErrCorruptCheckpoint, c.SinceModel, acc.Lineage(), acc.Rows(), c.SinceRows)
	}
	return acc, nil
}

// check says what a checkpoint lacks.
func (c *Checkpoint) check() error {
	switch {
	case c.Format != CheckpointFormat && c.Format != CheckpointSinceFormat:
		return fmt.Errorf("format %d, want %d or %d", c.Format, CheckpointFormat, CheckpointSinceFormat)
	case (c.Format == CheckpointSinceFormat) != (c.SinceBytes > 0):
		return fmt.Errorf("format %d with %d bytes of labels since the serving model", c.Format, c.SinceBytes)
	case len(c.Stats) == 0:
		return errors.New("no statistics")
	case c.Since != nil && len(c.Since) != c.SinceBytes || c.Since == nil && c.SinceBytes > 0 && c.SinceBytes >= len(c.Stats):
		return fmt.Errorf("%d bytes of labels since the serving model, %d and %d bytes of statistics", c.SinceBytes, len(c.Stats), len(c.Since))
	case c.SinceBytes > 0 && (c.SinceModel == "" || !(c.SinceRows > 0) || math.IsInf(c.SinceRows, 0)):
		return fmt.Errorf("labels since model %q: %v rows", c.SinceModel, c.SinceRows)
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
