package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/registry"
	"github.com/mvml/mvml/statsbus"
)

// gateRig is a model topic with a tuned model of classSpec's fixture
// current, a stats topic that `mvml stats` jobs publish fold sums of
// labelled files to, and `mvml refit --once` tuning and gating on them.
type gateRig struct {
	t        *testing.T
	cluster  *kafkatest.Cluster
	brokers  string
	spec     string
	base     string
	trainCSV string
	refitArg []string
	// seen are the versions listed before.
	seen map[string]bool
}

// newGateRig trains the tuned base model on 300 rows and publishes it;
// refit adds more arguments to every refit (e.g. --decay).
func newGateRig(t *testing.T, refit ...string) *gateRig {
	t.Helper()
	dir := t.TempDir()
	g := &gateRig{t: t, cluster: kafkatest.Start(t, 1, "stats", "models"), seen: map[string]bool{}}
	g.brokers = strings.Join(g.cluster.Brokers, ",")
	tune := []string{"--tune", "lambda=1e-3,1e-2,1e-1,1"}
	g.spec, g.trainCSV = fixture(t, dir, "train.csv", classSpec, 300, 31, nil)
	g.base = filepath.Join(dir, "base.mvml")
	mustRun(t, append([]string{"train", "--input", g.trainCSV, "--views", g.spec, "--model", g.base, "--landmarks", "30", "--mode", "cov",
		"--brokers", g.brokers, "--model-topic", "models"}, tune...)...)
	g.newest()
	g.refitArg = append(append([]string{"refit", "--brokers", g.brokers, "--stats-topic", "stats", "--model-topic", "models", "--once", "--cold",
		"--http", "", "--folds", "5", "--gate-margin", "0.1"}, tune...), refit...)
	return g
}

// stats publishes the fold sums of files' rows on the base model's
// features.
func (g *gateRig) stats(files ...string) {
	g.t.Helper()
	mustRun(g.t, append(append([]string{"stats"}, inputArgs(files)...), "--like", g.base, "--brokers", g.brokers,
		"--stats-topic", "stats", "--folds", "5")...)
}

// refit runs `mvml refit --once` and returns the manifest of the model
// it published (current or not) and whether it was made current.
func (g *gateRig) refit() (registry.Manifest, bool) {
	g.t.Helper()
	stdout, _ := mustRun(g.t, g.refitArg...)
	man := g.newest()
	if man.Gate == nil {
		g.t.Fatalf("refit %s has no gate; refit said %q", man.Version, stdout)
	}
	_, cur := currentModel(g.t, g.cluster)
	g.t.Logf("refit %s: %s", man.Version, gateLine(man.Gate))
	return man, cur.Version == man.Version
}

// newest is the manifest of the one model models list shows that it did
// not show before.
func (g *gateRig) newest() registry.Manifest {
	g.t.Helper()
	out, _ := mustRun(g.t, "models", "list", "--format", "json", "--brokers", g.brokers, "--model-topic", "models")
	var listed struct{ Versions []registry.Manifest }
	if err := json.Unmarshal([]byte(out), &listed); err != nil {
		g.t.Fatal(err)
	}
	var fresh []registry.Manifest
	for _, v := range listed.Versions {
		if !g.seen[v.Version] {
			g.seen[v.Version] = true
			fresh = append(fresh, v)
		}
	}
	if len(fresh) != 1 {
		g.t.Fatalf("%d models listed anew, want 1:\n%s", len(fresh), out)
	}
	return fresh[0]
}

func gateLine(g *registry.Gate) string {
	s := fmt.Sprintf("%s: cv %.4g", g.Outcome, g.CVLoss)
	if g.ServingCVLoss != nil {
		s += fmt.Sprintf(" vs serving %.4g", *g.ServingCVLoss)
	}
	if g.NewLoss != nil {
		s += fmt.Sprintf("; on %v new rows %.4g vs serving %.4g", g.NewRows, *g.NewLoss, *g.ServingNewLoss)
	}
	return s
}

