package pipeline_test

import (
	"context"
	"fmt"
	"log"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline"
	"github.com/mvml/mvml/schemas"
)

// Train a model on one CSV file, then score another into JSON Lines,
// skipping its bad rows into a rejects file.
func ExampleScore() {
	dir, err := os.MkdirTemp("", "mvml-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	spec, err := schemas.ParseViewSpec([]byte(`{"task": "regression", "views": [
		{"name": "u", "prefix": "u_", "dim": 1},
		{"name": "v", "prefix": "v_", "dim": 1}]}`))
	if err != nil {
		log.Fatal(err)
	}
	// label = sin(u) + v²; the scoring file has a NaN in its row 2.
	write := func(name string, rows int, nanRow int) string {
		var b strings.Builder
		b.WriteString("id,label,u_0,v_0\n")
		for i := range rows {
			u, v := float64(i%17)/4, float64(i%5)/3
			vs := fmt.Sprint(v)
			if i == nanRow {
				vs = "NaN"
			}
			fmt.Fprintf(&b, "%d,%g,%g,%s\n", i, math.Sin(u)+v*v, u, vs)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			log.Fatal(err)
		}
		return path
	}
	train, score := write("train.csv", 200, -1), write("score.csv", 20, 2)

	ctx := context.Background()
	cfg := model.DefaultTrainConfig()
	cfg.Landmarks, cfg.Fit.Lambda = 40, 1e-3
	m, err := pipeline.Train(ctx, pipeline.TrainJob{
		Spec: spec, Inputs: []string{train}, Output: filepath.Join(dir, "m.mvml"), Config: cfg,
	})
	if err != nil {
		log.Fatal(err)
	}
	rejects := filepath.Join(dir, "rejects.jsonl")
	counts, err := pipeline.Score(ctx, pipeline.ScoreConfig{
		Model: m, Inputs: []string{score}, Output: filepath.Join(dir, "scores.jsonl"),
		OnError: pipeline.OnErrorSkip, Rejects: rejects,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("in %d = scored %d + rejected %d\n", counts.In, counts.Scored, counts.Rejected)
	bad, err := os.ReadFile(rejects)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(strings.ReplaceAll(string(bad), dir+string(filepath.Separator), ""))
	// Output:
	// in 20 = scored 19 + rejected 1
	// {"source":"score.csv","row":2,"column":"v_0","reason":"view v feature 0 is NaN"}
}
