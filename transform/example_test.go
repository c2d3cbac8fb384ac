package transform_test

import (
	"fmt"

	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/schemas"
	"github.com/mvml/mvml/transform"
)

// Two views of six samples: a 3-d view with the default Gaussian kernel and
// a 2-d view with a linear kernel. Half the rows become landmarks, the same
// rows in both views; the linear view has rank 2 whatever p is.
func ExampleFit() {
	shape := mat.NewDense(6, 3, []float64{
		0, 0, 1,
		1, 0, 0,
		0, 1, 0,
		1, 1, 0,
		0, 1, 1,
		1, 0, 1,
	})
	colour := mat.NewDense(6, 2, []float64{
		0.2, 0.9,
		0.8, 0.1,
		0.5, 0.5,
		0.3, 0.4,
		0.9, 0.9,
		0.1, 0.7,
	})
	views := []*mat.Dense{shape, colour}
	kernels := []*schemas.KernelSpec{nil, {Type: schemas.KernelLinear}}
	f, err := transform.Fit(views, kernels, transform.Config{Landmarks: 0.5, Seed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("landmarks:", len(f.LandmarkRows))
	fmt.Println("ranks:", f.Ranks())
	for l, m := range f.Views {
		fmt.Printf("view %d kernel: %s\n", l, m.Kernel.Type)
	}

	features := make([]*mat.Dense, len(views))
	f.Transform(features, views)
	r, c := features[0].Dims()
	fmt.Printf("U_0 is %d×%d\n", r, c)
	// Output:
	// landmarks: 3
	// ranks: [3 2]
	// view 0 kernel: rbf
	// view 1 kernel: linear
	// U_0 is 6×3
}
