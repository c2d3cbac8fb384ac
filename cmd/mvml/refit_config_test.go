package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/pipeline"
)

// writeRefitConfig writes a configuration file of mvml refit to a test
// directory.
func writeRefitConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "refit.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const goodRefitConfig = `# a refit configuration
brokers: [kafka-0:9092, kafka-1:9092]
stats-topic: mvml-stats
model-topic: mvml-models
group: mvml-refit
refit-rows: 5000
refit-interval: 10m
decay: 0.9
session-timeout: 45s
sasl: scram-sha-512
sasl-user: ${MVML_TEST_USER}
`

// mvml lint --command refit reports every problem of a refit file with
// its line, refit's own checks included, and exits 1; a good file is ok.
func TestLintRefit(t *testing.T) {
	t.Setenv("MVML_TEST_USER", "alice")
	tests := []struct {
		name, text string
		code       int
		want       []string // lines of stdout, in order
	}{
		{"good", goodRefitConfig, exitOK, []string{"refit.yaml: ok"}},
		{"once, without the refit triggers", "brokers: k:9092\nstats-topic: s\nmodel-topic: m\nonce: true\ncold: true\n", exitOK, []string{"refit.yaml: ok"}},
		{"empty file", "", exitError, []string{"refit.yaml: brokers is required", "refit.yaml: stats-topic is required", "refit.yaml: model-topic is required"}},
		{"types and values, every one", `brokers: kafka:9092
