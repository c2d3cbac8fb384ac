package model

import (
	"context"
	"errors"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/schemas"
)

// Training on values too large for float64 arithmetic names the row, the
// column and the view (or the label) that overflow, not what they broke
// further on (a NaN σ, a "diagonal mean NaN").
func TestTrainNamesOverflowingRow(t *testing.T) {
	poly := []*schemas.KernelSpec{{Type: schemas.KernelPoly}, {Type: schemas.KernelPoly}}
	for _, tc := range []struct {
		name    string
		task    schemas.Task
		kernels []*schemas.KernelSpec
		// plant sets a value of the data: row, view (−1: the label),
		// feature.
		row, view, feature int
		value              float64
		landmarks          float64
		wantColumn, want   string
	}{
		{"rbf, 1.7e308", schemas.Classification, nil, 17, 1, 2, 1.7e308, 20, "v1_2", "view v1: value 1.7e+308 is too large for a kernel"},
		{"rbf, -1.7e308", schemas.Classification, nil, 3, 0, 0, -1.7e308, 20, "v0_0", "view v0: value -1.7e+308 is too large for a kernel"},
		{"poly, 1e200", schemas.Classification, poly, 40, 0, 1, 1e200, 20, "v0_1", "view v0: value 1e+200 is too large for a kernel"},
		{"poly landmark, 1e100", schemas.Classification, poly, 5, 1, 0, 1e100, 1, "", `view "v1": the poly`},
		{"poly features, 1e100", schemas.Classification, poly, 5, 1, 0, 1e100, 0.02, "v1_0", "view v1: its features overflow (value 1e+100 is too large for its poly kernel)"},
		{"regression label", schemas.Regression, nil, 8, -1, 0, 1e308, 20, "label", "label 1e+308: regression target has mean"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			views, labels := toyViews(41, 90)
			if tc.view < 0 {
				labels[tc.row] = tc.value
			} else {
				views[tc.view].Set(tc.row, tc.feature, tc.value)
			}
			cfg := trainWith(func(c *TrainConfig) { c.Landmarks, c.Kernels = tc.landmarks, tc.kernels })
			_, err := Train(context.Background(), testSpec(tc.task, 2, 3), views, labels, cfg)
			var re *schemas.RowError
			if !errors.As(err, &re) {
				t.Fatalf("error %v, want a row error", err)
			}
			if re.Row != int64(tc.row) || re.Column != tc.wantColumn || !strings.Contains(re.Reason, tc.want) {
				t.Errorf("row %d column %q reason %q; want row %d column %q and %q", re.Row, re.Column, re.Reason, tc.row, tc.wantColumn, tc.want)
			}
		})
	}
}

// A row whose decision or contributions are not finite is reported with
// the view that overflowed; the other rows of the batch are not.
func TestScorerUnscorable(t *testing.T) {
	m, views := trainedToy(t)
	for _, tc := range []struct {
		name    string
		view, j int
		value   float64
	}{
		{"1.7e308", 1, 2, 1.7e308},
		{"-1.7e308", 0, 1, -1.7e308},
		{"1e200", 1, 0, 1e200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows := []*mat.Dense{mat.DenseCopyOf(views[0].Slice(0, 6, 0, 2)), mat.DenseCopyOf(views[1].Slice(0, 6, 0, 3))}
			rows[tc.view].Set(4, tc.j, tc.value)
			s := m.NewScorer()
			var dec, contrib mat.Dense
			s.Score(&dec, &contrib, rows)
			got := s.Unscorable(&dec, &contrib, rows)
			if len(got) != 1 || got[0].Row != 4 || got[0].View != tc.view || !strings.Contains(got[0].Reason, "view v") {
				t.Fatalf("unscorable %+v, want row 4 in view %d", got, tc.view)
			}
			for i := range 6 {
				if i != 4 && (!finiteRow(&dec, i) || !finiteRow(&contrib, i)) {
					t.Errorf("row %d: not finite", i)
				}
			}
		})
	}
}

// Labels that look continuous are refused as classes, with the advice to
// declare a regression.
func TestTooManyClasses(t *testing.T) {
	for _, tc := range []struct {
		classes, rows int
		ok            bool
	}{
		{2, 4, true},
		{8, 896, true},
		{50, 100, true},
		{51, 100, false},
		{1639, 2000, false},
		{MaxClasses, 100 * MaxClasses, true},
		{MaxClasses + 1, 100 * MaxClasses, false},
		{MaxClasses + 1, 0, false},
		{300, 0, true},
	} {
		err := checkClassCount(tc.classes, tc.rows)
		if (err == nil) != tc.ok {
			t.Errorf("%d classes in %d rows: %v, want ok %t", tc.classes, tc.rows, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), `"task": "regression"`) {
			t.Errorf("%d classes in %d rows: %v does not suggest a regression", tc.classes, tc.rows, err)
		}
	}
	views, _ := toyViews(5, 120)
	continuous := make([]float64, 120)
	for i := range continuous {
		continuous[i] = views[0].At(i, 0)
	}
	_, err := Train(context.Background(), testSpec(schemas.Classification, 2, 3), views, continuous, DefaultTrainConfig())
	if err == nil || !strings.Contains(err.Error(), "120 classes in 120 rows") {
		t.Errorf("continuous labels: %v, want a refusal", err)
	}
	if _, err := Untrained(testSpec(schemas.Classification, 2, 3), views, DefaultTrainConfig(), Encoding{Classes: distinct(continuous), Rows: 120}); err == nil {
		t.Error("continuous labels in a streamed training: no error")
	}
}

// A fit of many heads that all fail reports the failure once, with the
// count, not once per head.
func TestHeadErrorsAggregated(t *testing.T) {
	const classes = 12
	views, _ := toyViews(6, 240)
	labels := make([]float64, 240)
	for i := range labels {
		labels[i] = float64(i % classes)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Train(ctx, testSpec(schemas.Classification, 2, 3), views, labels, trainWith(func(c *TrainConfig) { c.Landmarks = 20 }))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want the cancellation", err)
	}
	if msg := err.Error(); strings.Count(msg, "context canceled") != 1 || !strings.Contains(msg, "12 of 12 heads failed") {
		t.Errorf("error %q, want the cancellation once, with the count of heads", msg)
	}

	distinctErrs := []error{nil, errors.New("a"), errors.New("b"), errors.New("a"), errors.New("c"), errors.New("d"), nil}
	want := "2 of 7 heads failed (the first is head 2): a\nfit head 3 of 7: b\nfit head 5 of 7: c\nand 1 other error"
	if got := headErrors(distinctErrs); got == nil || got.Error() != want {
		t.Errorf("headErrors = %q, want %q", got, want)
	}
	if err := headErrors([]error{nil, nil}); err != nil {
		t.Errorf("no failed head: %v", err)
	}
}
