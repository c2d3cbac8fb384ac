package pipeline

import (
	"log/slog"

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/mvml/mvml/ingest"
)

// Options tune how a job reads its inputs and reports on itself.
type Options struct {
	// BatchSize is the number of rows per input batch; 0 means
	// ingest.DefaultBatchSize.
	BatchSize int
	// Allocator allocates the Arrow buffers; nil means a Go allocator (for
	// Score, one that hands out again the buffers of released records).
	Allocator memory.Allocator
	// Logger receives the job's log lines; nil means none.
	Logger *slog.Logger
	// Progress, when set, is called with the number of input rows done so
	// far (accepted and rejected) after every batch, always from one
	// goroutine at a time.
	Progress func(rows int64)
}

// WithDefaults is o with its defaults in place of its zero values: a Go
// allocator, a logger that discards, a Progress that does nothing.
func (o Options) WithDefaults() Options {
	if o.Allocator == nil {
		o.Allocator = memory.NewGoAllocator()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Progress == nil {
		o.Progress = func(int64) {}
	}
	return o
}

// IngestOptions are the options of ingest's sources for o, requiring a
// label on every row with requireLabel.
func (o Options) IngestOptions(requireLabel bool) ingest.Options {
	return ingest.Options{BatchSize: o.BatchSize, Allocator: o.Allocator, RequireLabel: requireLabel, Logger: o.Logger}
}
