package pipelinetest

import (
	"context"
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/registry"
	"github.com/mvml/mvml/schemas"
)

// TrainWith is model.DefaultTrainConfig changed by set, so that a test
// names only the values it is about.
func TrainWith(set func(*model.TrainConfig)) model.TrainConfig {
	c := model.DefaultTrainConfig()
	set(&c)
	return c
}

// TrainTestModel is a small model trained on d (24 landmarks, seed 3).
func TrainTestModel(t testing.TB, spec *schemas.ViewSpec, d *Dataset) *model.Model {
	t.Helper()
	m, err := model.Train(context.Background(), spec, d.Matrices(), d.Labels, TrainWith(func(c *model.TrainConfig) { c.Landmarks, c.Seed = 24, 3 }))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// ExpectedScores scores rows of d directly with the model's scorer.
func ExpectedScores(m *model.Model, d *Dataset) (dec *mat.Dense, pred []float64) {
	dec = &mat.Dense{}
	m.NewScorer().Score(dec, nil, d.Matrices())
	for i := range d.Rows() {
		pred = append(pred, m.Predict(dec.RawRowView(i)))
	}
	return dec, pred
}

// OpenModelTopic opens the model topic of c for a test, closed when the
// test ends.
func OpenModelTopic(t testing.TB, c *kafkatest.Cluster) *registry.Kafka {
	t.Helper()
	k, err := registry.OpenKafka(context.Background(), registry.KafkaConfig{Conn: kafkaconn.Config{Brokers: c.Brokers}, Topic: "models"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close(context.Background()) })
	return k
}

// Decisions are m's decisions on views.
func Decisions(m *model.Model, views []*mat.Dense) *mat.Dense {
	var dec mat.Dense
	m.NewScorer().Score(&dec, nil, views)
	return &dec
}

// MaxRelDiff is the largest |a−b| / max(1, |b|) of two matrices.
func MaxRelDiff(a, b *mat.Dense) float64 {
	r, c := b.Dims()
	worst := 0.0
	for i := range r {
		for j := range c {
			x, y := a.At(i, j), b.At(i, j)
			worst = max(worst, math.Abs(x-y)/max(1, math.Abs(y)))
		}
	}
	return worst
}
