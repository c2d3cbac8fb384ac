package model

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/schemas"
	"github.com/mvml/mvml/transform"
)

func testSpec(task schemas.Task, dims ...int) *schemas.ViewSpec {
	spec := &schemas.ViewSpec{Task: task, ID: "id", Label: "label"}
	for l, d := range dims {
		spec.Views = append(spec.Views, schemas.View{Name: fmt.Sprintf("v%d", l), Prefix: fmt.Sprintf("v%d_", l), Dim: d})
	}
	if err := spec.Validate(); err != nil {
		panic(err)
	}
	return spec
}

// toyViews draws n rows of two views where the class depends on both: view
// 0 holds a point on one of two rings, view 1 a noisy rotation of it, so
// that the views agree and together separate better than either alone.
func toyViews(seed uint64, n int) ([]*mat.Dense, []float64) {
	rng := rand.New(rand.NewPCG(seed, 3))
	v0, v1 := mat.NewDense(n, 2, nil), mat.NewDense(n, 3, nil)
	labels := make([]float64, n)
	for i := 0; i < n; i++ {
		c := i % 3
		r := 1 + float64(c)
		th := rng.Float64() * 2 * math.Pi
		x, y := r*math.Cos(th)+0.2*rng.NormFloat64(), r*math.Sin(th)+0.2*rng.NormFloat64()
		v0.Set(i, 0, x)
		v0.Set(i, 1, y)
		v1.Set(i, 0, 0.8*x-0.6*y+0.3*rng.NormFloat64())
		v1.Set(i, 1, 0.6*x+0.8*y+0.3*rng.NormFloat64())
		v1.Set(i, 2, rng.NormFloat64())
		labels[i] = float64(c + 1)
	}
	return []*mat.Dense{v0, v1}, labels
}

