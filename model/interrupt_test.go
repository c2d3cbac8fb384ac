package model

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/schemas"
)

// countdownCtx is a context that is done from its allowed+1-th Err call
// on: it stops a computation at a given check, whatever the machine's
// speed.
type countdownCtx struct {
	context.Context
	allowed atomic.Int64
}

func countdown(allowed int64) *countdownCtx {
	c := &countdownCtx{Context: context.Background()}
	c.allowed.Store(allowed)
	return c
}

func (c *countdownCtx) Err() error {
	if c.allowed.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

// The statistics of the rows are accumulated a chunk at a time, with the
// context checked between chunks: a training cancelled while it goes
// through a million rows does not go through them all first.
func TestPrepareContextStopsBetweenChunks(t *testing.T) {
	views, labels := toyViews(21, 3*chunkRows(40))
	spec := testSpec(schemas.Classification, 2, 3)
	cfg := trainWith(func(c *TrainConfig) { c.Landmarks = 20 })
	if _, err := PrepareContext(countdown(1), spec, views, labels, cfg); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled after the first chunk: %v, want the cancellation", err)
	}
	p, err := PrepareContext(countdown(1<<40), spec, views, labels, cfg)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := Prepare(spec, views, labels, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if p.Stats.N != whole.Stats.N || !mat.Equal(p.Stats.S, whole.Stats.S) {
		t.Errorf("the statistics of the chunks differ from Prepare's")
	}
}

// The fit reads its context inside its O(D³) steps and iterations, not
// only between outer iterations: at 1,500 landmarks a view one iteration
// took tens of seconds.
func TestFitChecksContextWithinAnIteration(t *testing.T) {
	views, labels := toyViews(22, 400)
	spec := testSpec(schemas.Regression, 2, 3)
	cfg := trainWith(func(c *TrainConfig) {
		c.Landmarks = 60
		c.Fit.MaxIter, c.Fit.Tol = 1, 0
	})
	p, err := Prepare(spec, views, labels, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// One check allowed: the one between outer iterations.
	if _, err := p.Fit(countdown(1), cfg.Fit, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("a fit whose context is done after its first check: %v, want the cancellation", err)
	}
	if _, err := p.Fit(countdown(1<<40), cfg.Fit, nil); err != nil {
		t.Errorf("a fit whose context is never done: %v", err)
	}
}

// The blocked Cholesky factorisation and congruence stop between blocks
// once the context is done.
func TestBlockedKernelsStop(t *testing.T) {
	const n = 3 * potrfBlock
	a := blas64.Symmetric{N: n, Stride: n, Data: make([]float64, n*n)}
	for i := range n {
		a.Data[i*n+i] = 2
	}
	if potrfUpperContext(countdown(1), a) {
		t.Error("potrfUpperContext went through every block of a cancelled factorisation")
	}
	if a.Data[(n-1)*n+n-1] != 2 {
		t.Error("potrfUpperContext factorised the last block of a cancelled factorisation")
	}
	gen := func() blas64.General { return blas64.General{Rows: n, Cols: n, Stride: n, Data: make([]float64, n*n)} }
	p, b, l, y := gen(), gen(), gen(), gen()
	for i := range n {
		b.Data[i*n+i], l.Data[i*n+i] = 1, 1
	}
	congruenceContext(countdown(1), p, b, l, y)
	if p.Data[0] != 0 {
		t.Error("congruenceContext computed P although cancelled during its first product")
	}
	congruenceContext(context.Background(), p, b, l, y)
	if p.Data[0] != 1 || p.Data[n*n-1] != 1 {
		t.Error("congruenceContext of I and I is not I")
	}
}
