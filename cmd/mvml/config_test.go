package main

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/internal/syncbuf"
)

// updateREADME rewrites docs/configuration.md's reference of the configuration keys:
// `make docs`.
var updateREADME = flag.Bool("update-readme", false, "rewrite the configuration reference in docs/configuration.md")

// writeConfig writes a configuration file to a test directory.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "serve.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const goodServeConfig = `# a serve configuration
brokers: [kafka-0:9092, kafka-1:9092]
topic: in
output-topic: scores
dead-letter-topic: dead
model: model.mvml
refit-rows: 1000
refit-interval: 10m
decay: 0.9
contributions: true
sasl: scram-sha-512
sasl-user: ${MVML_TEST_USER}
`

// mvml lint reports every problem of a file with its line and exits 1; a
// good file is ok, and a value from an environment variable that is not
// set is noted, not checked.
func TestLint(t *testing.T) {
	t.Setenv("MVML_TEST_USER", "alice")
	tests := []struct {
		name, text string
		code       int
		want       []string // lines of stdout, in order
	}{
		{"good", goodServeConfig, exitOK, []string{"serve.yaml: ok"}},
		{"empty file", "", exitError, []string{"serve.yaml: brokers is required", "serve.yaml: topic is required", "serve.yaml: dead-letter-topic is required"}},
		{"types and values, every one", `brokers: kafka:9092
