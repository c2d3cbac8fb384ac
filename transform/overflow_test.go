package transform

import (
	"errors"
	"math"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/schemas"
)

// A row merely far from the landmarks has RBF kernel 0; a row whose squared
// distance overflows has NaN, so that it is refused rather than scored as
// far away.
func TestRBFOverflowIsNaN(t *testing.T) {
	z := mat.NewDense(2, 2, []float64{0, 0, 1, 1})
	k := Kernel{Type: schemas.KernelRBF, Gamma: 1}
	var dst mat.Dense
	k.Cross(&dst, mat.NewDense(3, 2, []float64{1e3, 0, 1e200, 0, -1.7e308, 0}), z)
	for j := range 2 {
		if v := dst.At(0, j); v != 0 {
			t.Errorf("distant row, landmark %d: %v, want 0", j, v)
		}
		for i := 1; i < 3; i++ {
			if v := dst.At(i, j); !math.IsNaN(v) {
				t.Errorf("row %d, landmark %d: %v, want NaN", i, j, v)
			}
		}
	}
}

// A landmark whose polynomial kernel with itself overflows is named by its
// row, before the eigendecomposition sees a NaN.
func TestLandmarkOverflowNamed(t *testing.T) {
	views := threeViews(47, 20)
	views[1].Set(7, 0, 1e100)
	poly := &schemas.KernelSpec{Type: schemas.KernelPoly}
	_, err := Fit(views, []*schemas.KernelSpec{nil, poly, nil}, Config{Landmarks: 1, ViewNames: []string{"pos", "vel", "acc"}})
	var re *schemas.RowError
	if !errors.As(err, &re) || re.Row != 7 || !strings.Contains(re.Reason, `view "vel": the poly`) {
		t.Fatalf("error %v, want row 7 of view vel", err)
	}
}
