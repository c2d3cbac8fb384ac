// The examples print the default (pure-Go BLAS) build's figures: the
// learned fits carry OpenBLAS's other rounding into their last digits (and
// the statistics' rounding: the figures changed when S became the sum
// rounded once rather than added up row by row).

//go:build !openblas

package model_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/schemas"
)

// ringSpec declares two views: "position", a point in the plane, and
// "sensor", a rotated and noisier reading of it with a third feature
// that is only noise.
func ringSpec() *schemas.ViewSpec {
	spec, err := schemas.ParseViewSpec([]byte(`{"task": "classification", "views": [
		{"name": "position", "prefix": "p_", "dim": 2},
		{"name": "sensor", "prefix": "s_", "dim": 3}]}`))
	if err != nil {
		panic(err)
	}
	return spec
}

// rings draws n rows of ringSpec's views: a point on a ring of radius 1,
// 2 or 3, the class, seen through both views.
func rings(n int, seed uint64) (views []*mat.Dense, labels []float64) {
	rng := rand.New(rand.NewPCG(seed, 1))
	position, sensor := mat.NewDense(n, 2, nil), mat.NewDense(n, 3, nil)
	labels = make([]float64, n)
	for i := range n {
		class := 1 + i%3
		angle := 2 * math.Pi * rng.Float64()
		x := float64(class)*math.Cos(angle) + 0.2*rng.NormFloat64()
		y := float64(class)*math.Sin(angle) + 0.2*rng.NormFloat64()
		position.SetRow(i, []float64{x, y})
		sensor.SetRow(i, []float64{0.8*x - 0.6*y + 0.3*rng.NormFloat64(), 0.6*x + 0.8*y + 0.3*rng.NormFloat64(), rng.NormFloat64()})
		labels[i] = float64(class)
	}
	return []*mat.Dense{position, sensor}, labels
}

// accuracy is the share of the predictions, NaN ones left out, that equal
// their labels.
func accuracy(pred, labels []float64) float64 {
	right, all := 0, 0
	for i, p := range pred {
		if math.IsNaN(p) {
			continue
		}
		all++
		if p == labels[i] {
			right++
		}
	}
	return float64(right) / float64(all)
}

// A model is trained on rows held in memory: one matrix per view and the
// labels. Scoring new rows gives one decision per class (one-vs-rest, the
// largest wins) and, when asked, every view's share of the decision of the
// predicted class: the shares add up to that decision less its head's
// intercept.
func ExampleScorer_Score() {
	views, labels := rings(300, 1)
	cfg := model.DefaultTrainConfig()
	cfg.Landmarks, cfg.Fit.Lambda = 0.2, 0.01
	m, err := model.Train(context.Background(), ringSpec(), views, labels, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	fresh, _ := rings(3, 2)
	var dec, contrib mat.Dense
	m.NewScorer().Score(&dec, &contrib, fresh)
	fmt.Println("classes:", m.Classes)
	for i := range 3 {
		d, c := dec.RawRowView(i), contrib.RawRowView(i)
		best := floats.MaxIdx(d)
		sum := floats.Sum(c) + m.Heads[best].Intercept[0]
		fmt.Printf("row %d: decisions %5.2f → class %g; shares %5.2f add up: %t\n",
			i, d, m.Predict(d), c, math.Abs(sum-d[best]) < 1e-9)
	}
	// Output:
	// classes: [1 2 3]
	// row 0: decisions [ 0.43 -0.32 -1.12] → class 1; shares [-3.82 -1.13] add up: true
	// row 1: decisions [-1.06  1.02 -0.84] → class 2; shares [13.44  2.93] add up: true
	// row 2: decisions [-1.09 -0.60  0.62] → class 3; shares [-5.75 -1.43] add up: true
}

// A regression model learns a number: here the distance of the point from
// the centre, from both views. Its decisions are in the labels' units.
func ExampleTrain_regression() {
	spec := ringSpec()
	spec.Task = schemas.Regression
	views, _ := rings(300, 5)
	radius := func(views []*mat.Dense) []float64 {
		n, _ := views[0].Dims()
		r := make([]float64, n)
		for i := range r {
			r[i] = math.Hypot(views[0].At(i, 0), views[0].At(i, 1))
		}
		return r
	}
	cfg := model.DefaultTrainConfig()
	cfg.Landmarks, cfg.Fit.Lambda = 0.2, 0.001
	m, err := model.Train(context.Background(), spec, views, radius(views), cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	fresh, _ := rings(3, 6)
	pred := make([]float64, 3)
	var dec mat.Dense
	m.NewScorer().Predict(pred, &dec, nil, fresh)
	for i, r := range radius(fresh) {
		fmt.Printf("radius %.2f, predicted %.2f\n", r, pred[i])
	}
	// Output:
	// radius 0.67, predicted 0.77
	// radius 1.66, predicted 1.61
	// radius 3.07, predicted 3.07
}

// Predict turns the decisions of a batch into class labels (or regression
// values). A row whose score is not a finite number, here a value too
// large for the kernel, is predicted NaN and reported with its view and
// column.
func ExampleScorer_Predict() {
	views, labels := rings(300, 1)
	cfg := model.DefaultTrainConfig()
	cfg.Landmarks, cfg.Fit.Lambda = 0.2, 0.01
	m, err := model.Train(context.Background(), ringSpec(), views, labels, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	test, truth := rings(150, 2)
	test[1].Set(7, 2, 1.7e308)
	pred := make([]float64, len(truth))
	var dec mat.Dense
	unscorable := m.NewScorer().Predict(pred, &dec, nil, test)
	for _, u := range unscorable {
		fmt.Printf("row %d, column %s: %s; prediction %v\n", u.Row, u.Column, u.Reason, pred[u.Row])
	}
	fmt.Printf("accuracy of the others: %.2f\n", accuracy(pred, truth))
	// Output:
	// row 7, column s_2: view sensor: its rbf kernel against the landmarks overflows (values too large for it); prediction NaN
	// accuracy of the others: 0.97
}

// An Accumulator keeps only the sufficient statistics of the rows it is
// given, so a model can be fitted on more rows than memory holds: a sample
// fixes the landmarks and the kernels, every row then passes through the
// statistics once, batch by batch, and Refit fits the heads. Decay forgets
// older rows, as a service refitting on a stream does.
func ExampleAccumulator() {
	spec := ringSpec()
	sample, sampleLabels := rings(200, 3)
	targets := model.NewTargetScan(spec.Task)
	targets.Add(sampleLabels)
	cfg := model.DefaultTrainConfig()
	cfg.Landmarks, cfg.Fit.Lambda = 40, 0.01
	untrained, err := model.Untrained(spec, sample, cfg, targets.Encoding())
	if err != nil {
		fmt.Println(err)
		return
	}
	acc := untrained.NewAccumulator()
	for batch := range 5 {
		views, labels := rings(1000, 10+uint64(batch))
		if err := acc.Add(views, labels); err != nil {
			fmt.Println(err)
			return
		}
	}
	m, err := acc.Refit(context.Background(), cfg.Fit, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	test, truth := rings(300, 4)
	pred := make([]float64, len(truth))
	var dec mat.Dense
	m.NewScorer().Predict(pred, &dec, nil, test)
	fmt.Printf("fitted on %v rows, test accuracy %.2f\n", acc.Rows(), accuracy(pred, truth))
	acc.Decay(0.5)
	fmt.Println("after a decay of 0.5:", acc.Rows(), "rows")
	// Output:
	// fitted on 5000 rows, test accuracy 0.97
	// after a decay of 0.5: 2500 rows
}