topic: in
output-topc: scores
dead-letter-topic: [a, b]
model: model.mvml
refit-rows: many
refit-interval: 10
contributions: yes
batch-size: "100"
decay: {value: 1}
topic: again
max-wait: -x
`, exitError, []string{
			"serve.yaml: line 3: output-topc: unknown key (did you mean output-topic?)",
			"serve.yaml: line 4: dead-letter-topic: found a list, want a string",
			`serve.yaml: line 6: refit-rows: found the string "many", want an integer`,
			`serve.yaml: line 7: refit-interval: invalid value "10": want a duration such as 30s or 10m`,
			`serve.yaml: line 8: contributions: found the string "yes", want true or false`,
			`serve.yaml: line 9: batch-size: found the string "100", want an integer`,
			"serve.yaml: line 10: decay: found a mapping, want a number",
			"serve.yaml: line 11: topic: given twice (first on line 2)",
			`serve.yaml: line 12: max-wait: invalid value "-x": want a duration such as 30s or 10m`,
		}},
		{"a check of serve, at its key's line", strings.Replace(goodServeConfig, "decay: 0.9", "decay: 2", 1), exitError,
			[]string{"serve.yaml: line 9: decay: decay 2 must be in (0, 1]"}},
		{"keys that exclude each other", goodServeConfig + "output-dir: /scores\n", exitError,
			[]string{"serve.yaml: line 4: output-topic: give one of output-topic and output-dir"}},
		{"not a mapping", "- brokers\n- topic\n", exitError, []string{"serve.yaml: line 1: found a list, want a mapping of keys to values"}},
		{"not YAML", "brokers: [a\n", exitError, []string{"serve.yaml: line 1: did not find expected ',' or ']'"}},
		{"a stray dollar", strings.Replace(goodServeConfig, "topic: in", "topic: $in", 1), exitError,
			[]string{`serve.yaml: line 3: topic: "$in": a $ starts a reference ${NAME} to an environment variable (write $$ for a dollar sign)`}},
		{"an unset variable", strings.Replace(goodServeConfig, "${MVML_TEST_USER}", "${MVML_TEST_UNSET}", 1), exitOK, []string{
			"serve.yaml: line 12: sasl-user: environment variable $MVML_TEST_UNSET is not set here: its value is not checked (note)",
			"serve.yaml: ok"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.text)
			code, stdout, stderr := mvml(t, "lint", path)
			got := strings.Split(strings.TrimSpace(strings.ReplaceAll(stdout, filepath.Dir(path)+string(filepath.Separator), "")), "\n")
			if code != tt.code || strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("exit %d, stdout:\n%s\nwant exit %d and\n%s\nstderr: %s", code, strings.Join(got, "\n"), tt.code, strings.Join(tt.want, "\n"), stderr)
			}
			if tt.code != exitOK && !strings.Contains(stderr, "mvml lint: 1 of 1 files have problems") {
				t.Errorf("stderr: %s", stderr)
			}
		})
	}
	for _, args := range [][]string{{"lint"}, {"lint", "--command", "train", "x.yaml"}, {"lint", "--reference", "x.yaml"}} {
		if code, _, _ := mvml(t, args...); code != exitUsage {
			t.Errorf("mvml %s: exit %d, want %d", strings.Join(args, " "), code, exitUsage)
		}
	}
}

// serve --config: the file's values, environment references expanded,
// flags over the file, and --print-config writes the effective
// configuration as YAML with the values from the environment masked.
func TestServeConfigFile(t *testing.T) {
	t.Setenv("MVML_TEST_USER", "alice")
	path := writeConfig(t, goodServeConfig)
	stdout, _ := mustRun(t, "serve", "--config", path, "--topic", "from-flag", "--print-config")
	var got map[string]any
	if err := yaml.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("--print-config wrote no YAML: %v\n%s", err, stdout)
	}
	want := map[string]any{"brokers": "kafka-0:9092,kafka-1:9092", "topic": "from-flag", "refit-rows": 1000, "refit-interval": "10m0s",
		"decay": 0.9, "contributions": true, "sasl-user": "${MVML_TEST_USER}", "group": "mvml", "batch-size": 4096, "http": ":8080"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %v (%T), want %v", k, got[k], got[k], v)
		}
	}
	if strings.Contains(stdout, "alice") || got["config"] != nil || got["print-config"] != nil {
		t.Errorf("--print-config shows the secret or its own flags:\n%s", stdout)
	}
	// Every flag is a key: the effective configuration is a valid file.
	again := writeConfig(t, stdout)
	if code, out, stderr := mvml(t, "lint", again); code != exitOK {
		t.Errorf("lint of --print-config's output: exit %d\n%s%s", code, out, stderr)
	}
	// A flag given overrides the file and is still checked there.
	code, _, stderr := mvml(t, "serve", "--config", writeConfig(t, goodServeConfig+"max-wait: soon\n"), "--max-wait", "1s", "--print-config")
	if code != exitUsage || !strings.Contains(stderr, `line 13: max-wait: invalid value "soon"`) {
		t.Errorf("exit %d, stderr %s; want the file's bad value reported", code, stderr)
	}
	// A check of serve names the file's line.
	code, _, stderr = mvml(t, "serve", "--config", writeConfig(t, strings.Replace(goodServeConfig, "decay: 0.9", "decay: 0", 1)))
	if code != exitUsage || !strings.Contains(stderr, "--decay 0 must be in (0, 1]") || !strings.Contains(stderr, "serve.yaml: line 9: decay)") {
		t.Errorf("exit %d, stderr %s", code, stderr)
	}
	// An unset variable is an error when serving.
	t.Setenv("MVML_TEST_USER", "")
	os.Unsetenv("MVML_TEST_USER")
	code, _, stderr = mvml(t, "serve", "--config", path, "--print-config")
	if code != exitUsage || !strings.Contains(stderr, "line 12: sasl-user: environment variable $MVML_TEST_USER is not set") {
		t.Errorf("exit %d, stderr %s", code, stderr)
	}
	if code, _, stderr := mvml(t, "serve", "--config", filepath.Join(t.TempDir(), "none.yaml")); code != exitError || !strings.Contains(stderr, "none.yaml") {
		t.Errorf("a missing file: exit %d, stderr %s", code, stderr)
	}
}

// A serve configured by its file alone serves against the in-process
// broker.
func TestServeFromConfigFile(t *testing.T) {
	dir := t.TempDir()
	streamCSV, modelPath := trainedForServe(t, dir, 120)
	cluster := kafkatest.Start(t, 1, "records", "scores", "dead")
	cluster.ProduceValues(t, "records", csvMessages(t, streamCSV, false)[:40]...)
	t.Setenv("MVML_TEST_BROKERS", strings.Join(cluster.Brokers, ","))
	path := writeConfig(t, `brokers: ${MVML_TEST_BROKERS}