stats-topic: s
model-topic: m
topic: records
refit-row: 10
refit-interval: 10
cold: yes
decay: [1]
session-timeout: 30
stats-topic: again
`, exitError, []string{
			"refit.yaml: line 4: topic: unknown key",
			"refit.yaml: line 5: refit-row: unknown key (did you mean refit-rows?)",
			`refit.yaml: line 6: refit-interval: invalid value "10": want a duration such as 30s or 10m`,
			`refit.yaml: line 7: cold: found the string "yes", want true or false`,
			"refit.yaml: line 8: decay: found a list, want a number",
			`refit.yaml: line 9: session-timeout: invalid value "30": want a duration such as 30s or 10m`,
			"refit.yaml: line 10: stats-topic: given twice (first on line 2)",
		}},
		{"a check of refit, at its key's line", strings.Replace(goodRefitConfig, "decay: 0.9", "decay: 2", 1), exitError,
			[]string{"refit.yaml: line 8: decay: decay 2 must be in (0, 1]"}},
		{"keys that exclude each other", goodRefitConfig + "once: true\n", exitError,
			[]string{"refit.yaml: line 6: refit-rows: refit-rows and refit-interval say when a running refitter refits; once refits once"}},
		{"never refits", strings.Replace(strings.Replace(goodRefitConfig, "refit-rows: 5000", "refit-rows: 0", 1), "refit-interval: 10m", "refit-interval: 0s", 1), exitError,
			[]string{"refit.yaml: line 6: refit-rows: refit-rows 0 and refit-interval 0: the refitter would never refit"}},
		{"an unset variable", strings.Replace(goodRefitConfig, "${MVML_TEST_USER}", "${MVML_TEST_UNSET}", 1), exitOK, []string{
			"refit.yaml: line 11: sasl-user: environment variable $MVML_TEST_UNSET is not set here: its value is not checked (note)",
			"refit.yaml: ok"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeRefitConfig(t, tt.text)
			code, stdout, stderr := mvml(t, "lint", "--command", "refit", path)
			got := strings.Split(strings.TrimSpace(strings.ReplaceAll(stdout, filepath.Dir(path)+string(filepath.Separator), "")), "\n")
			if code != tt.code || strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("exit %d, stdout:\n%s\nwant exit %d and\n%s\nstderr: %s", code, strings.Join(got, "\n"), tt.code, strings.Join(tt.want, "\n"), stderr)
			}
		})
	}
	// --command says whose file it is: a refit file is not serve's.
	code, stdout, _ := mvml(t, "lint", writeRefitConfig(t, goodRefitConfig))
	if code != exitError || !strings.Contains(stdout, "refit.yaml: topic is required\n") || !strings.HasSuffix(stdout, "refit.yaml: dead-letter-topic is required\n") {
		t.Errorf("lint of a refit file as serve's: exit %d, stdout %s", code, stdout)
	}
}

// refit --config: the file's values, environment references expanded,
// flags over the file, its checks at the file's lines, and --print-config
// writes the effective configuration as a valid file, values from the
// environment masked.
func TestRefitConfigFile(t *testing.T) {
	t.Setenv("MVML_TEST_USER", "alice")
	path := writeRefitConfig(t, goodRefitConfig)
	stdout, _ := mustRun(t, "refit", "--config", path, "--group", "from-flag", "--print-config")
	var got map[string]any
	if err := yaml.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("--print-config wrote no YAML: %v\n%s", err, stdout)
	}
	want := map[string]any{"brokers": "kafka-0:9092,kafka-1:9092", "stats-topic": "mvml-stats", "model-topic": "mvml-models", "group": "from-flag",
		"refit-rows": 5000, "refit-interval": "10m0s", "decay": 0.9, "session-timeout": "45s", "sasl-user": "${MVML_TEST_USER}",
		"cold": false, "once": false, "http": ":8080"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %v (%T), want %v", k, got[k], got[k], v)
		}
	}
	if strings.Contains(stdout, "alice") || got["config"] != nil || got["print-config"] != nil {
		t.Errorf("--print-config shows the secret or its own flags:\n%s", stdout)
	}
	// Every flag is a key: the effective configuration is a valid file,
	// also with --once, whose file leaves out the refit triggers.
	for _, args := range [][]string{nil, {"--once"}} {
		printed, _ := mustRun(t, append([]string{"refit", "--config", writeRefitConfig(t, strings.Replace(goodRefitConfig, "refit-rows: 5000\nrefit-interval: 10m\n", "", 1)), "--print-config"}, args...)...)
		if code, out, stderr := mvml(t, "lint", "--command", "refit", writeRefitConfig(t, printed)); code != exitOK {
			t.Errorf("lint of --print-config %v's output: exit %d\n%s%s%s", args, code, printed, out, stderr)
		}
	}
	// A flag given overrides the file and is still checked there.
	code, _, stderr := mvml(t, "refit", "--config", writeRefitConfig(t, strings.Replace(goodRefitConfig, "45s", "soon", 1)), "--session-timeout", "1m", "--print-config")
	if code != exitUsage || !strings.Contains(stderr, `line 9: session-timeout: invalid value "soon"`) {
		t.Errorf("exit %d, stderr %s; want the file's bad value reported", code, stderr)
	}
	// A check of refit names the file's line.
	code, _, stderr = mvml(t, "refit", "--config", writeRefitConfig(t, strings.Replace(goodRefitConfig, "refit-rows: 5000", "refit-rows: -1", 1)))
	if code != exitUsage || !strings.Contains(stderr, "--refit-rows -1 must not be negative") || !strings.Contains(stderr, "refit.yaml: line 6: refit-rows)") {
		t.Errorf("exit %d, stderr %s", code, stderr)
	}
	// An unset variable is an error when running.
	os.Unsetenv("MVML_TEST_USER")
	code, _, stderr = mvml(t, "refit", "--config", path, "--print-config")
	if code != exitUsage || !strings.Contains(stderr, "line 11: sasl-user: environment variable $MVML_TEST_USER is not set") {
		t.Errorf("exit %d, stderr %s", code, stderr)
	}
}

// A refit configured by its file alone merges a delta on the in-process
// broker and publishes the refit.
func TestRefitFromConfigFile(t *testing.T) {
	dir := t.TempDir()
	specPath, trainCSV := fixture(t, dir, "train.csv", classSpec, 150, 1, nil)
	_, newCSV := fixture(t, dir, "new.csv", classSpec, 60, 5, nil)
	c := kafkatest.Start(t, 1, "stats", "models")
	brokers := strings.Join(c.Brokers, ",")
	base := filepath.Join(dir, "base.mvml")
	mustRun(t, "train", "--input", trainCSV, "--views", specPath, "--model", base, "--brokers", brokers, "--model-topic", "models",
		"--landmarks", "30", "--mode", "identity")
	b := loadModel(t, base)
	views, labels, err := pipeline.LoadLabelled(context.Background(), b.Spec, []string{newCSV}, pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	newStatsReplica(t, "serve-0", base).publish(t, c, views, labels, 0, 60, 0)
	t.Setenv("MVML_TEST_BROKERS", brokers)
	path := writeRefitConfig(t, `brokers: ${MVML_TEST_BROKERS}
stats-topic: stats
model-topic: models
once: true
cold: true
http: ""
`)
	stdout, _ := mustRun(t, "refit", "--config", path)
	got, _ := currentModel(t, c)
	if want := "model " + got.Version + ": lineage " + b.Lineage() + ", 60 rows merged from 1 deltas → model topic models (current)\n"; stdout != want {
		t.Errorf("stdout %q, want %q", stdout, want)
	}
}
