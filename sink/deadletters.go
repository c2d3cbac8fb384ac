package sink

import (
	"context"
	"fmt"

	"github.com/mvml/mvml/schemas"
)

// DeadLetters receives the rows a job could not process, with the reason.
type DeadLetters interface {
	// WriteRejects records rejects; they are durable when it returns.
	WriteRejects(ctx context.Context, rejects []schemas.RowError) error
	// Close releases the destination, within ctx; later WriteRejects fail.
	Close(ctx context.Context) error
}

var _ DeadLetters = (*Rejects)(nil)

// WriteRejects writes one line per reject, as Write does, unless ctx is
// already done. The lines do not hold RowError.Payload: a file of rejects
// says where each row is in its input, which is kept.
func (r *Rejects) WriteRejects(ctx context.Context, rejects []schemas.RowError) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("rejects: %w", err)
	}
	return r.Write(rejects...)
}