// Test 1: with every row a landmark (no approximation), the Nyström fit at
// the paper's initial metric Ã_ll = U_lᵀU_l equals the full-kernel
// formulation of Algorithm 1 version a with A = I on the n·v×n·v block
// kernel H = blockdiag(K_l). Mode sparse starts there; mode learned starts
// from it shifted towards the identity (learnedStart).
func TestNystromWithAllLandmarksEqualsFullKernel(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	const n = 30
	views := []*mat.Dense{mat.NewDense(n, 4, nil), mat.NewDense(n, 3, nil)}
	labels := make([]float64, n)
	for i := 0; i < n; i++ {
		for l, v := range views {
			_, d := v.Dims()
			for j := 0; j < d; j++ {
				v.Set(i, j, rng.NormFloat64())
			}
			labels[i] += v.At(i, 0) * float64(l+1)
		}
		labels[i] += 0.1 * rng.NormFloat64()
	}
	gammas := []float64{0.3, 0.5}
	kernels := []*schemas.KernelSpec{{Type: "rbf", Gamma: gammas[0]}, {Type: "rbf", Gamma: gammas[1]}}
	const lambda = 0.05
	cfg := trainWith(func(c *TrainConfig) {
		c.Landmarks, c.Kernels = 1, kernels
		c.Fit.Lambda, c.Fit.MaxIter, c.Fit.NoIntercept, c.Fit.Mode = lambda, 0, true, ModeSparse
	})
	m, err := trainRegression(views, labels, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Full formulation on the labels themselves: without intercept the fit
	// is the paper's objective on the target as given.
	y := mat.NewVecDense(n, labels)
	w := []float64{0.5, 0.5}
	p := mat.NewDense(n, 2*n, nil) // (wᵀ⊗I)H = [w_1K_1, w_2K_2]
	for l, v := range views {
		k := transform.Kernel{Type: "rbf", Gamma: gammas[l]}
		var kl mat.Dense
		k.Cross(&kl, v, v)
		kl.Scale(w[l], &kl)
		p.Slice(0, n, l*n, (l+1)*n).(*mat.Dense).Copy(&kl)
	}
	var lhs mat.SymDense
	lhs.SymOuterK(1, p.T())
	for i := 0; i < 2*n; i++ {
		lhs.SetSym(i, i, lhs.At(i, i)+lambda)
	}
	var ch mat.Cholesky
	if !ch.Factorize(&lhs) {
		t.Fatal("full system not SPD")
	}
	var pty, g, full mat.VecDense
	pty.MulVec(p.T(), y)
	if err := ch.SolveVecTo(&g, &pty); err != nil {
		t.Fatal(err)
	}
	full.MulVec(p, &g)
	var dec mat.Dense
	m.NewScorer().Score(&dec, nil, views)
	var maxRel float64
	for i := 0; i < n; i++ {
		want := full.AtVec(i)
		maxRel = math.Max(maxRel, math.Abs(dec.At(i, 0)-want)/math.Max(1, math.Abs(want)))
	}
	if maxRel > 1e-8 {
		t.Errorf("Nyström with p=n differs from the full-kernel solution by %g (relative)", maxRel)
	}
}

// trainRegression trains a regression model on the views.
func trainRegression(views []*mat.Dense, labels []float64, cfg TrainConfig) (*Model, error) {
	dims := make([]int, len(views))
	for l, v := range views {
		_, dims[l] = v.Dims()
	}
	return Train(context.Background(), testSpec(schemas.Regression, dims...), views, labels, cfg)
}

func accuracy(t *testing.T, m *Model, views []*mat.Dense, labels []float64) float64 {
	t.Helper()
	var dec mat.Dense
	m.NewScorer().Score(&dec, nil, views)
	correct := 0
	row := make([]float64, m.Outputs())
	for i, want := range labels {
		mat.Row(row, i, &dec)
		if m.Predict(row) == want {
			correct++
		}
	}
	return float64(correct) / float64(len(labels))
}

func TestTrainClassifiesToy(t *testing.T) {
	train, trainLabels := toyViews(1, 300)
	test, testLabels := toyViews(2, 300)
	spec := testSpec(schemas.Classification, 2, 3)
	for _, tc := range []struct {
		name string
		cfg  TrainConfig
	}{
		{"ovr learned", trainWith(func(c *TrainConfig) { c.Landmarks, c.Fit.Lambda, c.Fit.Eta = 0.2, 0.01, 1 })},
		{"shared learned", trainWith(func(c *TrainConfig) {
			c.Landmarks, c.Multiclass, c.Fit.Lambda, c.Fit.Eta = 0.2, MulticlassShared, 0.01, 1
		})},
		{"ovr sparse", trainWith(func(c *TrainConfig) { c.Landmarks, c.Fit.Mode, c.Fit.Lambda, c.Fit.Eta = 0.2, ModeSparse, 0.01, 1 })},
		{"identity learn w", trainWith(func(c *TrainConfig) {
			c.Landmarks, c.Fit.Mode, c.Fit.Lambda, c.Fit.LearnW = 30, ModeIdentity, 0.01, true
		})},
		{"cov", trainWith(func(c *TrainConfig) { c.Landmarks, c.Fit.Mode, c.Fit.Lambda = 0.2, ModeCov, 1e-4 })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Train(context.Background(), spec, train, trainLabels, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if acc := accuracy(t, m, test, testLabels); acc < 0.9 {
				t.Errorf("test accuracy %.3f, want ≥ 0.9", acc)
			}
			if m.Outputs() != 3 {
				t.Errorf("outputs %d, want 3", m.Outputs())
			}
		})
	}
}

func TestBinaryAndContributions(t *testing.T) {
	views, labels := toyViews(4, 200)
	for i := range labels {
		if labels[i] != 1 {
			labels[i] = -7 // any two values work as classes
		}
	}
	m, err := Train(context.Background(), testSpec(schemas.Classification, 2, 3), views, labels, trainWith(func(c *TrainConfig) { c.Landmarks = 40 }))
	if err != nil {
		t.Fatal(err)
	}
	if m.Outputs() != 1 || len(m.Classes) != 2 {
		t.Fatalf("binary model has %d outputs and classes %v", m.Outputs(), m.Classes)
	}
	var dec, contrib mat.Dense
	m.NewScorer().Score(&dec, &contrib, views)
	for i := 0; i < 200; i++ {
		s := contrib.At(i, 0) + contrib.At(i, 1) + m.Heads[0].Intercept[0]
		if math.Abs(s-dec.At(i, 0)) > 1e-9*math.Max(1, math.Abs(s)) {
			t.Fatalf("row %d: contributions sum to %g, decision %g", i, s, dec.At(i, 0))
		}
	}
	if acc := accuracy(t, m, views, labels); acc < 0.9 {
		t.Errorf("training accuracy %.3f", acc)
	}
}

func TestTrainRejectsDegenerateLabels(t *testing.T) {
	views, labels := toyViews(4, 50)
	one := make([]float64, len(labels))
	if _, err := Train(context.Background(), testSpec(schemas.Classification, 2, 3), views, one, DefaultTrainConfig()); err == nil {
		t.Error("single class: no error")
	}
	if _, err := Train(context.Background(), testSpec(schemas.Regression, 2, 3), views, one, DefaultTrainConfig()); err == nil {
		t.Error("constant regression target: no error")
	}
}

func trainedToy(t testing.TB) (*Model, []*mat.Dense) {
	views, labels := toyViews(7, 120)
	m, err := Train(context.Background(), testSpec(schemas.Classification, 2, 3), views, labels, trainWith(func(c *TrainConfig) { c.Landmarks, c.Standardize, c.Fit.LearnW = 25, true, true }))
	if err != nil {
		t.Fatal(err)
	}
	return m, views
}

// toyLabels are labels for trainedToy's 120 rows: the classes 1, 2, 3 in
// turn.
func toyLabels() []float64 {
	labels := make([]float64, 120)
	for i := range labels {
		labels[i] = float64(i%3 + 1)
	}
	return labels
}

func TestModelFileRoundTrip(t *testing.T) {
	m, views := trainedToy(t)
	var buf bytes.Buffer
	if err := m.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := Decode(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if back.Version != m.Version || back.Spec.Fingerprint() != m.Spec.Fingerprint() {
		t.Errorf("version/fingerprint changed: %s/%s", back.Version, m.Version)
	}
	var d1, d2 mat.Dense
	m.NewScorer().Score(&d1, nil, views)
	back.NewScorer().Score(&d2, nil, views)
	if !mat.Equal(&d1, &d2) {
		t.Error("decoded model scores differently")
	}
}

func TestModelFileRefusesDamage(t *testing.T) {
	m, _ := trainedToy(t)
	var buf bytes.Buffer
	if err := m.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 0x40
	wrongVersion := bytes.Clone(good)
	wrongVersion[8] = 99
	for _, tc := range []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, ErrCorruptModel},
		{"not a model", []byte("PAR1 this is something else entirely, long enough to pass"), ErrCorruptModel},
		{"truncated", good[:len(good)-100], ErrCorruptModel},
		{"bit flip", flipped, ErrCorruptModel},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(bytes.NewReader(tc.data))
			if !errors.Is(err, tc.want) {
				t.Errorf("error %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := Decode(bytes.NewReader(wrongVersion)); err == nil || errors.Is(err, ErrCorruptModel) {
		t.Errorf("incompatible version: error %v, want a version error", err)
	}
}

func FuzzDecode(f *testing.F) {
	m, _ := trainedToy(f)
	var buf bytes.Buffer
	if err := m.Encode(&buf); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add(buf.Bytes()[:buf.Len()-sha256.Size])
	f.Add([]byte(fileMagic))
	format1, err := os.ReadFile("testdata/format1.mvml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(format1)
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode(bytes.NewReader(data))
		if err == nil && m.Outputs() < 1 {
			t.Fatal("decoded a model without outputs")
		}
		// The same bytes with a valid checksum reach the header and array
		// checks behind it.
		if len(data) >= 16 {
			sum := sha256.Sum256(data)
			m, err = Decode(bytes.NewReader(append(bytes.Clone(data), sum[:]...)))
			if err == nil && m.Outputs() < 1 {
				t.Fatal("decoded a model without outputs")
			}
		}
	})
}

func ExampleTrain() {
	views, labels := toyViews(1, 240)
	spec := testSpec(schemas.Classification, 2, 3)
	m, err := Train(context.Background(), spec, views, labels, trainWith(func(c *TrainConfig) { c.Landmarks, c.Fit.Lambda = 0.25, 0.01 }))
	if err != nil {
		fmt.Println(err)
		return
	}
	var dec mat.Dense
	m.NewScorer().Score(&dec, nil, views[:])
	fmt.Println("classes:", m.Classes, "outputs:", m.Outputs())
	fmt.Println("prediction of row 0:", m.Predict(dec.RawRowView(0)), "label:", labels[0])
	// Output:
	// classes: [1 2 3] outputs: 3
	// prediction of row 0: 1 label: 1
}

func TestDegenerateData(t *testing.T) {
	spec := testSpec(schemas.Classification, 2, 3)
	base, labels := toyViews(11, 60)
	for _, tc := range []struct {
		name    string
		mutate  func(views []*mat.Dense, labels []float64)
		cfg     TrainConfig
		wantErr string
	}{
		{"duplicate rows", func(v []*mat.Dense, _ []float64) {
			for i := 30; i < 60; i++ {
				v[0].SetRow(i, v[0].RawRowView(i-30))
				v[1].SetRow(i, v[1].RawRowView(i-30))
			}
		}, trainWith(func(c *TrainConfig) { c.Landmarks = 1 }), ""},
		{"more landmarks than distinct rows", func(v []*mat.Dense, _ []float64) {
			for i := 10; i < 60; i++ {
				v[0].SetRow(i, v[0].RawRowView(i%10))
				v[1].SetRow(i, v[1].RawRowView(i%10))
			}
		}, trainWith(func(c *TrainConfig) { c.Landmarks = 40 }), ""},
		{"constant view", func(v []*mat.Dense, _ []float64) {
			for i := 0; i < 60; i++ {
				v[1].SetRow(i, []float64{1, 2, 3})
			}
		}, trainWith(func(c *TrainConfig) { c.Landmarks = 20 }), `view "v1"`},
		{"all-zero view, linear kernel", func(v []*mat.Dense, _ []float64) {
			v[1].Zero()
		}, trainWith(func(c *TrainConfig) { c.Landmarks, c.Kernels = 20, []*schemas.KernelSpec{nil, {Type: "linear"}} }), `view "v1"`},
		{"single class", func(_ []*mat.Dense, l []float64) {
			for i := range l {
				l[i] = 2
			}
		}, trainWith(func(c *TrainConfig) { c.Landmarks = 20 }), "at least two classes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			views := []*mat.Dense{mat.DenseCopyOf(base[0]), mat.DenseCopyOf(base[1])}
			lab := append([]float64(nil), labels...)
			tc.mutate(views, lab)
			m, err := Train(context.Background(), spec, views, lab, tc.cfg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var dec mat.Dense
			m.NewScorer().Score(&dec, nil, views)
			for _, v := range dec.RawMatrix().Data {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatal("non-finite decision")
				}
			}
		})
	}
}

