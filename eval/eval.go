// Package eval owns how mvml models are judged: the metrics (accuracy and
// per-class accuracy; nMSE, R² and RMSE), seeded stratified folds, and
// nested cross-validation, in which the hyper-parameters of every outer
// fold are chosen by an inner cross-validation on that fold's training
// rows only, so that the reported figure is an honest estimate.
package eval

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
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

// Folds splits n rows into k folds of test rows, seeded. With stratify,
// every class (distinct label) is spread evenly over the folds.
func Folds(labels []float64, k int, seed uint64, stratify bool) ([][]int, error) {
	n := len(labels)
	if k < 2 || k > n {
		return nil, fmt.Errorf("folds: %d folds for %d rows", k, n)
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	groups := map[float64][]int{}
	var keys []float64
	for i, v := range labels {
		key := 0.0
		if stratify {
			key = v
		}
		if _, ok := groups[key]; !ok {
			keys = append(keys, key)
		}
		groups[key] = append(groups[key], i)
	}
	slices.Sort(keys)
	folds := make([][]int, k)
	next := 0
	for _, key := range keys {
		rows := groups[key]
		rng.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
		for _, r := range rows {
			folds[next] = append(folds[next], r)
			next = (next + 1) % k
		}
	}
	for _, f := range folds {
		slices.Sort(f)
	}
	return folds, nil
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
