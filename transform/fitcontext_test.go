package transform

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"
)

// FitContext returns as soon as its context ends, even in the middle of an
// eigendecomposition of the landmarks' kernel, which reads no context.
func TestFitContextStopsDuringEigendecomposition(t *testing.T) {
	const n, d = 1500, 3
	rng := rand.New(rand.NewPCG(1, 2))
	x := mat.NewDense(n, d, nil)
	for i := range n {
		for j := range d {
			x.Set(i, j, rng.NormFloat64())
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	// The kernel matrix of 1,500 landmarks takes milliseconds, its
	// eigendecomposition seconds.
	time.AfterFunc(100*time.Millisecond, cancel)
	f, err := FitContext(ctx, []*mat.Dense{x, x}, nil, Config{Landmarks: n, Seed: 1})
	took := time.Since(start)
	if !errors.Is(err, context.Canceled) || f != nil {
		t.Fatalf("FitContext: %v, %v; want context.Canceled and no features", f, err)
	}
	if took > time.Second {
		t.Errorf("FitContext returned %v after its start, want within a second of the cancellation", took)
	}
}
