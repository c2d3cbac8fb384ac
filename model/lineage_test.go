package model

import (
	"bytes"
	"context"
	"testing"

	"github.com/mvml/mvml/schemas"
)

// A refit keeps the lineage of the model its statistics were gathered on;
// other landmarks, other classes or another task start another one.
func TestLineage(t *testing.T) {
	ctx := context.Background()
	views, labels := toyViews(7, 120)
	spec := testSpec(schemas.Classification, 2, 3)
	base, err := Train(ctx, spec, views, labels, trainWith(func(c *TrainConfig) { c.Landmarks = 25 }))
	if err != nil {
		t.Fatal(err)
	}
	acc := base.NewAccumulator()
	if err := acc.Add(views, labels); err != nil {
		t.Fatal(err)
	}
	refit, err := acc.Refit(ctx, fitWith(func(c *Config) { c.Lambda = 0.01 }), nil)
	if err != nil {
		t.Fatal(err)
	}
	if refit.Version == base.Version || refit.Lineage() != base.Lineage() {
		t.Errorf("refit: version %s (base %s), lineage %s, want a new version on base's lineage %s",
			refit.Version, base.Version, refit.Lineage(), base.Lineage())
	}

	var file bytes.Buffer
	if err := base.Encode(&file); err != nil {
		t.Fatal(err)
	}
	if read, err := Decode(&file); err != nil || read.Lineage() != base.Lineage() {
		t.Errorf("read back from its file: %v, lineage %s, want %s", err, read.Lineage(), base.Lineage())
	}

	relabelled := make([]float64, len(labels))
	for i, y := range labels {
		relabelled[i] = 10 * y
	}
	regression := testSpec(schemas.Regression, 2, 3)
	for _, tt := range []struct {
		name   string
		spec   *schemas.ViewSpec
		labels []float64
		cfg    TrainConfig
	}{
		{"other landmarks", spec, labels, trainWith(func(c *TrainConfig) { c.Landmarks, c.Seed = 25, 1 })},
		{"other classes", spec, relabelled, trainWith(func(c *TrainConfig) { c.Landmarks = 25 })},
		{"regression", regression, labels, trainWith(func(c *TrainConfig) { c.Landmarks = 25 })},
		{"standardized", spec, labels, trainWith(func(c *TrainConfig) { c.Landmarks, c.Standardize = 25, true })},
	} {
		m, err := Train(ctx, tt.spec, views, tt.labels, tt.cfg)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if m.Lineage() == base.Lineage() {
			t.Errorf("%s: lineage %s, the same as the base's", tt.name, m.Lineage())
		}
	}
	again, err := Train(ctx, spec, views, labels, trainWith(func(c *TrainConfig) { c.Landmarks, c.Fit.Eta = 25, 10 }))
	if err != nil {
		t.Fatal(err)
	}
	if again.Lineage() != base.Lineage() {
		t.Errorf("the same landmarks and targets fitted with another η: lineage %s, want the base's %s", again.Lineage(), base.Lineage())
	}
}
