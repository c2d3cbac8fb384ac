package transform

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/schemas"
)

func TestStandardizer(t *testing.T) {
	x := mat.NewDense(4, 3, []float64{
		1, 10, 5,
		2, 20, 5,
		3, 30, 5,
		4, 40, 5,
	})
	s := FitStandardizer(x)
	y := s.Apply(x)
	for j := 0; j < 3; j++ {
		col := mat.Col(nil, j, y)
		var mean, ss float64
		for _, v := range col {
			mean += v
		}
		mean /= 4
		for _, v := range col {
			ss += (v - mean) * (v - mean)
		}
		want := 1.0
		if j == 2 {
			want = 0 // constant column: centred, not scaled to NaN
		}
		if math.Abs(mean) > 1e-12 || math.Abs(ss/4-want) > 1e-12 {
			t.Errorf("column %d: mean %g, variance %g", j, mean, ss/4)
		}
	}
	if x.At(0, 1) != 10 {
		t.Error("Apply modified its input")
	}
}

// Fit with standardization equals Fit on data standardized beforehand, and
// the map standardizes new rows itself.
func TestFitStandardized(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	x := randDense(rng, 60, 3, 1, 0)
	for i := 0; i < 60; i++ {
		x.Set(i, 1, 1000*x.At(i, 1)+5) // a feature in other units
	}
	spec := []*schemas.KernelSpec{{Gamma: 0.3}}
	got, err := Fit([]*mat.Dense{x}, spec, Config{Landmarks: 20, Seed: 1, Standardize: []bool{true}})
	if err != nil {
		t.Fatal(err)
	}
	pre := FitStandardizer(x).Apply(x)
	want, err := Fit([]*mat.Dense{pre}, spec, Config{Landmarks: 20, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	u1, u2 := make([]*mat.Dense, 1), make([]*mat.Dense, 1)
	got.Transform(u1, []*mat.Dense{x})
	want.Transform(u2, []*mat.Dense{pre})
	if d := maxRelDiff(u1[0], u2[0], 1e-12); d > 1e-12 {
		t.Errorf("standardized features differ by %g", d)
	}
}