topic: records
output-topic: scores
dead-letter-topic: dead
model: `+modelPath+`
max-wait: 20ms
http: ""
`)
	srv := startServe("--config", path)
	srv.waitFor(t, "40 scores", func() bool { return len(cluster.ConsumeAll(t, "scores")) >= 40 })
	if code := srv.stop(t); code != exitOK {
		t.Fatalf("exit %d: %s", code, srv.stderr)
	}
}

// docs/configuration.md's reference of the configuration keys is the one the flags
// define; `make docs` rewrites it.
func TestConfigReferenceInREADME(t *testing.T) {
	const readme = "../../docs/configuration.md"
	data, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for _, name := range configuredCommands {
		begin := "<!-- keys of mvml " + name + " --config: written by `make docs` from the flags; do not edit -->\n"
		end := "<!-- end of the keys of mvml " + name + " -->"
		i, j := strings.Index(text, begin), strings.Index(text, end)
		if i < 0 || j < i {
			t.Fatalf("docs/configuration.md lacks the block of the keys of %s between\n%s%s", name, begin, end)
		}
		var b strings.Builder
		c, _ := configuredCommand(name)
		fs, err := commandFlags(t.Context(), c)
		if err != nil {
			t.Fatal(err)
		}
		if err := writeReference(&b, fs); err != nil {
			t.Fatal(err)
		}
		if current := text[i+len(begin) : j]; current != b.String() {
			if !*updateREADME {
				t.Errorf("docs/configuration.md's keys of %s are stale: run `make docs`", name)
				continue
			}
			text = text[:i+len(begin)] + b.String() + text[j:]
		}
	}
	if *updateREADME {
		if err := os.WriteFile(readme, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// No configuration file makes lint, serve or refit panic: every file is
// read or refused with problems, as each command's.
func FuzzLintConfig(f *testing.F) {
	f.Add(goodServeConfig)
	f.Add(goodRefitConfig)
	f.Add("brokers: [a, {b: c}]\ntopic: &x in\ngroup: *x\n")
	f.Add("decay: ${X}\nrefit-rows: $${Y}\n? [a]\n: b\nonce: true\n")
	f.Fuzz(func(t *testing.T, text string) {
		path := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, name := range configuredCommands {
			c, _ := configuredCommand(name)
			problems, _, err := lintFile(t.Context(), c, path)
			if err != nil {
				t.Fatalf("lint of %q as %s's: %v", text, name, err)
			}
			for _, p := range problems {
				if p.msg == "" {
					t.Errorf("lint of %q as %s's: a problem without a message", text, name)
				}
			}
		}
	})
}

// --log-format json: every log line of serve is one JSON object, and the
// periodic progress lines (stderr not a terminal) carry the stable keys.
func TestServeLogsJSON(t *testing.T) {
	dir := t.TempDir()
	streamCSV, modelPath := trainedForServe(t, dir, 120)
	cluster := kafkatest.Start(t, 1, "records", "scores", "dead")
	cluster.ProduceValues(t, "records", append(csvMessages(t, streamCSV, false)[:40], []byte("not json"))...)
	var stdout, stderr syncbuf.Buffer
	a := newApp(&stdout, &stderr)
	a.progressEvery = 20 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- a.run(ctx, []string{"serve", "--brokers", strings.Join(cluster.Brokers, ","), "--topic", "records", "--output-topic", "scores",
			"--dead-letter-topic", "dead", "--model", modelPath, "--max-wait", "20ms", "--http", "", "--log-format", "json"})
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(stderr.String(), `"rows":41,`) {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("no progress line with 41 rows:\n%s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
	var progress map[string]any
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		if strings.HasPrefix(line, "in 41 = ") {
			continue // the summary, not a log line
		}
		var entry map[string]any
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Fatalf("a log line that is not JSON: %s", line)
		}
		if entry["msg"] == "serve" && entry["rows"] == 41.0 {
			progress = entry
		}
	}
	for _, key := range []string{"rows", "scored", "dead_lettered", "not_committed", "lag", "model_version", "elapsed"} {
		if _, ok := progress[key]; !ok {
			t.Errorf("the progress line lacks %s: %v", key, progress)
		}
	}
	for _, bad := range [][]string{{"serve", "--log-format", "xml"}, {"score", "--log-format", ""}} {
		if code, _, stderr := mvml(t, bad...); code != exitUsage || !strings.Contains(stderr, "want text or json") {
			t.Errorf("mvml %v: exit %d, %s", bad, code, stderr)
		}
	}
}
