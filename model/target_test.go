package model

import (
	"math"
	"slices"
	"testing"

	"github.com/mvml/mvml/schemas"
)

// scanInBatches adds labels to a scan in batches of the given size and
// returns it with the index in labels of the largest one it reported.
func scanInBatches(task schemas.Task, labels []float64, batch int) (*TargetScan, int) {
	t := NewTargetScan(task)
	largest := -1
	for from := 0; from < len(labels); from += batch {
		if i := t.Add(labels[from:min(from+batch, len(labels))]); i >= 0 {
			largest = from + i
		}
	}
	return t, largest
}

// The target encoding of a scan is the one of its labels, whatever the
// batches they come in: the sorted classes and their rows, or the mean
// and the standard deviation, which are the two-pass formula's to
// rounding; a regression target that overflows is reported with its
// largest label.
func TestTargetScan(t *testing.T) {
	regression := make([]float64, 1000)
	for i := range regression {
		regression[i] = 1e6 + math.Sin(float64(i))*float64(i%17)
	}
	overflowing := slices.Clone(regression[:100])
	overflowing[37] = -1.5e308
	for _, tc := range []struct {
		name        string
		task        schemas.Task
		labels      []float64
		wantClasses []float64
		wantLargest int
		overflows   bool
	}{
		{"classes", schemas.Classification, []float64{3, 1, 2, 3, 3, 1, -1}, []float64{-1, 1, 2, 3}, -1, false},
		{"regression", schemas.Regression, regression, nil, 322, false},
		{"overflowing regression", schemas.Regression, overflowing, nil, 37, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, batch := range []int{1, 3, len(tc.labels)} {
				scan, largest := scanInBatches(tc.task, tc.labels, batch)
				enc := scan.Encoding()
				if scan.Rows() != int64(len(tc.labels)) || largest != tc.wantLargest || enc.Overflows() != tc.overflows {
					t.Fatalf("batches of %d: %d rows, largest label at %d, overflows %t; want %d, %d, %t",
						batch, scan.Rows(), largest, enc.Overflows(), len(tc.labels), tc.wantLargest, tc.overflows)
				}
				if tc.task == schemas.Classification {
					if !slices.Equal(enc.Classes, tc.wantClasses) || enc.Rows != len(tc.labels) {
						t.Errorf("batches of %d: classes %v in %d rows, want %v in %d", batch, enc.Classes, enc.Rows, tc.wantClasses, len(tc.labels))
					}
					continue
				}
				if largest >= 0 && scan.Largest() != tc.labels[largest] {
					t.Errorf("batches of %d: largest label %v, want %v", batch, scan.Largest(), tc.labels[largest])
				}
				if tc.overflows {
					continue
				}
				var mean, ss float64
				for _, y := range tc.labels {
					mean += y
				}
				mean /= float64(len(tc.labels))
				for _, y := range tc.labels {
					ss += (y - mean) * (y - mean)
				}
				scale := math.Sqrt(ss / float64(len(tc.labels)))
				if math.Abs(enc.Mean-mean) > 1e-12*math.Abs(mean) || math.Abs(enc.Scale-scale) > 1e-9*scale {
					t.Errorf("batches of %d: mean %v, scale %v; two passes give %v, %v", batch, enc.Mean, enc.Scale, mean, scale)
				}
			}
		})
	}
}
