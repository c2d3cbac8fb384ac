package model

import (
	"math"
	"strings"
	"testing"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
)

// Predict gives every row Model.Predict of the decision Score gives it,
// and every row without a finite score NaN, reported with the view and
// the column of the value that overflowed.
func TestScorerPredict(t *testing.T) {
	m, views := trainedToy(t)
	for _, tc := range []struct {
		name       string
		view, j    int
		value      float64
		wantColumn string
	}{
		{"all finite", -1, 0, 0, ""},
		{"1.7e308", 1, 2, 1.7e308, "v1_2"},
		{"-1.7e308", 0, 1, -1.7e308, "v0_1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows := []*mat.Dense{mat.DenseCopyOf(views[0].Slice(0, 8, 0, 2)), mat.DenseCopyOf(views[1].Slice(0, 8, 0, 3))}
			if tc.view >= 0 {
				rows[tc.view].Set(5, tc.j, tc.value)
			}
			s := m.NewScorer()
			var want mat.Dense
			s.Score(&want, nil, rows)
			pred := make([]float64, 8)
			var dec, contrib mat.Dense
			bad := s.Predict(pred, &dec, &contrib, rows)
			for i := range 8 {
				if !floats.Same(dec.RawRowView(i), want.RawRowView(i)) {
					t.Errorf("row %d: decision %v, Score gives %v", i, dec.RawRowView(i), want.RawRowView(i))
				}
			}
			if r, c := contrib.Dims(); r != 8 || c != 2 {
				t.Errorf("contributions %d×%d, want 8×2", r, c)
			}
			if tc.view < 0 {
				if len(bad) != 0 {
					t.Fatalf("unscorable %+v, want none", bad)
				}
			} else {
				if len(bad) != 1 || bad[0].Row != 5 || bad[0].View != tc.view || bad[0].Column != tc.wantColumn {
					t.Fatalf("unscorable %+v, want row 5, view %d, column %s", bad, tc.view, tc.wantColumn)
				}
				re := bad[0].RowError()
				if re.Row != 5 || re.Column != tc.wantColumn || !strings.HasPrefix(re.Reason, "no finite score: view v") {
					t.Errorf("row error %+v", re)
				}
			}
			for i, p := range pred {
				switch {
				case i == 5 && tc.view >= 0:
					if !math.IsNaN(p) {
						t.Errorf("row 5 without a finite score predicts %v, want NaN", p)
					}
				case p != m.Predict(want.RawRowView(i)):
					t.Errorf("row %d predicts %v, its decision %v", i, p, want.RawRowView(i))
				}
			}
		})
	}
}

// A destination of the wrong length is a programming error, as in gonum.
func TestScorerPredictPanicsOnShape(t *testing.T) {
	m, views := trainedToy(t)
	defer func() {
		if recover() == nil {
			t.Error("no panic for 3 predictions of 120 rows")
		}
	}()
	var dec mat.Dense
	m.NewScorer().Predict(make([]float64, 3), &dec, nil, views)
}
