package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/registry"
)

// `serve --tune` on a replica that refits itself: its refit on the
// labelled records cross-validates λ on 5 fold sums, passes the gate and
// is published current to the model topic with its table and the gate's
// verdict in the manifest; /metrics shows the λ chosen and the outcome.
// A refit on records 30% of whose labels are shifted to another class is
// rejected: published as a candidate with both losses, not served, the
// replica stays on its model.
func TestServeTune(t *testing.T) {
	dir := t.TempDir()
	specPath, trainCSV := fixture(t, dir, "train.csv", classSpec, 200, 51, nil)
	_, streamCSV := fixture(t, dir, "stream.csv", classSpec, 300, 52, nil)
	cluster := kafkatest.Start(t, 2, "records")
	for _, topic := range []string{"scores", "dead", "models"} {
		if err := cluster.Fake().CreateTopic(topic, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	brokers := strings.Join(cluster.Brokers, ",")
	mustRun(t, "train", "--input", trainCSV, "--views", specPath, "--landmarks", "30", "--mode", "cov", "--brokers", brokers, "--model-topic", "models",
		"--tune", "lambda=1e-3,1e-1,10")
	base, _ := currentModel(t, cluster)
	replica := startProcess(t, "serve", "serve", "--brokers", brokers, "--group", "g", "--topic", "records", "--output-topic", "scores",
		"--dead-letter-topic", "dead", "--model-topic", "models", "--refit-rows", "300", "--folds", "5", "--tune", "lambda=1e-3,1e-1,10",
		"--max-wait", "20ms", "--http", "127.0.0.1:0")
	replica.waitHTTP(t)
	produce := func(path string, from int) {
		t.Helper()
		var msgs []kafka.Message
		for i, v := range csvMessages(t, path, true) {
			msgs = append(msgs, kafka.Message{Key: []byte(strconv.Itoa(from + i)), Value: v})
		}
		w := &kafka.Writer{Addr: kafka.TCP(brokers), Topic: "records", Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll,
			BatchTimeout: time.Millisecond, Transport: &kafka.Transport{}}
		defer w.Close()
		if err := w.WriteMessages(context.Background(), msgs...); err != nil {
			t.Fatal(err)
		}
	}
	refits := func(n float64) map[string]float64 {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for {
			m := replica.metricsOf()
			if m[`mvml_refit_outcomes_total{outcome="served"}`]+m[`mvml_refit_outcomes_total{outcome="rejected"}`] >= n {
				return m
			}
			if time.Now().After(deadline) {
				t.Fatalf("no refit %v; the replica said:\n%s", n, replica.said())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	produce(streamCSV, 0)
	m := refits(1)
	got, man := currentModel(t, cluster)
	if m[`mvml_refit_outcomes_total{outcome="served"}`] != 1 || got.Version == base.Version {
		t.Fatalf("the refit was not made current: %v; the replica said:\n%s", m, replica.said())
	}
	if man.Tuning == nil || got.Meta.Tuning == nil || man.Gate == nil || man.Gate.Outcome != registry.GateAccepted || man.Gate.Serving != base.Version ||
		man.Gate.ServingCVLoss == nil || man.Gate.NewRows != 300 || man.Publisher.Role != registry.RoleRefit {
		t.Fatalf("manifest %+v, gate %+v", man, man.Gate)
	}
	if v := m[`mvml_refit_tuned{param="lambda"}`]; v != got.Config.Fit.Lambda {
		t.Errorf("mvml_refit_tuned{param=\"lambda\"} %v, the model's λ %v", v, got.Config.Fit.Lambda)
	}

	_, noisy := fixture(t, t.TempDir(), "noisy.csv", classSpec, 300, 53, nil)
	shiftLabels(t, noisy)
	produce(noisy, 1000)
	m = refits(2)
	if m[`mvml_refit_outcomes_total{outcome="rejected"}`] != 1 || replica.version() != got.Version {
		t.Fatalf("shifted labels: %v, the replica serves %s (want %s still):\n%s", m, replica.version(), got.Version, replica.said())
	}
	if cur, _ := currentModel(t, cluster); cur.Version != got.Version {
		t.Errorf("the current model is %s, want %s still", cur.Version, got.Version)
	}
	text, _ := mustRun(t, "models", "list", "--brokers", brokers, "--model-topic", "models")
	if !strings.Contains(text, "rejected by the gate (rejected against "+got.Version) || !strings.Contains(text, "new labels") {
		t.Errorf("models list does not show the rejected candidate with its losses:\n%s", text)
	}
	if code := replica.stop(t); code != exitOK {
		t.Errorf("exit %d:\n%s", code, replica.said())
	}
}

// serve's flags of tuning are used exactly or refused.
func TestServeTuneFlags(t *testing.T) {
	args := func(more ...string) []string {
		return append([]string{"serve", "--brokers", "127.0.0.1:1", "--topic", "in", "--output-topic", "out", "--dead-letter-topic", "dlq",
			"--model", "m.mvml"}, more...)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{args("--tune", "lambda=1,2", "--folds", "1", "--refit-rows", "10"), "give --folds 2 or more"},
		{args("--tune", "lambda=1,2", "--folds", "5"), "give --refit-rows or --refit-interval"},
		{args("--folds", "5", "--refit-rows", "10"), "--folds keeps fold sums"},
		{args("--gate-margin", "0.2", "--refit-rows", "10"), "only --tune computes"},
		{args("--tune", "landmarks=1,2", "--folds", "5", "--refit-rows", "10"), "landmarks"},
		{args("--tune", "lambda=1,2", "--folds", "5", "--model-topic", "M", "--stats-topic", "s"), "--tune cannot be used with --stats-topic"},
		{args("--tune", "lambda=1,2", "--folds", "5", "--refit-rows", "10", "--gate-margin", "NaN"), "must be finite"},
	} {
		t.Run(fmt.Sprint(tc.args[9:]), func(t *testing.T) {
			code, _, stderr := mvml(t, tc.args...)
			if code != exitUsage || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, %q; want %d and %q", code, stderr, exitUsage, tc.want)
			}
		})
	}
}
