package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/kafkaconn"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline"
	"github.com/mvml/mvml/registry"
)

func loadModel(t *testing.T, path string) *model.Model {
	t.Helper()
	m, err := registry.LoadModel(path)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// `train --like BASE` fits the rows on BASE's landmarks, features and
// target encoding: the same lineage, BASE's fit flags but for those given,
// the model model.TrainLike makes of the same rows; flags that would
// choose other features are refused, and so is BASE as the output.
func TestTrainLike(t *testing.T) {
	dir := t.TempDir()
	specPath, trainCSV := fixture(t, dir, "train.csv", classSpec, 150, 1, nil)
	_, newCSV := fixture(t, dir, "new.csv", classSpec, 120, 5, nil)
	base := filepath.Join(dir, "base.mvml")
	mustRun(t, "train", "--input", trainCSV, "--views", specPath, "--model", base, "--landmarks", "30", "--lambda", "0.01", "--mode", "cov")
	b := loadModel(t, base)
	views, labels, err := pipeline.LoadLabelled(context.Background(), b.Spec, []string{newCSV}, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := model.TrainLike(context.Background(), b, views, labels, b.Config.Fit, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		lambda float64
	}{
		{"base's fit flags", nil, 0.01},
		{"streamed", []string{"--stream"}, 0.01},
		{"a fit flag given", []string{"--lambda", "0.5"}, 0.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "like.mvml")
			mustRun(t, append([]string{"train", "--input", newCSV, "--like", base, "--model", out}, tc.args...)...)
			l := loadModel(t, out)
			if l.Lineage() != b.Lineage() || l.Config.Fit.Mode != model.ModeCov || l.Config.Fit.Lambda != tc.lambda || l.Meta.Rows != 120 {
				t.Errorf("lineage %s (base %s), mode %s, λ %g, %d rows", l.Lineage(), b.Lineage(), l.Config.Fit.Mode, l.Config.Fit.Lambda, l.Meta.Rows)
			}
			if tc.name == "base's fit flags" && l.Version != want.Version {
				t.Errorf("version %s, want %s as model.TrainLike makes it", l.Version, want.Version)
			}
		})
	}
	otherDir := t.TempDir()
	otherSpec, _ := fixture(t, otherDir, "x.csv", `{"task": "classification", "views": [{"name": "a", "prefix": "a_", "dim": 3}]}`, 10, 1, nil)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--landmarks", "10"}, exitUsage, "--landmarks cannot be used with --like"},
		{[]string{"--seed", "3"}, exitUsage, "--seed cannot be used with --like"},
		{[]string{"--views", otherSpec}, exitError, "reads other views than the model's"},
	} {
		args := append([]string{"train", "--input", newCSV, "--like", base, "--model", filepath.Join(dir, "x.mvml")}, tc.args...)
		if code, _, stderr := mvml(t, args...); code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, tc.code, tc.want)
		}
	}
	if code, _, stderr := mvml(t, "train", "--input", newCSV, "--like", base, "--model", base); code != exitError ||
		!strings.Contains(stderr, "is the same file as the base model") {
		t.Errorf("the base as the output: exit %d, %q", code, stderr)
	}
}

