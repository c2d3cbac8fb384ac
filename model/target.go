package model

import (
	"math"
	"slices"

	"github.com/mvml/mvml/schemas"
)

// Encoding is how labels become fit targets: the sorted class labels of a
// classification model, or the mean and scale that standardise a
// regression target.
type Encoding struct {
	Classes     []float64
	Mean, Scale float64
	// Rows is the number of labelled rows the classes were found in: a
	// classification with fewer than MinRowsPerClass rows per class is
	// refused (0: not known; only MaxClasses is checked).
	Rows int
}

// Overflows says that the mean or the scale of a regression target is not
// a finite number: some label is too large for them to be computed.
func (e Encoding) Overflows() bool {
	return !finite(e.Mean) || !finite(e.Scale)
}

// TargetScan gathers, one batch of labels at a time, what the target
// encoding needs: the classes of a classification, or the mean and
// variance of a regression target by Welford's method. Training in memory
// and streamed training both encode their labels with it, so a stream is
// encoded as the same rows held in memory are.
type TargetScan struct {
	task    schemas.Task
	n       int64
	classes map[float64]bool
	mean    float64
	m2      float64 // the sum of squared deviations from the mean
	largest float64 // the regression label of largest magnitude
}

// NewTargetScan returns an empty scan of the labels of a task.
func NewTargetScan(task schemas.Task) *TargetScan {
	return &TargetScan{task: task, classes: map[float64]bool{}}
}

// Add adds labels. For a regression target it returns the index in labels
// of the label of largest magnitude so far when it is one of them, else
// −1, so that the caller can say where that label came from should the
// target overflow (Encoding.Overflows); for a classification, −1.
func (t *TargetScan) Add(labels []float64) (largest int) {
	largest = -1
	if t.task != schemas.Regression {
		for _, y := range labels {
			t.classes[y] = true
		}
		t.n += int64(len(labels))
		return largest
	}
	for i, y := range labels {
		if math.Abs(y) > math.Abs(t.largest) {
			t.largest, largest = y, i
		}
		t.n++
		delta := y - t.mean
		t.mean += delta / float64(t.n)
		t.m2 += delta * (y - t.mean)
	}
	return largest
}

// Rows is the number of labels added.
func (t *TargetScan) Rows() int64 { return t.n }

// Largest is the regression label of largest magnitude added (0 for none,
// or for a classification).
func (t *TargetScan) Largest() float64 { return t.largest }

// Encoding returns the encoding of the labels added: the sorted classes,
// or the mean and the scale (the standard deviation) of a regression
// target.
func (t *TargetScan) Encoding() Encoding {
	if t.task != schemas.Regression {
		classes := make([]float64, 0, len(t.classes))
		for c := range t.classes {
			classes = append(classes, c)
		}
		slices.Sort(classes)
		return Encoding{Classes: classes, Rows: int(t.n)}
	}
	return Encoding{Mean: t.mean, Scale: math.Sqrt(t.m2 / float64(t.n))}
}
