package model

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/internal/asm/dd"
)

// The double-double sums are the same whatever the order of the terms,
// even where the terms cancel (the plain sums differ), and a merge of
// partial sums gives the sum of all terms.
func TestAddTermAnyOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	terms := make([]float64, 2000)
	for i := range terms {
		// Large terms that cancel, and small ones of every size.
		terms[i] = math.Ldexp(rng.NormFloat64(), rng.IntN(60)-30)
	}
	sum := func(ts []float64) (float64, float64) {
		hi, lo := []float64{0}, []float64{0}
		for _, x := range ts {
			hi[0], lo[0] = addTerm(hi[0], lo[0], x)
		}
		renormalize(hi, lo)
		return hi[0], lo[0]
	}
	want, wantLo := sum(terms)
	plainDiffers := false
	for trial := range 20 {
		shuffled := slices.Clone(terms)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if got, _ := sum(shuffled); got != want {
			t.Fatalf("trial %d: the sum in another order is %v, want %v", trial, got, want)
		}
		cut := rng.IntN(len(terms))
		hi, lo := make([]float64, 1), make([]float64, 1)
		hi[0], lo[0] = sum(shuffled[:cut])
		oHi, oLo := sum(shuffled[cut:])
		dd.Add(hi, lo, []float64{oHi}, []float64{oLo})
		renormalize(hi, lo)
		if hi[0] != want {
			t.Fatalf("trial %d: two partial sums merged give %v, want %v", trial, hi[0], want)
		}
		var plain, plainWant float64
		for i := range terms {
			plain += shuffled[i]
			plainWant += terms[i]
		}
		plainDiffers = plainDiffers || plain != plainWant
	}
	if !plainDiffers {
		t.Error("the plain sums agree in every order: the terms do not test the residues")
	}
	// Scaling keeps the double-double: ¼ of the sum, exactly a power of
	// two, is the sum of the quarters.
	hi, lo := []float64{want}, []float64{wantLo}
	ddScale(0.25, hi, lo)
	if hi[0] != want/4 || lo[0] != wantLo/4 {
		t.Errorf("sum/4 = %v + %v, want %v + %v", hi[0], lo[0], want/4, wantLo/4)
	}
}

// shuffledRows returns the rows of views and labels in the order perm.
func shuffledRows(views []*mat.Dense, labels []float64, perm []int) ([]*mat.Dense, []float64) {
	out := make([]*mat.Dense, len(views))
	for l, v := range views {
		_, d := v.Dims()
		out[l] = mat.NewDense(len(perm), d, nil)
		for i, p := range perm {
			out[l].SetRow(i, v.RawRowView(p))
		}
	}
	ys := make([]float64, len(perm))
	for i, p := range perm {
		ys[i] = labels[p]
	}
	return out, ys
}

// The statistics of the same rows, however they are cut into replicas'
// shares, in whatever order each replica sees its rows and in whatever
// batches, sent as bytes and merged in whatever order, are those of one
// pass over the rows bit for bit, and so a cold learned refit of them
// gives the one pass's decisions to 1e-8, on Nyström features where a
// difference in the last bit of S moved them by 1e-2 when the learned fit
// started from blockdiag(S_ll), of condition 1e9.
func TestMergedStatsAnyPartitionAnyOrder(t *testing.T) {
	if !exactBLAS {
		t.Skip("under -tags openblas the projections and S are OpenBLAS's, whose rounding depends on the batches' shapes (gram_openblas.go)")
	}
	for _, tc := range coldCases() {
		t.Run(tc.name, func(t *testing.T) {
			cfg := coldConfig(ModeLearned)
			base, err := Train(context.Background(), tc.spec, tc.views, tc.labels, cfg)
			if err != nil {
				t.Fatal(err)
			}
			views, labels := toyViews(23, 400)
			if base.Classes == nil {
				for i := range labels {
					labels[i] = 2*views[0].At(i, 0) - views[1].At(i, 2)
				}
			}
			one := base.NewAccumulator()
			if err := one.Add(views, labels); err != nil {
				t.Fatal(err)
			}
			want, err := one.RefitCold(context.Background(), cfg.Fit)
			if err != nil {
				t.Fatal(err)
			}
			var wantDec mat.Dense
			want.NewScorer().Score(&wantDec, nil, views)
			rng := rand.New(rand.NewPCG(31, 7))
			for trial := range 6 {
				t.Run(fmt.Sprint(trial), func(t *testing.T) {
					perm := rng.Perm(len(labels))
					cuts := []int{0, len(perm)}
					for range 1 + rng.IntN(5) {
						cuts = append(cuts, rng.IntN(len(perm)))
					}
					slices.Sort(cuts)
					var deltas [][]byte
					for s := range len(cuts) - 1 {
						replica := copyOf(t, base)
						acc := replica.NewAccumulator()
						for lo := cuts[s]; lo < cuts[s+1]; {
							hi := min(cuts[s+1], lo+1+rng.IntN(90))
							v, l := shuffledRows(views, labels, perm[lo:hi])
							if rng.IntN(2) == 0 {
								err = acc.Add(v, l)
							} else {
								var u mat.Dense
								replica.Project(&u, v)
								err = acc.AddProjected(&u, l)
							}
							if err != nil {
								t.Fatal(err)
							}
							lo = hi
						}
						delta, err := acc.MarshalBinary()
						if err != nil {
							t.Fatal(err)
						}
						deltas = append(deltas, delta)
					}
					rng.Shuffle(len(deltas), func(i, j int) { deltas[i], deltas[j] = deltas[j], deltas[i] })
					refitter := copyOf(t, base)
					merged := refitter.NewAccumulator()
					for _, delta := range deltas {
						received, err := UnmarshalAccumulator(delta, refitter)
						if err != nil {
							t.Fatal(err)
						}
						if err := merged.Merge(received); err != nil {
							t.Fatal(err)
						}
					}
					if diff := statsDiffer(merged.stats, one.stats); diff != "" {
						t.Errorf("%d shares: %s", len(deltas), diff)
					}
					got, err := merged.RefitCold(context.Background(), cfg.Fit)
					if err != nil {
						t.Fatal(err)
					}
					var gotDec mat.Dense
					got.NewScorer().Score(&gotDec, nil, views)
					if d := closeRel(&gotDec, &wantDec); d > 1e-8 {
						t.Errorf("%d shares: decisions differ from one pass's by %g", len(deltas), d)
					}
				})
			}
		})
	}
}

// statsDiffer names the first value of got that is not want's, bit for
// bit, or returns "".
func statsDiffer(got, want *Stats) string {
	if got.N != want.N {
		return fmt.Sprintf("N %v, want %v", got.N, want.N)
	}
	d := want.Dim()
	for i := range d {
		for j := i; j < d; j++ {
			if g, w := got.S.At(i, j), want.S.At(i, j); g != w {
				return fmt.Sprintf("S[%d,%d] %v, want %v", i, j, g, w)
			}
		}
	}
	if !mat.Equal(got.C, want.C) {
		return "C differs"
	}
	for _, v := range []struct {
		name      string
		got, want []float64
	}{{"YtY", got.YtY, want.YtY}, {"USum", got.USum, want.USum}, {"YSum", got.YSum, want.YSum}} {
		if !slices.Equal(v.got, v.want) {
			return fmt.Sprintf("%s %v, want %v", v.name, v.got, v.want)
		}
	}
	return ""
}
