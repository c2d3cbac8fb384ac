package blasimpl

import (
	"context"
	"fmt"
	"math"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/blas/gonum"
	"gonum.org/v1/gonum/mat"

	mvmlgemm "github.com/mvml/mvml/internal/asm/gemm"
	"github.com/mvml/mvml/model"
)

// A model trained and scored with mvml's Dgemm (package gemm) is gonum's
// to the bit, in either build: the
// same version (a hash of its arrays) and the same decisions, in the
// learned mode (whose fit carries every rounding into its result) and in
// the identity one.
func TestModelMatchesGonumBitForBit(t *testing.T) {
	if mvmlgemm.New().KernelName() == "" {
		t.Skip("no micro-kernel on this processor: Dgemm is gonum's")
	}
	defer blas64.Use(blas64.Implementation())
	for _, s := range shapes {
		for _, mode := range []model.Mode{model.ModeLearned, model.ModeIdentity} {
			t.Run(fmt.Sprintf("%s/%s", s.name, mode), func(t *testing.T) {
				views, labels := s.data(s.fitRows, 1)
				rows, _ := s.data(s.scoreRows, 2)
				cfg := model.DefaultTrainConfig()
				cfg.Landmarks, cfg.Seed, cfg.Fit.Mode, cfg.Fit.Lambda = float64(s.landmarks), 1, mode, 0.01
				run := func(impl blas.Float64) (*model.Model, *mat.Dense) {
					blas64.Use(impl)
					m, err := model.Train(context.Background(), s.spec(t), views, labels, cfg)
					if err != nil {
						t.Fatal(err)
					}
					var dec mat.Dense
					m.NewScorer().Score(&dec, nil, rows)
					return m, &dec
				}
				wantModel, want := run(gonum.Implementation{})
				gotModel, got := run(mvmlgemm.New())
				if gotModel.Version != wantModel.Version {
					t.Errorf("model version %s, with gonum's Dgemm %s", gotModel.Version, wantModel.Version)
				}
				r, c := want.Dims()
				for i := range r {
					for j := range c {
						if g, w := got.At(i, j), want.At(i, j); math.Float64bits(g) != math.Float64bits(w) {
							t.Fatalf("decision (%d, %d) = %v, with gonum's Dgemm %v", i, j, g, w)
						}
					}
				}
			})
		}
	}
}
