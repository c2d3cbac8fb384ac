package serve

import (
	"fmt"
	"math"
	"testing"
)

func TestQuality(t *testing.T) {
	type obs struct {
		version string
		pred, y float64
	}
	tests := []struct {
		name           string
		classification bool
		window         int
		obs            []obs
		// want: version → accuracy or nMSE, and its labels and window.
		want   map[string]float64
		labels map[string]int64
		filled map[string]int
	}{
		{"accuracy by version", true, 10, []obs{
			{"a", 1, 1}, {"a", 0, 1}, {"a", 1, 1}, {"a", 0, 0}, {"b", 2, 1},
		}, map[string]float64{"a": 0.75, "b": 0}, map[string]int64{"a": 4, "b": 1}, map[string]int{"a": 4, "b": 1}},
		{"the window keeps the last labels", true, 2, []obs{
			{"a", 0, 1}, {"a", 0, 1}, {"a", 1, 1}, {"a", 1, 1},
		}, map[string]float64{"a": 1}, map[string]int64{"a": 4}, map[string]int{"a": 2}},
		{"nMSE", false, 10, []obs{
			{"a", 1, 0}, {"a", 1, 2}, // errors 1 and 1, deviations 1 and 1
		}, map[string]float64{"a": 1}, map[string]int64{"a": 2}, map[string]int{"a": 2}},
		{"nMSE of labels that do not vary is NaN", false, 10, []obs{
			{"a", 1, 2}, {"a", 3, 2},
		}, map[string]float64{"a": math.NaN()}, map[string]int64{"a": 2}, map[string]int{"a": 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := newQuality(tt.window, tt.classification)
			for _, o := range tt.obs {
				q.add(o.version, o.pred, o.y)
			}
			snap := q.snapshot()
			if len(snap) != len(tt.want) {
				t.Fatalf("%d versions, want %d", len(snap), len(tt.want))
			}
			for _, vq := range snap {
				got := vq.NMSE
				if tt.classification {
					got = vq.Accuracy
				}
				if got == nil || (vq.Accuracy != nil) == (vq.NMSE != nil) {
					t.Fatalf("version %s: accuracy %v, nMSE %v", vq.Version, vq.Accuracy, vq.NMSE)
				}
				want := tt.want[vq.Version]
				if !(math.Abs(*got-want) < 1e-12 || math.IsNaN(want) && math.IsNaN(*got)) || vq.Labels != tt.labels[vq.Version] || vq.Window != tt.filled[vq.Version] {
					t.Errorf("version %s: %v over %d of %d labels, want %v over %d of %d", vq.Version, *got, vq.Window, vq.Labels,
						want, tt.filled[vq.Version], tt.labels[vq.Version])
				}
			}
		})
	}
}

// Only the versions that last had a label are kept, the latest first.
func TestQualityKeepsRecentVersions(t *testing.T) {
	q := newQuality(5, true)
	for i := range qualityVersions + 3 {
		q.add(fmt.Sprint("v", i), 1, 1)
	}
	q.add("v4", 1, 1)
	snap := q.snapshot()
	if len(snap) != qualityVersions || snap[0].Version != "v4" || snap[1].Version != fmt.Sprint("v", qualityVersions+2) || snap[len(snap)-1].Version != "v3" {
		var order []string
		for _, vq := range snap {
			order = append(order, vq.Version)
		}
		t.Errorf("versions kept %v", order)
	}
}
