package registry

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/schemas"
)

// testSpec is a classification of views of the given dimensions.
func testSpec(t testing.TB, dims ...int) *schemas.ViewSpec {
	t.Helper()
	spec := &schemas.ViewSpec{Task: schemas.Classification, ID: "id", Label: "label"}
	for l, d := range dims {
		spec.Views = append(spec.Views, schemas.View{Name: fmt.Sprintf("v%d", l), Prefix: fmt.Sprintf("v%d_", l), Dim: d})
	}
	if err := spec.Validate(); err != nil {
		t.Fatal(err)
	}
	return spec
}

// trainModel fits a model of spec on n seeded rows with p landmarks.
func trainModel(t testing.TB, spec *schemas.ViewSpec, n, p int, seed uint64) *model.Model {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 11))
	views := make([]*mat.Dense, len(spec.Views))
	labels := make([]float64, n)
	for l, v := range spec.Views {
		views[l] = mat.NewDense(n, v.Dim, nil)
		for i := range n {
			for j := range v.Dim {
				views[l].Set(i, j, rng.NormFloat64())
			}
		}
	}
	for i := range labels {
		if views[0].At(i, 0)+views[len(views)-1].At(i, 0) > 0 {
			labels[i] = 1
		}
	}
	cfg := model.DefaultTrainConfig()
	cfg.Landmarks, cfg.Seed, cfg.Fit.Mode = float64(p), seed, model.ModeIdentity
	m, err := model.Train(context.Background(), spec, views, labels, cfg)
	if err != nil {
		t.Fatal(err)
	}
	m.Meta.Created = "2026-01-02T03:04:05Z"
	return m
}

// smallModel is a model of a few kilobytes; seeds give other versions.
func smallModel(t testing.TB, seed uint64) *model.Model {
	return trainModel(t, testSpec(t, 2, 3), 80, 12, seed)
}

var big struct {
	once  sync.Once
	model *model.Model
}

// bigModel is a model whose file is more than 8 MB (its metric Ã alone is
// D×D float64s with D ≈ 860), trained once for the package's tests.
func bigModel(t testing.TB) *model.Model {
	big.once.Do(func() { big.model = trainModel(t, testSpec(t, 4, 4, 4), 420, 385, 1) })
	if big.model == nil {
		t.Fatal("the big model failed to train")
	}
	return big.model
}

func slogTo(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }
