package statsbus

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	frame "github.com/mvml/mvml/internal/envelope"
)

// A delta and a checkpoint are each one self-checking binary framed by
// internal/envelope, without a version (their JSON header has it):
//
//	magic (8 bytes) | uint32 header length | header (JSON) |
//	statistics (model.Accumulator.MarshalBinary) | SHA-256 of everything before it
//
// so that their header is read without the statistics, and no damaged or
// truncated byte passes.

// seal frames header and payload under magic.
func seal(magic string, header, payload []byte) []byte {
	f := frame.Format{Magic: magic, Header: true}
	return frame.Seal(append(f.Begin(nil, 0, header, len(payload)), payload...))
}

// unseal checks data sealed under magic and returns its header and
// payload (which share data's memory); what names the kind of binary in
// its errors.
func unseal(magic, what string, data []byte) (header, payload []byte, err error) {
	return unsealCovered(magic, what, data, false)
}

// unsealCovered is unseal, which does not compute the checksum when
// covered: the caller has just verified one over exactly data
// (frame.Format.OpenCovered).
func unsealCovered(magic, what string, data []byte, covered bool) (header, payload []byte, err error) {
	f := frame.Format{Magic: magic, Header: true}
	open := f.Open
	if covered {
		open = f.OpenCovered
	}
	fr, err := open(data)
	switch {
	case errors.Is(err, frame.ErrNotFramed):
		return nil, nil, fmt.Errorf("not a %s (bad magic or %d bytes, too short)", what, len(data))
	case err != nil:
		return nil, nil, err
	}
	return fr.Header, fr.Body, nil
}

// envelope is one kind of sealed binary, a delta or a checkpoint.
type envelope struct {
	magic string
	// what names the kind in errors.
	what string
	// format is the newest header format this build writes and reads;
	// oldest, when set, the oldest it reads (format otherwise).
	format, oldest int
	// corrupt is wrapped by the errors of damaged bytes.
	corrupt error
}

// sealed is a value an envelope holds: a JSON header, which has a format,
// and statistics.
type sealed interface {
	header() any
	headerFormat() int
	stats() *[]byte
	// check says what the value lacks.
	check() error
}

// encode checks v and seals it.
func (e envelope) encode(v sealed) ([]byte, error) {
	if err := v.check(); err != nil {
		return nil, fmt.Errorf("encode %s: %w", e.what, err)
	}
	js, err := json.Marshal(v.header())
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", e.what, err)
	}
	return seal(e.magic, js, *v.stats()), nil
}

// opening says how open reads a binary.
type opening struct {
	// covered: a checksum over exactly the binary's bytes has just been
	// verified (a blob's), so that its own is not computed again.
	covered bool
	// owned: the caller hands the binary's memory over, so that the
	// statistics are not copied out of it.
	owned bool
}

// open unseals data sealed in e into a new T, with a copy of its
// statistics (data's own when how.owned), and checks it: damaged bytes
// are an error wrapping e.corrupt, a header of another format one that
// names both formats.
func open[T any, P interface {
	*T
	sealed
}](e envelope, data []byte, how opening) (*T, error) {
	js, stats, err := unsealCovered(e.magic, e.what, data, how.covered)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", e.corrupt, err)
	}
	v := P(new(T))
	if err := json.Unmarshal(js, v.header()); err != nil {
		return nil, fmt.Errorf("%w: header: %v", e.corrupt, err)
	}
	if f := v.headerFormat(); f > e.format || f < max(e.oldest, 1) || e.oldest == 0 && f != e.format {
		if e.oldest == 0 || e.oldest == e.format {
			return nil, fmt.Errorf("%s format %d, this build reads format %d", e.what, f, e.format)
		}
		return nil, fmt.Errorf("%s format %d, this build reads formats %d to %d", e.what, f, e.oldest, e.format)
	}
	if !how.owned {
		stats = bytes.Clone(stats)
	}
	*v.stats() = stats
	if err := v.check(); err != nil {
		return nil, fmt.Errorf("%w: %v", e.corrupt, err)
	}
	return v, nil
}
