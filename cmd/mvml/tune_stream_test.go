package main

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/pipeline"
)

// uwaveTuneGrid is the grid of the uWave stream proof (issue 27).
const uwaveTuneGrid = "lambda=1e-4,1e-3,1e-2,1e-1,1"

// splitUWave writes the rows of the shared uWave training set (the only
// split ../shared/data holds) to train.csv and test.csv in dir: a row
// whose id is a multiple of 4 is a test row (224 rows), the others train
// (672 rows).
func splitUWave(t *testing.T, data, dir string) (train, test string) {
	t.Helper()
	f, err := os.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	train, test = filepath.Join(dir, "train.csv"), filepath.Join(dir, "test.csv")
	var out [2]*os.File
	for i, path := range []string{train, test} {
		if out[i], err = os.Create(path); err != nil {
			t.Fatal(err)
		}
	}
	sc := bufio.NewScanner(gz)
	sc.Buffer(nil, 1<<20)
	for line := 0; sc.Scan(); line++ {
		text := sc.Text() + "\n"
		if line == 0 {
			for _, o := range out {
				o.WriteString(text)
			}
			continue
		}
		id, err := strconv.Atoi(text[:strings.IndexByte(text, ',')])
		if err != nil {
			t.Fatal(err)
		}
		if id%4 == 0 {
			out[1].WriteString(text)
		} else {
			out[0].WriteString(text)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, o := range out {
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return train, test
}

// accuracyOf is `mvml eval`'s accuracy of a model on a labelled file.
func accuracyOf(t *testing.T, modelPath, data string) float64 {
	t.Helper()
	stdout, _ := mustRun(t, "eval", "--input", data, "--model", modelPath, "--json")
	var ev struct {
		N        int     `json:"n"`
		Accuracy float64 `json:"accuracy"`
	}
	if err := json.Unmarshal([]byte(stdout), &ev); err != nil || ev.N == 0 {
		t.Fatalf("eval: %q (%v)", stdout, err)
	}
	return ev.Accuracy
}

// The uWave stream proof of issue 27: uWave's training rows stream as
// records and late labels through two serve replicas (processes of their
// own, publishing 5 fold sums) to one refitter tuning λ over 5 folds; the
// λ it chooses is the one `mvml train --like BASE --tune` chooses on the
// same rows (the same ids, so the same folds), with the same table (to
// rounding) and fit, and that model's accuracy on the test rows is within
// half a point of the best of the five models `train --lambda` makes.
//
// ../shared/data holds uWave's official training split only (896 rows):
// its rows with an id that is a multiple of 4 are the test rows here.
// 160 s on a loaded, shared 2-vCPU machine; skipped under
// -short and with the race detector (the fits dominate).
func TestUWaveStreamTuneEqualsTrainTune(t *testing.T) {
	spec, data := sharedData(t, "uwave_ucr")
	if raceEnabled {
		t.Skip("the race detector makes the five uWave fits too slow")
	}
	dir := t.TempDir()
	trainCSV, testCSV := splitUWave(t, data, dir)
	cluster := kafkatest.Start(t, 4, "records", "labels")
	for _, topic := range []string{"scores", "dead", "stats", "models"} {
		if err := cluster.Fake().CreateTopic(topic, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	brokers := strings.Join(cluster.Brokers, ",")
	base := filepath.Join(dir, "base.mvml")
	mustRun(t, "train", "--input", trainCSV, "--views", spec, "--model", base, "--brokers", brokers, "--model-topic", "models")

	refitDir := filepath.Join(dir, "refits")
	records, labelled := csvMessages(t, trainCSV, false), csvMessages(t, trainCSV, true)
	n := len(records)
	// One refit of every row: its statistics are those of the stream.
	rp := startProcess(t, "refit", "refit", "--brokers", brokers, "--stats-topic", "stats", "--model-topic", "models",
		"--refit-rows", strconv.Itoa(n), "--refit-interval", "0", "--cold", "--folds", "5", "--tune", uwaveTuneGrid,
		"--model-dir", refitDir, "--http", "127.0.0.1:0")
	rp.waitHTTP(t)
	var replicas []*process
	for i := range 2 {
		p := startProcess(t, fmt.Sprintf("serve-%d", i), "serve", "--brokers", brokers, "--group", "g", "--topic", "records",
			"--labels-topic", "labels", "--output-topic", "scores", "--dead-letter-topic", "dead", "--model-topic", "models",
			"--stats-topic", "stats", "--folds", "5", "--stats-interval", "1s", "--max-wait", "20ms", "--http", "127.0.0.1:0")
		p.waitHTTP(t)
		replicas = append(replicas, p)
	}

	var recs, labels []kafka.Message
	for i := range n {
		var rec struct {
			ID    int64   `json:"id"`
			Label float64 `json:"label"`
		}
		if err := json.Unmarshal(labelled[i], &rec); err != nil {
			t.Fatal(err)
		}
		key := []byte(strconv.FormatInt(rec.ID, 10))
		recs = append(recs, kafka.Message{Key: key, Value: records[i]})
		labels = append(labels, kafka.Message{Key: key, Value: fmt.Appendf(nil, `{"id": %d, "label": %v}`, rec.ID, rec.Label)})
	}
	write := func(topic string, msgs []kafka.Message) {
		w := &kafka.Writer{Addr: kafka.TCP(brokers), Topic: topic, Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll,
			BatchTimeout: time.Millisecond, Transport: &kafka.Transport{}}
		defer w.Close()
		if err := w.WriteMessages(context.Background(), msgs...); err != nil {
			t.Fatal(err)
		}
	}
	write("records", recs)
	write("labels", labels)

	refit := refitter{rp}
	deadline := time.Now().Add(4 * time.Minute)
	for {
		m := rp.metricsOf()
		if m != nil && m[`mvml_refit_outcomes_total{outcome="published"}`]+m[`mvml_refit_outcomes_total{outcome="rejected"}`] >= 1 {
			break
		}
		if time.Now().After(deadline) {
			said := ""
			for _, p := range replicas {
				said += p.name + ":\n" + p.said() + "\n"
			}
			t.Fatalf("no refit: %d rows merged of %d; the refitter said:\n%s\n%s", refit.rows(), n, rp.said(), said)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if rows := refit.rows(); rows != int64(n) {
		t.Fatalf("%d rows merged, want %d", rows, n)
	}
	entries, err := filepath.Glob(filepath.Join(refitDir, "*.mvml"))
	if err != nil {
		t.Fatal(err)
	}
	var tuned string
	for _, e := range entries {
		if filepath.Base(e) != "current.mvml" {
			tuned = e
		}
	}
	if tuned == "" {
		t.Fatalf("the refitter saved no model in %s: %v", refitDir, entries)
	}
	got := loadModel(t, tuned)

	want := filepath.Join(dir, "train-tune.mvml")
	mustRun(t, "train", "--input", trainCSV, "--like", base, "--model", want, "--tune", uwaveTuneGrid)
	w := loadModel(t, want)
	gt, wt := got.Meta.Tuning, w.Meta.Tuning
	if gt == nil || wt == nil {
		t.Fatalf("tuning: refit %v, train --tune %v", gt, wt)
	}
	gotLambda, wantLambda := got.Config.Fit.Lambda, w.Config.Fit.Lambda
	t.Logf("refitter chose λ=%g, train --tune λ=%g", gotLambda, wantLambda)
	if gt.Chosen != wt.Chosen || gotLambda != wantLambda {
		t.Fatalf("the refitter chose %s, train --tune %s", gt.Table[gt.Chosen].Candidate, wt.Table[wt.Chosen].Candidate)
	}
	for i := range wt.Table {
		for f := range wt.Table[i].FoldLoss {
			g, x := gt.Table[i].FoldLoss[f], wt.Table[i].FoldLoss[f]
			if math.Abs(g-x) > 1e-9*math.Max(1, math.Abs(x)) {
				t.Errorf("candidate %d fold %d: loss %v from the replicas' deltas, %v from one pass", i, f, g, x)
			}
		}
	}
	views, _, err := pipeline.LoadLabelled(context.Background(), w.Spec, []string{testCSV}, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sameFit(t, got, w, views)

	tunedAcc, best := accuracyOf(t, tuned, testCSV), 0.0
	for _, lambda := range []string{"1e-4", "1e-3", "1e-2", "1e-1", "1"} {
		fixed := filepath.Join(dir, "lambda"+lambda+".mvml")
		mustRun(t, "train", "--input", trainCSV, "--like", base, "--model", fixed, "--lambda", lambda)
		acc := accuracyOf(t, fixed, testCSV)
		t.Logf("λ=%s: test accuracy %.4f", lambda, acc)
		best = math.Max(best, acc)
	}
	t.Logf("tuned λ=%g: test accuracy %.4f, best fixed λ %.4f", gotLambda, tunedAcc, best)
	if tunedAcc < best-0.005 {
		t.Errorf("the tuned model's test accuracy %.4f is more than half a point below the best fixed λ's %.4f", tunedAcc, best)
	}
	for _, p := range replicas {
		if code := p.stop(t); code != exitOK {
			t.Errorf("%s: exit %d:\n%s", p.name, code, p.said())
		}
	}
}
