package serve_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline"
	"github.com/mvml/mvml/pipeline/serve"
	"github.com/mvml/mvml/schemas"
	"github.com/mvml/mvml/sink"
)

// Run a Service over a finite source — here a CSV file standing in for a
// topic — into a rolling directory of Parquet files, refitting on the
// labelled rows as they arrive.
func ExampleService() {
	dir, err := os.MkdirTemp("", "mvml-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	spec, err := schemas.ParseViewSpec([]byte(`{"task": "classification", "views": [
		{"name": "u", "prefix": "u_", "dim": 1},
		{"name": "v", "prefix": "v_", "dim": 1}]}`))
	if err != nil {
		log.Fatal(err)
	}
	// label = [u + v > 1]; a bad cell in the stream's row badRow.
	write := func(name string, rows, badRow int) string {
		var b strings.Builder
		b.WriteString("id,label,u_0,v_0\n")
		for i := range rows {
			u, v := float64(i%13)/12, float64(i%7)/6
			label := 0
			if u+v > 1 {
				label = 1
			}
			vs := fmt.Sprint(v)
			if i == badRow {
				vs = "oops"
			}
			fmt.Fprintf(&b, "%d,%d,%g,%s\n", i, label, u, vs)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			log.Fatal(err)
		}
		return path
	}
	train, stream := write("train.csv", 200, -1), write("stream.csv", 300, 207)

	ctx := context.Background()
	cfg := model.DefaultTrainConfig()
	cfg.Landmarks = 30
	m, err := pipeline.Train(ctx, pipeline.TrainJob{Spec: spec, Inputs: []string{train}, Config: cfg})
	if err != nil {
		log.Fatal(err)
	}
	src, err := ingest.Open(ctx, spec, []string{stream}, ingest.Options{BatchSize: 50})
	if err != nil {
		log.Fatal(err)
	}
	defer src.Close()
	scores := filepath.Join(dir, "scores")
	if err := os.Mkdir(scores, 0o755); err != nil {
		log.Fatal(err)
	}
	out, err := sink.NewRollingParquet(scores, "scores", schemas.OutputSchema(m.Outputs(), 2, false), sink.ParquetOptions{}, sink.RollingPolicy{Rows: 100})
	if err != nil {
		log.Fatal(err)
	}
	var dead strings.Builder
	svc, err := serve.NewService(serve.Config{
		Model: m, Source: src, Output: out, DeadLetters: sink.NewRejects(&dead),
		Refit: serve.RefitPolicy{Rows: 150},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := svc.Run(ctx); err != nil {
		log.Fatal(err)
	}
	st := svc.Stats()
	fmt.Printf("in %d = scored %d + dead-lettered %d; refits: %d; Parquet files: %d\n", st.In, st.Scored, st.DeadLettered, st.Refits, len(out.Files()))
	fmt.Print(strings.ReplaceAll(dead.String(), stream, "stream.csv"))
	// Output:
	// in 300 = scored 299 + dead-lettered 1; refits: 1; Parquet files: 3
	// {"source":"stream.csv","row":207,"column":"v_0","reason":"value \"oops\" is not a number"}
}
