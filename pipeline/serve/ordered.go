package serve

import (
	"context"
	"sync"
)

// ticket is the result of one item of an orderedWork, handed on in the
// items' order; value is set once ready is closed. slot is the item's
// share of the stage's room, its own until the consumer frees it, so that
// the work may leave scratch buffers indexed by slot for the consumer.
type ticket[T any] struct {
	slot  int
	ready chan struct{}
	value T
}

// wait returns the ticket's value once the work on its item is done.
func (t *ticket[T]) wait() T {
	<-t.ready
	return t.value
}

// orderedWork runs a function on the items of a channel on several
// goroutines at once and hands the results on in the items' order: the
// stage of the Service that scores batch k+1 on one core while batch k is
// written and committed, and batch k+2 decoded, on others. It takes an
// item only when it has room (a slot) for it: at most inFlight items are
// taken and not yet freed by the consumer, whether being worked on,
// done and waiting for their turn, or in the consumer's hands.
type orderedWork[T any] struct {
	tickets chan *ticket[T]
	slots   chan int
	cancel  context.CancelFunc
	running sync.WaitGroup
}

// startOrdered starts workers goroutines running work on the items of in
// (workers ≥ 1, inFlight ≥ workers). work gets a context that ends when
// ctx does or stop is called, and may then return at once with a value
// that says so. The stage ends when in is closed or the context ends:
// tickets is closed then.
func startOrdered[In, T any](ctx context.Context, in <-chan In, workers, inFlight int, work func(ctx context.Context, slot int, item In) T) *orderedWork[T] {
	ctx, cancel := context.WithCancel(ctx)
	o := &orderedWork[T]{tickets: make(chan *ticket[T], inFlight), slots: make(chan int, inFlight), cancel: cancel}
	for slot := range inFlight {
		o.slots <- slot
	}
	type job struct {
		t    *ticket[T]
		item In
	}
	// Both channels have room for every ticket that can exist, so that
	// the dispatcher never waits on a worker or on the consumer.
	jobs := make(chan job, inFlight)
	o.running.Go(func() {
		defer close(o.tickets)
		defer close(jobs)
		for {
			var slot int
			select {
			case slot = <-o.slots:
			case <-ctx.Done():
				return
			}
			var item In
			select {
			case it, ok := <-in:
				if !ok {
					return
				}
				item = it
			case <-ctx.Done():
				return
			}
			t := &ticket[T]{slot: slot, ready: make(chan struct{})}
			jobs <- job{t, item}
			o.tickets <- t
		}
	})
	for range workers {
		o.running.Go(func() {
			for j := range jobs {
				j.t.value = work(ctx, j.t.slot, j.item)
				close(j.t.ready)
			}
		})
	}
	return o
}

// results delivers the tickets in the items' order; it is closed when the
// stage ends. A ticket taken from it is the consumer's to free.
func (o *orderedWork[T]) results() <-chan *ticket[T] { return o.tickets }

// free gives the room of a ticket the consumer is done with back to the
// stage.
func (o *orderedWork[T]) free(t *ticket[T]) { o.slots <- t.slot }

// stop ends the stage, passes the value of every ticket not taken by the
// consumer to release once its work is done, and returns when every
// goroutine of the stage has.
func (o *orderedWork[T]) stop(release func(T)) {
	o.cancel()
	for t := range o.tickets {
		release(t.wait())
	}
	o.running.Wait()
}
