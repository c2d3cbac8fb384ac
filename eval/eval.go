// Package eval owns how mvml models are judged: the metrics (accuracy and
// per-class accuracy; nMSE, R² and RMSE), seeded folds identical to
// scikit-learn's (stratified for classification), and
// nested cross-validation, in which the hyper-parameters of every outer
// fold are chosen by an inner cross-validation on that fold's training
// rows only, so that the reported figure is an honest estimate.
package eval

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/mvml/mvml/schemas"
)

// Metrics are the scores of predictions against the truth.
type Metrics struct {
	Task schemas.Task
	N    int
	// Classification.
	Accuracy float64
	PerClass map[string]float64 // accuracy (recall) per class label
	// Regression: nMSE = MSE / variance of the truth, R² = 1 − nMSE.
	NMSE, R2, RMSE float64
}

// MarshalJSON writes the task's metrics only:
// {"task":"classification","n":…,"accuracy":…,"per_class":{…}} or
// {"task":"regression","n":…,"nmse":…,"r2":…,"rmse":…}.
func (m Metrics) MarshalJSON() ([]byte, error) {
	if m.Task == schemas.Regression {
		return json.Marshal(struct {
			Task schemas.Task `json:"task"`
			N    int          `json:"n"`
			NMSE float64      `json:"nmse"`
			R2   float64      `json:"r2"`
			RMSE float64      `json:"rmse"`
		}{m.Task, m.N, m.NMSE, m.R2, m.RMSE})
	}
	return json.Marshal(struct {
		Task     schemas.Task       `json:"task"`
		N        int                `json:"n"`
		Accuracy float64            `json:"accuracy"`
		PerClass map[string]float64 `json:"per_class"`
	}{m.Task, m.N, m.Accuracy, m.PerClass})
}

// Compute scores predictions. For classification, pred holds predicted
// class labels.
func Compute(task schemas.Task, truth, pred []float64) Metrics {
	if len(truth) != len(pred) {
		panic(fmt.Sprintf("eval: %d truths, %d predictions", len(truth), len(pred)))
	}
	m := Metrics{Task: task, N: len(truth)}
	if len(truth) == 0 {
		return m
	}
	if task == schemas.Regression {
		var mean, sse, sst float64
		for _, v := range truth {
			mean += v
		}
		mean /= float64(len(truth))
		for i, v := range truth {
			sse += (v - pred[i]) * (v - pred[i])
			sst += (v - mean) * (v - mean)
		}
		m.RMSE = math.Sqrt(sse / float64(len(truth)))
		m.NMSE = sse / sst
		m.R2 = 1 - m.NMSE
		return m
	}
	correct := 0
	perTotal, perCorrect := map[float64]int{}, map[float64]int{}
	for i, v := range truth {
		perTotal[v]++
		if pred[i] == v {
			correct++
			perCorrect[v]++
		}
	}
	m.Accuracy = float64(correct) / float64(len(truth))
	m.PerClass = make(map[string]float64, len(perTotal))
	for c, n := range perTotal {
		m.PerClass[strconv.FormatFloat(c, 'g', -1, 64)] = float64(perCorrect[c]) / float64(n)
	}
	return m
}

// Score is the figure model selection maximises: accuracy, or −nMSE.
func (m Metrics) Score() float64 {
	if m.Task == schemas.Regression {
		return -m.NMSE
	}
	return m.Accuracy
}

// complement returns the rows of 0..n-1 not in test (sorted).
func complement(n int, test []int) []int {
	in := make([]bool, n)
	for _, i := range test {
		in[i] = true
	}
	out := make([]int, 0, n-len(test))
	for i := 0; i < n; i++ {
		if !in[i] {
			out = append(out, i)
		}
	}
	return out
}