// damagedPublication is what a publisher that wrote a truncated chunk
// would leave in the model topic for the model file path: its chunk, its
// manifest and the pointer to it.
func damagedPublication(t *testing.T, path string) []kafkatest.Message {
	t.Helper()
	m := loadModel(t, path)
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := kafkaconn.BlobMessages("model/"+m.Version, file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(file)
	sha := hex.EncodeToString(sum[:])
	man, _ := json.Marshal(registry.Manifest{Version: m.Version, Lineage: m.Lineage(), SHA256: sha, Bytes: int64(len(file)), Chunks: len(chunks)})
	ptr, _ := json.Marshal(registry.Pointer{Version: m.Version, SHA256: sha, Reason: registry.ReasonPublish})
	var msgs []kafkatest.Message
	for _, c := range chunks {
		msgs = append(msgs, kafkatest.Message{Key: c.Key, Value: c.Value[:len(c.Value)-1], Headers: kafkatest.HeadersOf(c.Headers)})
	}
	return append(msgs, kafkatest.Message{Key: []byte("model/" + m.Version), Value: man}, kafkatest.Message{Key: []byte("current"), Value: ptr})
}

// The model topic end to end: serve refuses to start without a current
// model and says how to publish one; `train --model-topic` publishes one
// (and writes the file with --model); serve loads it without --model and
// follows the topic: a truncated publication is refused and a model of
// other outputs cannot be served (both counted, the model in service
// stays), and a retraining job's model, trained like the first, is put in
// service without a restart.
func TestServeFollowsModelTopic(t *testing.T) {
	dir := t.TempDir()
	specPath, trainCSV := fixture(t, dir, "train.csv", classSpec, 150, 1, nil)
	_, newCSV := fixture(t, dir, "new.csv", classSpec, 150, 5, nil)
	_, streamCSV := fixture(t, dir, "stream.csv", classSpec, 40, 2, nil)
	regDir := t.TempDir()
	regSpec, regCSV := fixture(t, regDir, "reg.csv", regressionSpec, 150, 3, nil)
	cluster := kafkatest.Start(t, 1, "records", "scores", "dead", "models")
	brokers := strings.Join(cluster.Brokers, ",")
	serveArgs := []string{"--brokers", brokers, "--topic", "records", "--output-topic", "scores", "--dead-letter-topic", "dead",
		"--model-topic", "models", "--max-wait", "20ms", "--http", ""}

	code, _, stderr := mvml(t, append([]string{"serve"}, serveArgs...)...)
	if code != exitError || !strings.Contains(stderr, "mvml serve: model topic models: no current model: publish one with `mvml train --input FILE --views SPEC --brokers "+brokers+" --model-topic models`") {
		t.Fatalf("serve on an empty model topic: exit %d, %q", code, stderr)
	}
	first := filepath.Join(dir, "first.mvml")
	out, _ := mustRun(t, "train", "--input", trainCSV, "--views", specPath, "--brokers", brokers, "--model-topic", "models", "--model", first, "--landmarks", "30")
	if !strings.Contains(out, "→ "+first+", model topic models (current)") {
		t.Errorf("train says %q", out)
	}
	old := loadModel(t, first)

	msgs := csvMessages(t, streamCSV, false)
	cluster.ProduceValues(t, "records", msgs[:20]...)
	srv := startServe(serveArgs...)
	srv.waitFor(t, "the first records", func() bool { return len(cluster.ConsumeAll(t, "scores")) == 20 })

	damagedFile := filepath.Join(dir, "damaged.mvml")
	mustRun(t, "train", "--input", newCSV, "--views", specPath, "--model", damagedFile, "--landmarks", "20")
	cluster.Produce(t, "models", damagedPublication(t, damagedFile)...)
	srv.waitFor(t, "the truncated model refused", func() bool { return strings.Contains(srv.stderr.String(), "the current model is refused") })
	mustRun(t, "train", "--input", regCSV, "--views", regSpec, "--brokers", brokers, "--model-topic", "models", "--landmarks", "20")
	srv.waitFor(t, "the regression model refused", func() bool { return strings.Contains(srv.stderr.String(), "cannot be served") })

	out, _ = mustRun(t, "train", "--input", newCSV, "--like", first, "--brokers", brokers, "--model-topic", "models")
	retrained := strings.TrimSuffix(strings.Fields(out)[1], ":")
	srv.waitFor(t, "the retrained model in service", func() bool { return strings.Contains(srv.stderr.String(), "model swapped in") })
	cluster.ProduceValues(t, "records", msgs[20:]...)
	srv.waitFor(t, "the later records", func() bool { return len(cluster.ConsumeAll(t, "scores")) == 40 })
	if code := srv.stop(t); code != exitOK {
		t.Fatalf("exit %d: %s", code, srv.stderr)
	}
	if !strings.Contains(srv.stderr.String(), "1 reloads (2 failed), model "+retrained) {
		t.Errorf("serve's summary: %s", srv.stderr)
	}
	versions := map[string]int{}
	for _, msg := range cluster.ConsumeAll(t, "scores") {
		var s scoreMessage
		if err := json.Unmarshal(msg.Value, &s); err != nil {
			t.Fatal(err)
		}
		versions[s.Version]++
	}
	if versions[old.Version] != 20 || versions[retrained] != 20 {
		t.Errorf("scores per model version %v: want 20 by the first model %s and 20 by the retrained %s", versions, old.Version, retrained)
	}
}

// Wrong uses of the model topic flags are usage errors; a model topic that
// does not exist fails the job before a row is read.
func TestModelTopicFlags(t *testing.T) {
	dir := t.TempDir()
	specPath, data := fixture(t, dir, "data.csv", classSpec, 30, 8, nil)
	cluster := kafkatest.Start(t, 1, "records")
	brokers := strings.Join(cluster.Brokers, ",")
	serve := []string{"serve", "--brokers", brokers, "--topic", "records", "--output-topic", "out", "--dead-letter-topic", "dlq"}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"train", "--input", data, "--views", specPath, "--model-topic", "models"}, exitUsage, "--model-topic needs --brokers"},
		{[]string{"train", "--input", data, "--views", specPath, "--brokers", brokers, "--model", "m.mvml"}, exitUsage, "--brokers reaches the Kafka --topic to train on or the --model-topic"},
		{[]string{"train", "--input", data, "--views", specPath}, exitUsage, "give --model, --model-dir or --model-topic"},
		{[]string{"train", "--input", data}, exitUsage, "--views is required"},
		{[]string{"train", "--input", data, "--views", specPath, "--brokers", brokers, "--model-topic", "models"}, exitError,
			"mvml train: model topic models does not exist: create it with one partition and cleanup.policy=compact"},
		{serve, exitUsage, "--model or --model-topic is required"},
		{append(serve, "--model-topic", "models", "--reload-interval", "1m"), exitUsage, "--reload-interval watches a --model file"},
		{append(serve, "--model-topic", "records", "--http", ""), exitError, "model topic records"},
	} {
		code, stdout, stderr := mvml(t, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("mvml %v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, tc.code, tc.want)
		}
		if code == exitError && stdout != "" {
			t.Errorf("mvml %v printed %q", tc.args, stdout)
		}
	}
}
