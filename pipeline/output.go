package pipeline

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/apache/arrow/go/v15/arrow"

	"github.com/mvml/mvml/sink"
)

// output is the job's sink: its file appears under its final name only
// when the job succeeds (commit); a failed job discards it.
type output struct {
	sink.Sink
	name string
}

func createOutput(path string, stdout io.Writer, schema *arrow.Schema, opts sink.ParquetOptions) (*output, error) {
	if path == sink.Stdout {
		if stdout == nil {
			stdout = os.Stdout
		}
		return &output{Sink: sink.NewJSONL(stdout), name: "standard output"}, nil
	}
	s, err := sink.Create(path, schema, opts)
	if err != nil {
		return nil, fmt.Errorf("output %s: %w", path, err)
	}
	return &output{Sink: s, name: path}, nil
}

func (o *output) commit(ctx context.Context) error {
	if err := o.Close(ctx); err != nil {
		return fmt.Errorf("output %s: %w", o.name, err)
	}
	return nil
}

// discard drops the output of a failed job; the job's error says what went
// wrong.
func (o *output) discard() error {
	if a, ok := o.Sink.(sink.Aborter); ok {
		return a.Abort()
	}
	// Standard output, which has nothing left to flush.
	return o.Close(context.Background())
}
