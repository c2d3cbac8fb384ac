package blasimpl

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/schemas"
)

// shape is a multi-view workload of the model's: views × dim features, p
// landmarks, rows to fit on and rows to score.
type shape struct {
	name                           string
	views, dim, landmarks, classes int
	fitRows, scoreRows             int
}

var shapes = []shape{
	// The scoring benchmark's: 3 × 64, p = 128, a batch of 4096 rows.
	{name: "3x64-p128", views: 3, dim: 64, landmarks: 128, classes: 4, fitRows: 1200, scoreRows: 4096},
	// uWave at 12% landmarks: 3 × 315, 896 rows, p = 108, 8 classes.
	{name: "uwave", views: 3, dim: 315, landmarks: 108, classes: 8, fitRows: 896, scoreRows: 1000},
}

// data draws rows of s: each class a centre per view, plus noise, so that
// the views carry the label and a fit has something to learn.
func (s shape) data(rows int, seed uint64) (views []*mat.Dense, labels []float64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	centres := rand.New(rand.NewPCG(1, 7)) // the same classes for every draw
	centre := make([][]float64, s.views*s.classes)
	for i := range centre {
		centre[i] = make([]float64, s.dim)
		for j := range centre[i] {
			centre[i][j] = centres.NormFloat64() / math.Sqrt(float64(s.dim))
		}
	}
	labels = make([]float64, rows)
	for i := range labels {
		labels[i] = float64(rng.IntN(s.classes))
	}
	for l := range s.views {
		v := mat.NewDense(rows, s.dim, nil)
		for i := range rows {
			c := centre[l*s.classes+int(labels[i])]
			for j := range s.dim {
				v.Set(i, j, c[j]+0.5*rng.NormFloat64()/math.Sqrt(float64(s.dim)))
			}
		}
		views = append(views, v)
	}
	return views, labels
}

func (s shape) spec(t testing.TB) *schemas.ViewSpec {
	t.Helper()
	var views []string
	for l := range s.views {
		views = append(views, fmt.Sprintf(`{"name": "v%d", "prefix": "v%d_", "dim": %d}`, l, l, s.dim))
	}
	spec, err := schemas.ParseViewSpec([]byte(`{"task": "classification", "views": [` + strings.Join(views, ",") + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	return spec
}
