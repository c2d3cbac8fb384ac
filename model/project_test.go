package model

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/schemas"
)

// closeRel reports the largest |a−b| / max(1, |b|) over two matrices of
// one shape.
func closeRel(a, b *mat.Dense) float64 {
	r, c := b.Dims()
	var worst float64
	for i := range r {
		for j := range c {
			x, y := a.At(i, j), b.At(i, j)
			worst = math.Max(worst, math.Abs(x-y)/math.Max(1, math.Abs(y)))
		}
	}
	return worst
}

// projectionModels trains a model of every output shape (several classes,
// two classes, regression) on the toy views.
func projectionModels(t *testing.T) map[string]*Model {
	t.Helper()
	views, labels := toyViews(11, 150)
	binary := make([]float64, len(labels))
	target := make([]float64, len(labels))
	for i, v := range labels {
		binary[i] = math.Min(v, 2)
		target[i] = 3*views[0].At(i, 0) - views[1].At(i, 1) + 10
	}
	cfg := trainWith(func(c *TrainConfig) { c.Landmarks, c.Fit.Lambda, c.Fit.LearnW = 30, 0.01, true })
	out := map[string]*Model{}
	for name, tc := range map[string]struct {
		task   schemas.Task
		labels []float64
	}{
		"three classes": {schemas.Classification, labels},
		"two classes":   {schemas.Classification, binary},
		"regression":    {schemas.Regression, target},
	} {
		m, err := Train(context.Background(), testSpec(tc.task, 2, 3), views, tc.labels, cfg)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = m
	}
	return out
}

// Project gives the feature maps' features side by side, and the
// decisions, contributions and predictions from them equal Score's and
// Predict's from the views.
func TestScoreProjectedEqualsScore(t *testing.T) {
	views, _ := toyViews(12, 70)
	for name, m := range projectionModels(t) {
		t.Run(name, func(t *testing.T) {
			var u mat.Dense
			m.Project(&u, views)
			if n, d := u.Dims(); n != 70 || d != m.Dim() {
				t.Fatalf("features %d×%d, want 70×%d", n, d, m.Dim())
			}
			blocks := make([]*mat.Dense, len(views))
			m.Features.Transform(blocks, views)
			off := 0
			for l, b := range blocks {
				_, r := b.Dims()
				if !mat.Equal(u.Slice(0, 70, off, off+r), b) {
					t.Errorf("view %d: projected block differs from the feature map's", l)
				}
				off += r
			}

			s := m.NewScorer()
			var want, wantContrib, dec, contrib mat.Dense
			s.Score(&want, &wantContrib, views)
			s.ScoreProjected(&dec, &contrib, &u)
			if d := closeRel(&dec, &want); d > 1e-10 {
				t.Errorf("decisions from the features differ from Score's by %g", d)
			}
			if d := closeRel(&contrib, &wantContrib); d > 1e-10 {
				t.Errorf("contributions from the features differ from Score's by %g", d)
			}

			wantPred := make([]float64, 70)
			s.Predict(wantPred, &want, nil, views)
			pred := make([]float64, 70)
			var kept mat.Dense
			if bad := s.ProjectPredict(&kept, pred, &dec, nil, views); len(bad) != 0 {
				t.Fatalf("unscorable rows %+v", bad)
			}
			if !mat.Equal(&kept, &u) {
				t.Error("ProjectPredict kept other features than Project")
			}
			for i := range pred {
				// A regression prediction is its decision; a class may only
				// differ at a tie, which these rows do not come near.
				if math.Abs(pred[i]-wantPred[i]) > 1e-10*math.Max(1, math.Abs(wantPred[i])) {
					t.Errorf("row %d predicts %v from its features, %v from its views", i, pred[i], wantPred[i])
				}
			}
		})
	}
}

// A row whose features overflow has no score from them either, and is
// reported with its view and column; the other rows keep theirs.
func TestProjectPredictUnscorable(t *testing.T) {
	m, views := trainedToy(t)
	for _, tc := range []struct {
		name       string
		view, j    int
		value      float64
		wantColumn string
	}{
		{"1.7e308", 1, 2, 1.7e308, "v1_2"},
		{"-1.7e308", 0, 1, -1.7e308, "v0_1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows := []*mat.Dense{mat.DenseCopyOf(views[0].Slice(0, 8, 0, 2)), mat.DenseCopyOf(views[1].Slice(0, 8, 0, 3))}
			rows[tc.view].Set(5, tc.j, tc.value)
			var u, dec, contrib mat.Dense
			pred := make([]float64, 8)
			bad := m.NewScorer().ProjectPredict(&u, pred, &dec, &contrib, rows)
			if len(bad) != 1 || bad[0].Row != 5 || bad[0].View != tc.view || bad[0].Column != tc.wantColumn ||
				!strings.Contains(bad[0].Reason, "features overflow") {
				t.Fatalf("unscorable %+v, want row 5, view %d, column %s, its features overflowing", bad, tc.view, tc.wantColumn)
			}
			for i, p := range pred {
				if math.IsNaN(p) != (i == 5) {
					t.Errorf("row %d predicts %v", i, p)
				}
			}
			// The same row's features are refused by the statistics, which
			// name the row and the view.
			err := m.NewAccumulator().AddProjected(&u, []float64{1, 2, 3, 1, 2, 3, 1, 2})
			var re *schemas.RowError
			if !errors.As(err, &re) || re.Row != 5 || !strings.Contains(re.Reason, "view v") {
				t.Errorf("adding the features of an overflowing row: %v, want a row error for row 5 naming its view", err)
			}
		})
	}
}