func TestWarmStart(t *testing.T) {
	views, labels := toyViews(5, 200)
	spec := testSpec(schemas.Classification, 2, 3)
	cfg := trainWith(func(c *TrainConfig) {
		c.Landmarks, c.Multiclass = 40, MulticlassShared
		c.Fit.Lambda, c.Fit.MaxIter, c.Fit.Tol = 0.01, 30, 1e-6
	})
	p, err := Prepare(spec, views, labels, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cold, err := p.Fit(context.Background(), cfg.Fit, nil)
	if err != nil {
		t.Fatal(err)
	}
	warm, err := p.Fit(context.Background(), cfg.Fit, cold)
	if err != nil {
		t.Fatal(err)
	}
	c, w := cold.Heads[0].Trace, warm.Heads[0].Trace
	if w.Objective[0] > c.Objective[len(c.Objective)-1]*(1+1e-9) {
		t.Errorf("warm start begins at %g, above where the cold fit ended (%g)", w.Objective[0], c.Objective[len(c.Objective)-1])
	}
	if w.Iterations > c.Iterations {
		t.Errorf("warm start took %d iterations, cold %d", w.Iterations, c.Iterations)
	}
}

// Heads are fitted concurrently; the model must not depend on it.
func TestTrainReproducible(t *testing.T) {
	views, labels := toyViews(9, 150)
	spec := testSpec(schemas.Classification, 2, 3)
	cfg := trainWith(func(c *TrainConfig) { c.Landmarks, c.Seed, c.Fit.LearnW = 30, 4, true })
	a, err := Train(context.Background(), spec, views, labels, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		b, err := Train(context.Background(), spec, views, labels, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if a.Version != b.Version {
			t.Fatalf("run %d: model %s, first run %s", i, b.Version, a.Version)
		}
	}
	cfg.Seed = 5
	if c, err := Train(context.Background(), spec, views, labels, cfg); err != nil || c.Version == a.Version {
		t.Errorf("another seed gave the same model (%v)", err)
	}
}
