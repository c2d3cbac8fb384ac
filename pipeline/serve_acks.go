package pipeline

import (
	"context"
	"fmt"
	"sync"
)

// acker acknowledges batches (commits their offsets) on a goroutine of its
// own, in the order they are handed to it, while the run loop serves the
// next ones. With writes in flight (ServeConfig.WritesInFlight) a batch's
// offset commit was the run loop's last wait on the broker: a round trip a
// batch, for any number of rows. A batch is handed over only once its
// scores are durable and its statistics published, as before; the commits
// stay in input order. The first failure stops the acknowledgements: the
// batches after it stay unacknowledged (delivered again) and hand, close
// and the run loop (failed) return it.
type acker struct {
	r      *serviceRun
	queue  chan pendingBatch
	failed chan error // the first failure, once
	err    error      // the first failure, for the acker's goroutine
	done   sync.WaitGroup
}

// startAcker starts the acknowledgements of r's batches, up to depth of
// them waiting. Their commits get ctx's shutdown grace, as the batch in
// hand does.
func (r *serviceRun) startAcker(ctx context.Context, depth int) *acker {
	a := &acker{r: r, queue: make(chan pendingBatch, depth), failed: make(chan error, 1)}
	graced, cancel := r.withGrace(ctx)
	a.done.Go(func() {
		defer cancel()
		for p := range a.queue {
			if a.err != nil {
				continue // not acknowledged: delivered again
			}
			if err := p.ack(graced); err != nil {
				a.err = fmt.Errorf("serve: acknowledge: %w", err)
				a.failed <- a.err
				continue
			}
			r.acknowledged(p)
		}
	})
	return a
}

// hand gives p to the acknowledgements; it waits while depth batches
// wait already, and returns the acknowledgements' failure if there was
// one.
func (a *acker) hand(ctx context.Context, p pendingBatch) error {
	select {
	case a.queue <- p:
		return nil
	case err := <-a.failed:
		a.failed <- err // for the run loop's await
		return err
	case <-ctx.Done():
		return fmt.Errorf("serve: acknowledge: %w", ctx.Err())
	}
}

// close waits until the batches handed over are acknowledged (within
// the grace of startAcker's ctx) and returns the first failure.
func (a *acker) close() error {
	close(a.queue)
	a.done.Wait()
	return a.err
}