// shiftView rewrites the CSV file of fixture so that view b of every row
// reads offset more in both its columns: a sensor recalibrated, say. The
// labels stay those of the rows' true values.
func shiftView(t *testing.T, path string, offset float64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	for i := 1; i < len(lines); i++ {
		cells := strings.Split(lines[i], ",")
		for _, j := range []int{5, 6} { // b_0, b_1
			v, err := strconv.ParseFloat(cells[j], 64)
			if err != nil {
				t.Fatal(err)
			}
			cells[j] = strconv.FormatFloat(v+offset, 'g', -1, 64)
		}
		lines[i] = strings.Join(cells, ",")
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The gate accepts a real change of the data: later records read view b
// shifted by 2 (labels still right). The serving model does badly on
// their labels; a refit on them does far better there, and although its
// cross-validated loss over old and new rows is worse than the serving
// model's recorded one by more than the margin (old and new rows mix),
// its gain on the new labels is the larger: it is made current.
func TestRefitGateAcceptsDataShift(t *testing.T) {
	g := newGateRig(t)
	_, clean := fixture(t, t.TempDir(), "clean.csv", classSpec, 300, 32, nil)
	g.stats(g.trainCSV, clean)
	if man, cur := g.refit(); !cur {
		t.Fatalf("clean labels: %s not made current", man.Version)
	}
	_, shifted := fixture(t, t.TempDir(), "shifted.csv", classSpec, 600, 34, nil)
	shiftView(t, shifted, 2)
	g.stats(shifted)
	man, cur := g.refit()
	gate := man.Gate
	if !cur || gate.Outcome != registry.GateAccepted || gate.ServingCVLoss == nil || gate.NewLoss == nil || gate.NewRows != 600 {
		t.Fatalf("shifted view: current %v, gate %s", cur, gateLine(gate))
	}
	ra, rb := gate.CVLoss / *gate.ServingCVLoss, *gate.NewLoss / *gate.ServingNewLoss
	if rb > 0.8 || ra*rb > 1 {
		t.Errorf("the refit's loss on the new labels is %.3f of the serving model's, its cross-validated loss %.3f of it: want a large gain", rb, ra)
	}
	if ra <= 1+gate.Margin {
		t.Logf("the cross-validated loss alone (%.3f of the serving model's) would have accepted the refit", ra)
	}
}

// Once clean labels return after a rejected stretch of wrong ones, a
// refit is accepted again: with --decay 0.5 the wrong labels weigh half
// as much at every refit, the refit's cross-validated loss falls back
// within the margin of the serving model's, and the gate accepts it. A
// serve replica following the model topic switches to the first clean
// refit and then to the one accepted after the wrong labels, never to a
// rejected candidate; models list shows the rejected one with both
// losses.
func TestRefitGateAcceptsAgainOnCleanLabels(t *testing.T) {
	g := newGateRig(t, "--decay", "0.5")
	for _, topic := range []string{"records", "scores", "dead"} {
		if err := g.cluster.Fake().CreateTopic(topic, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	replica := startProcess(t, "serve", "serve", "--brokers", g.brokers, "--group", "g", "--topic", "records", "--output-topic", "scores",
		"--dead-letter-topic", "dead", "--model-topic", "models", "--max-wait", "20ms", "--http", "127.0.0.1:0")
	replica.waitHTTP(t)
	serving := func(version string) {
		t.Helper()
		waitUntil(t, "the replica serves "+version, time.Minute, func() bool { return replica.version() == version })
	}
	serving(loadModel(t, g.base).Version)

	_, clean := fixture(t, t.TempDir(), "clean.csv", classSpec, 300, 32, nil)
	g.stats(g.trainCSV, clean)
	first, cur := g.refit()
	if !cur {
		t.Fatalf("clean labels: %s not made current: %s", first.Version, gateLine(first.Gate))
	}
	serving(first.Version)

	_, noisy := fixture(t, t.TempDir(), "noisy.csv", classSpec, 600, 33, nil)
	shiftLabels(t, noisy)
	g.stats(noisy)
	rejected, cur := g.refit()
	if cur || rejected.Gate.Outcome != registry.GateRejected {
		t.Fatalf("wrong labels: %s made current: %s", rejected.Version, gateLine(rejected.Gate))
	}
	var accepted registry.Manifest
	var candidates []string
	for i := range 6 {
		_, c := fixture(t, t.TempDir(), "clean.csv", classSpec, 600, uint64(40+i), nil)
		g.stats(c)
		man, cur := g.refit()
		if cur {
			accepted = man
			break
		}
		candidates = append(candidates, man.Version)
	}
	if accepted.Version == "" {
		t.Fatalf("no refit accepted after 6 batches of clean labels")
	}
	t.Logf("accepted after %d clean refits rejected", len(candidates))
	serving(accepted.Version)
	m := replica.metricsOf()
	if m["mvml_model_reloads_total"] != 2 {
		t.Errorf("the replica put %v models in service, want 2 (%s and %s)", m["mvml_model_reloads_total"], first.Version, accepted.Version)
	}
	for _, v := range append(candidates, rejected.Version) {
		if strings.Contains(replica.said(), v) {
			t.Errorf("the replica mentions the rejected candidate %s:\n%s", v, replica.said())
		}
	}
	text, _ := mustRun(t, "models", "list", "--brokers", g.brokers, "--model-topic", "models")
	if !strings.Contains(text, "rejected by the gate (rejected against "+first.Version) {
		t.Errorf("models list does not show the rejected candidate %s with its losses:\n%s", rejected.Version, text)
	}
	if code := replica.stop(t); code != exitOK {
		t.Errorf("the replica: exit %d:\n%s", code, replica.said())
	}
}

// The labels since the serving model, the gate's comparison (b), are in
// the refitter's checkpoint: a refitter starting from it (each refit
// --once is one, as a standby taking over after a failover is) compares
// the next refit with the serving model on the labels of the rejected
// stretch and those after, not only on the latter. Once an operator
// makes another model current, those labels are not since it: the gate
// starts them again.
func TestRefitGateKeepsLabelsSinceAcrossRefitters(t *testing.T) {
	g := newGateRig(t)
	_, clean := fixture(t, t.TempDir(), "clean.csv", classSpec, 300, 32, nil)
	g.stats(g.trainCSV, clean)
	first, cur := g.refit()
	if !cur {
		t.Fatalf("clean labels: %s not made current", first.Version)
	}
	if cp, err := checkpointOf(t, g.cluster, first.Lineage); err != nil || cp.Since != nil || cp.Format != statsbus.CheckpointFormat {
		t.Fatalf("checkpoint after an accepted refit: %+v, %v", cp, err)
	}
	_, noisy := fixture(t, t.TempDir(), "noisy.csv", classSpec, 600, 33, nil)
	shiftLabels(t, noisy)
	g.stats(noisy)
	if man, cur := g.refit(); cur {
		t.Fatalf("wrong labels: %s made current", man.Version)
	}
	cp, err := checkpointOf(t, g.cluster, first.Lineage)
	if err != nil || cp.SinceModel != first.Version || cp.SinceRows != 600 || cp.Format != statsbus.CheckpointSinceFormat {
		t.Fatalf("checkpoint after a rejected refit: %+v, %v; want 600 labels since %s", cp.CheckpointHeader, err, first.Version)
	}
	_, clean2 := fixture(t, t.TempDir(), "clean2.csv", classSpec, 600, 40, nil)
	g.stats(clean2)
	second, cur := g.refit()
	if second.Gate.NewRows != 1200 || second.Gate.Serving != first.Version {
		t.Fatalf("the gate compared %v labels since %s, want 1200 since %s", second.Gate.NewRows, second.Gate.Serving, first.Version)
	}
	if cur {
		t.Fatalf("%s made current: %s", second.Version, gateLine(second.Gate))
	}
	mustRun(t, "models", "promote", second.Version, "--brokers", g.brokers, "--model-topic", "models")
	_, clean3 := fixture(t, t.TempDir(), "clean3.csv", classSpec, 300, 41, nil)
	g.stats(clean3)
	third, _ := g.refit()
	if third.Gate.NewRows != 300 || third.Gate.Serving != second.Version {
		t.Errorf("after a promotion the gate compared %v labels since %s, want 300 since %s", third.Gate.NewRows, third.Gate.Serving, second.Version)
	}
}
