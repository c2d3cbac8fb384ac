package transform

import (
	"math"

	"gonum.org/v1/gonum/mat"
)

// Standardizer maps a view's features to zero mean and unit variance with
// the training rows' statistics: x ↦ (x − Center)·Scale, per feature.
// Kernels with one width for all features (RBF with γ = 1/d, say) need it
// when the features have different units.
type Standardizer struct {
	Center []float64
	Scale  []float64 // 1/σ per feature; 1 for a constant feature
}

// FitStandardizer computes the mean and 1/σ of every column of x (n×d). A
// constant column keeps scale 1, so it maps to 0 rather than NaN.
func FitStandardizer(x *mat.Dense) *Standardizer {
	n, d := x.Dims()
	s := &Standardizer{Center: make([]float64, d), Scale: make([]float64, d)}
	for i := 0; i < n; i++ {
		for j, v := range x.RawRowView(i)[:d] {
			s.Center[j] += v
		}
	}
	for j := range s.Center {
		s.Center[j] /= float64(n)
	}
	ss := make([]float64, d)
	for i := 0; i < n; i++ {
		for j, v := range x.RawRowView(i)[:d] {
			dv := v - s.Center[j]
			ss[j] += dv * dv
		}
	}
	for j := range ss {
		s.Scale[j] = 1
		if sd := math.Sqrt(ss[j] / float64(n)); sd > 0 {
			s.Scale[j] = 1 / sd
		}
	}
	return s
}

// Apply returns the standardized copy of x (n×d); x is not modified.
func (s *Standardizer) Apply(x *mat.Dense) *mat.Dense {
	n, d := x.Dims()
	if d != len(s.Center) {
		panic(mat.ErrShape)
	}
	if n == 0 {
		return &mat.Dense{}
	}
	out := mat.NewDense(n, d, nil)
	for i := 0; i < n; i++ {
		src, dst := x.RawRowView(i)[:d], out.RawRowView(i)
		for j, v := range src {
			dst[j] = (v - s.Center[j]) * s.Scale[j]
		}
	}
	return out
}
