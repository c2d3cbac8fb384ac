package sink

import (
	"context"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
)

// AsyncWriter is a Sink whose writes can overlap: WriteAsync starts
// writing the rows of a record and returns at once with its Flight, so
// that a job may score its next batches, and acknowledge earlier ones,
// while the destination takes them. The Kafka sinks implement it.
//
// WriteAsync encodes rec before it returns and does not keep it. The
// writes of successive WriteAsync calls are made one after the other, in
// call order, each with Write's retries and refusals; a write that fails
// does not stop the next one. Write is WriteAsync followed by the wait for
// its flight, after the flights before it. Close waits for the flights
// under way (within its context). Like Sink, an AsyncWriter is not safe
// for concurrent use; its flights are.
type AsyncWriter interface {
	Sink
	// WriteAsync starts writing the rows of rec. Its error says that the
	// write did not start (the sink is closed, ctx ended, rec cannot be
	// encoded); a failure of the write itself is its flight's. ctx bounds
	// WriteAsync alone: the flight, which outlives it, is bounded by the
	// sink's own retry policy and timeouts, and by Close.
	WriteAsync(ctx context.Context, rec arrow.Record) (*Flight, error)
}

// Flight is a write under way. Done is closed once it has ended: Err is
// then nil when the destination has every row, and otherwise says why
// not, as Write would have; Finished is when it ended.
type Flight struct {
	done     chan struct{}
	err      error
	finished time.Time
}

func newFlight() *Flight { return &Flight{done: make(chan struct{})} }

// landed returns a flight that has already ended with err.
func landed(err error) *Flight {
	f := newFlight()
	f.end(err)
	return f
}

// end ends the flight with err.
func (f *Flight) end(err error) {
	f.err, f.finished = err, time.Now()
	close(f.done)
}

// Done is closed once the flight has ended.
func (f *Flight) Done() <-chan struct{} { return f.done }

// Err is the flight's failure once it has ended, nil before and after a
// success.
func (f *Flight) Err() error {
	select {
	case <-f.done:
		return f.err
	default:
		return nil
	}
}

// Finished is when the flight ended, zero before.
func (f *Flight) Finished() time.Time {
	select {
	case <-f.done:
		return f.finished
	default:
		return time.Time{}
	}
}

// Wait waits for the flight to end and returns Err, or ctx's error when
// ctx ends first (the flight goes on).
func (f *Flight) Wait(ctx context.Context) error {
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitFlight waits for the flight of a write started for Write, or
// returns why it did not start.
func waitFlight(f *Flight, err error) error {
	if err != nil {
		return err
	}
	<-f.Done()
	return f.Err()
}
