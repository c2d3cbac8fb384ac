package pipeline

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline/internal/pipelinetest"
	"github.com/mvml/mvml/registry"
	"github.com/mvml/mvml/schemas"
)

// A training like a base model keeps its lineage, whether it holds the
// rows (model.TrainLike) or streams them once through the statistics, and
// both give the decisions of model.TrainLike on the same rows; a label the
// base cannot learn names its file, row and column.
func TestTrainLike(t *testing.T) {
	spec := testSpec(t)
	base := trainTestModel(t, spec, makeData(spec, 150, 1))
	d := makeData(spec, 120, 2)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.csv")
	pipelinetest.WriteCSV(t, in, spec, d, nil)
	want, err := model.TrainLike(context.Background(), base, d.Matrices(), d.Labels, base.Config.Fit, false)
	if err != nil {
		t.Fatal(err)
	}
	var wantDec mat.Dense
	want.NewScorer().Score(&wantDec, nil, d.Matrices())
	bad := filepath.Join(dir, "bad.csv")
	pipelinetest.WriteCSV(t, bad, spec, d, map[int]map[string]string{37: {"label": "7"}})
	for _, stream := range []bool{false, true} {
		job := TrainJob{Spec: spec, Inputs: []string{in}, Like: base, Config: base.Config, Stream: stream, Options: Options{BatchSize: 50}}
		m, err := Train(context.Background(), job)
		if err != nil {
			t.Fatal(err)
		}
		var dec mat.Dense
		m.NewScorer().Score(&dec, nil, d.Matrices())
		if m.Lineage() != base.Lineage() || m.Meta.Rows != 120 || !mat.EqualApprox(&dec, &wantDec, 1e-9) {
			t.Errorf("stream %t: lineage %s (base %s), %d rows, decisions equal to TrainLike's: %t",
				stream, m.Lineage(), base.Lineage(), m.Meta.Rows, mat.EqualApprox(&dec, &wantDec, 1e-9))
		}
		job.Inputs = []string{bad}
		if _, err := Train(context.Background(), job); err == nil || !strings.Contains(err.Error(), "bad.csv: row 37, column label") ||
			!strings.Contains(err.Error(), "not one of the model's classes") {
			t.Errorf("stream %t: a label of no class: %v", stream, err)
		}
	}
	other := &schemas.ViewSpec{Task: schemas.Classification, Views: spec.Views[:2]}
	for _, job := range []TrainJob{
		{Spec: other, Inputs: []string{in}, Like: base},
		{Spec: spec, Inputs: []string{in}, Like: base, Grid: map[string][]float64{"lambda": {1, 2}}},
	} {
		if _, err := Train(context.Background(), job); err == nil || !strings.Contains(err.Error(), "train like model "+base.Version) {
			t.Errorf("%v", err)
		}
	}
}

// A training job publishes its model to a model store and makes it
// current, naming the model it was trained like as its parent.
func TestTrainPublishesToModelTopic(t *testing.T) {
	spec := testSpec(t)
	base := trainTestModel(t, spec, makeData(spec, 150, 1))
	in := filepath.Join(t.TempDir(), "in.csv")
	pipelinetest.WriteCSV(t, in, spec, makeData(spec, 90, 3), nil)
	c := kafkatest.Start(t, 1, "models")
	m, err := Train(context.Background(), TrainJob{Spec: spec, Inputs: []string{in}, Like: base, Config: base.Config, Models: pipelinetest.OpenModelTopic(t, c)})
	if err != nil {
		t.Fatal(err)
	}
	cur, man, err := pipelinetest.OpenModelTopic(t, c).Current(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if cur.Version != m.Version || man.Parent != base.Version || man.Publisher.Role != registry.RoleTrain || man.Rows != 90 {
		t.Errorf("current %s with manifest %+v; want %s, trained like %s", cur.Version, man, m.Version, base.Version)
	}
}
