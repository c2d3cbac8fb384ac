package registry_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"

	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/registry"
	"github.com/mvml/mvml/schemas"
)

// A model store in a directory: a training publishes each model it makes
// current, and an operator rolls back to the one before.
func ExampleDir() {
	dir, err := os.MkdirTemp("", "mvml-models")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	store, err := registry.OpenDir(dir, registry.DirOptions{})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	first, err := store.Publish(ctx, exampleModel(1), registry.Meta{Role: registry.RoleTrain, Note: "nightly"}, true)
	if err != nil {
		panic(err)
	}
	second, err := store.Publish(ctx, exampleModel(2), registry.Meta{Role: registry.RoleTrain, Parent: first.Version, Note: "nightly"}, true)
	if err != nil {
		panic(err)
	}
	_, current, err := store.Current(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("current is the second model:", current.Version == second.Version)

	back, err := store.Rollback(ctx, registry.Meta{Role: registry.RoleOperator, Note: "worse scores"})
	if err != nil {
		panic(err)
	}
	fmt.Println("rolled back to the first model:", back.Version == first.Version, back.Reason)
	list, err := store.List(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("versions kept:", len(list.Versions))
	// Output:
	// current is the second model: true
	// rolled back to the first model: true rollback
	// versions kept: 2
}

// exampleModel trains a small classifier of two views on seeded rows.
func exampleModel(seed uint64) *model.Model {
	spec := &schemas.ViewSpec{Task: schemas.Classification, ID: "id", Label: "label", Views: []schemas.View{
		{Name: "a", Prefix: "a_", Dim: 2}, {Name: "b", Prefix: "b_", Dim: 3}}}
	const n = 80
	rng := rand.New(rand.NewPCG(seed, 1))
	views := []*mat.Dense{mat.NewDense(n, 2, nil), mat.NewDense(n, 3, nil)}
	labels := make([]float64, n)
	for i := range n {
		for _, v := range views {
			for j := range v.RawMatrix().Cols {
				v.Set(i, j, rng.NormFloat64())
			}
		}
		if views[0].At(i, 0)+views[1].At(i, 0) > 0 {
			labels[i] = 1
		}
	}
	cfg := model.DefaultTrainConfig()
	cfg.Landmarks, cfg.Seed, cfg.Fit.Mode = 12, seed, model.ModeIdentity
	m, err := model.Train(context.Background(), spec, views, labels, cfg)
	if err != nil {
		panic(err)
	}
	return m
}
