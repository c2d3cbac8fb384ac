package eval_test

import (
	"encoding/json"
	"fmt"

	"github.com/mvml/mvml/eval"
	"github.com/mvml/mvml/schemas"
)

// Compute scores class predictions: the accuracy over all rows and the
// accuracy (recall) of each true class.
func ExampleCompute() {
	truth := []float64{0, 0, 0, 1, 1, 2}
	pred := []float64{0, 0, 1, 1, 1, 0}
	m := eval.Compute(schemas.Classification, truth, pred)
	out, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(out))
	// Output:
	// {"task":"classification","n":6,"accuracy":0.6666666666666666,"per_class":{"0":0.6666666666666666,"1":1,"2":0}}
}

// Compute scores regression predictions by their mean squared error
// against the truth's variance (nMSE), R² = 1 − nMSE and the RMSE.
func ExampleCompute_regression() {
	truth := []float64{1, 2, 3, 4}
	pred := []float64{1.5, 2, 2.5, 4}
	m := eval.Compute(schemas.Regression, truth, pred)
	fmt.Printf("nMSE %.3f, R² %.3f, RMSE %.3f\n", m.NMSE, m.R2, m.RMSE)
	// Output:
	// nMSE 0.100, R² 0.900, RMSE 0.354
}

// Folds gives the test rows of each fold as scikit-learn's
// KFold(n_splits=3, shuffle=True, random_state=0) does for ten rows, so
// that a figure from `mvml cv --seed 0` is measured on the folds a Python
// cross-validation with random_state=0 uses.
func ExampleFolds() {
	labels := make([]float64, 10) // unstratified: only their number counts
	folds, err := eval.Folds(labels, 3, 0, false)
	if err != nil {
		panic(err)
	}
	for i, f := range folds {
		fmt.Println("fold", i, "test rows:", f)
	}
	// Output:
	// fold 0 test rows: [2 4 8 9]
	// fold 1 test rows: [1 6 7]
	// fold 2 test rows: [0 3 5]
}