// Rows added by their projected features give the statistics of the same
// rows added by their views.
func TestAddProjectedEqualsAdd(t *testing.T) {
	views, labels := toyViews(13, 200)
	for name, m := range projectionModels(t) {
		t.Run(name, func(t *testing.T) {
			rows := labels
			if m.Classes == nil {
				rows = make([]float64, len(labels))
				for i := range rows {
					rows[i] = views[0].At(i, 1) + 5
				}
			} else if len(m.Classes) == 2 {
				rows = make([]float64, len(labels))
				for i, v := range labels {
					rows[i] = math.Min(v, 2)
				}
			}
			byViews, byFeatures := m.NewAccumulator(), m.NewAccumulator()
			var u mat.Dense
			for lo := 0; lo < 200; lo += 64 {
				v, l := rowsOf(views, rows, lo, min(lo+64, 200))
				if err := byViews.Add(v, l); err != nil {
					t.Fatal(err)
				}
				m.Project(&u, v)
				if err := byFeatures.AddProjected(&u, l); err != nil {
					t.Fatal(err)
				}
			}
			want, got := byViews.stats, byFeatures.stats
			if got.N != want.N {
				t.Errorf("rows %v, want %v", got.N, want.N)
			}
			for what, pair := range map[string][2]mat.Matrix{
				"S": {got.S, want.S}, "C": {got.C, want.C},
				"YtY":  {mat.NewVecDense(len(got.YtY), got.YtY), mat.NewVecDense(len(want.YtY), want.YtY)},
				"USum": {mat.NewVecDense(len(got.USum), got.USum), mat.NewVecDense(len(want.USum), want.USum)},
				"YSum": {mat.NewVecDense(len(got.YSum), got.YSum), mat.NewVecDense(len(want.YSum), want.YSum)},
			} {
				if d := relDiff(pair[0], pair[1]); d > 1e-12 {
					t.Errorf("%s differs by %g", what, d)
				}
			}
		})
	}
}

// What AddProjected refuses it names, and it adds nothing then.
func TestAddProjectedRefuses(t *testing.T) {
	m, views := trainedToy(t)
	v, l := rowsOf(views, []float64{1, 2, 3, 1, 2, 3}, 0, 6)
	var u mat.Dense
	m.Project(&u, v)
	wide := mat.NewDense(6, m.Dim()+1, nil)
	for _, tc := range []struct {
		name   string
		u      *mat.Dense
		labels []float64
		want   string
	}{
		{"unknown class", &u, []float64{1, 2, 3, 1, 42, 3}, "label 42 of row 4 is not one of the model's classes"},
		{"too few labels", &u, l[:5], "6 rows but 5 labels"},
		{"other width", wide, l, fmt.Sprintf("rows of %d features, the model's have %d", m.Dim()+1, m.Dim())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			acc := m.NewAccumulator()
			if err := acc.AddProjected(tc.u, tc.labels); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
			if acc.Rows() != 0 {
				t.Errorf("a refused batch added %v rows", acc.Rows())
			}
		})
	}
	acc := m.NewAccumulator()
	if err := acc.AddProjected(&mat.Dense{}, nil); err != nil || acc.Rows() != 0 {
		t.Errorf("no rows: %v, %v rows", err, acc.Rows())
	}
}

// BenchmarkScoreProjected compares, at the uWave shape (3 views × 315,
// p = 12% of 896 rows, 8 classes, batches of 4096 rows), the decisions
// alone (score), the decisions and the projected features a late-label
// join keeps from one kernel per row (project+score-projected), and the
// same from two (score+project).
func BenchmarkScoreProjected(b *testing.B) {
	views, labels := uwaveShaped(896)
	m, err := Train(context.Background(), testSpec(schemas.Classification, 315, 315, 315), views, labels,
		trainWith(func(c *TrainConfig) { c.Fit.Mode, c.Fit.Lambda = ModeIdentity, 0.01 }))
	if err != nil {
		b.Fatal(err)
	}
	batch, _ := uwaveShaped(4096)
	s := m.NewScorer()
	var u, dec mat.Dense
	for _, tc := range []struct {
		name string
		run  func()
	}{
		{"score", func() { s.Score(&dec, nil, batch) }},
		{"project+score-projected", func() { m.Project(&u, batch); s.ScoreProjected(&dec, nil, &u) }},
		{"score+project", func() { s.Score(&dec, nil, batch); m.Project(&u, batch) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				tc.run()
			}
			b.ReportMetric(float64(4096*b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
	b.Logf("D = %d", m.Dim())
}
