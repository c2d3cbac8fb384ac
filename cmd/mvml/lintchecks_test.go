package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// lint runs serve's own checks and reports every wrong value of a file at
// once, each at its line, in the file's words; serve says the same, one
// error a line, with no Go value dumped.
func TestLintReportsEveryCheck(t *testing.T) {
	text := `brokers: kafka:9092
topic: in
output-topic: scores
dead-letter-topic: dead
model: model.mvml
refit-rows: -10
max-wait: -1s
group: ""
sasl: kerberos
sasl-user: bob
http: "not an addr"
`
	path := writeConfig(t, text)
	code, stdout, stderr := mvml(t, "lint", path)
	want := []string{
		"serve.yaml: line 6: refit-rows: refit-rows -10 must not be negative",
		"serve.yaml: line 7: max-wait: max-wait -1s must not be negative",
		`serve.yaml: line 8: group: group "": a consumer group needs a name (its committed offsets say where a restart resumes)`,
		`serve.yaml: line 9: sasl: sasl "kerberos": want plain, scram-sha-256 or scram-sha-512`,
		`serve.yaml: line 11: http: http "not an addr": missing port in address: want HOST:PORT, such as :8080 or 127.0.0.1:8080 (empty: no HTTP server)`,
	}
	got := strings.TrimSpace(strings.ReplaceAll(stdout, filepath.Dir(path)+string(filepath.Separator), ""))
	if code != exitError || got != strings.Join(want, "\n") {
		t.Errorf("lint: exit %d, stdout:\n%s\nwant:\n%s\nstderr: %s", code, got, strings.Join(want, "\n"), stderr)
	}

	// serve itself refuses the same file with the same five errors, each on
	// a line of its own at its line of the file.
	code, _, stderr = mvml(t, "serve", "--config", path)
	for _, want := range []string{
		"mvml serve: --refit-rows -10 must not be negative (" + path + ": line 6: refit-rows)\n",
		"mvml serve: --max-wait -1s must not be negative (" + path + ": line 7: max-wait)\n",
		"mvml serve: --group \"\": a consumer group needs a name",
		"mvml serve: --sasl \"kerberos\": want plain, scram-sha-256 or scram-sha-512 (" + path + ": line 9: sasl)\n",
		"mvml serve: --http \"not an addr\": missing port in address",
	} {
		if code != exitUsage || !strings.Contains(stderr, want) || strings.Contains(stderr, "{") {
			t.Errorf("serve --config: exit %d, stderr:\n%s\nwant it to contain %q", code, stderr, want)
		}
	}

	// The checks of the join of late labels, all of them too.
	labels := writeConfig(t, "brokers: k:9092\ntopic: in\noutput-topic: out\ndead-letter-topic: dlq\nmodel: m.mvml\nlabels-topic: labels\nlabel-window: 0s\nquality-window: 0\nstats-rows: 10\n")
	code, stdout, _ = mvml(t, "lint", labels)
	want = []string{
		"serve.yaml: line 7: label-window: label-window 0s must be positive",
		"serve.yaml: line 8: quality-window: quality-window 0 must be positive",
		"serve.yaml: line 9: stats-rows: stats-rows tunes the publication of statistics: it needs stats-topic",
	}
	if got := strings.TrimSpace(strings.ReplaceAll(stdout, filepath.Dir(labels)+string(filepath.Separator), "")); code != exitError || got != strings.Join(want, "\n") {
		t.Errorf("lint of the join's keys: exit %d, stdout:\n%s\nwant:\n%s", code, got, strings.Join(want, "\n"))
	}

	// refit: the same checks of the keys they share.
	refit := writeRefitConfig(t, "brokers: k:9092\nstats-topic: s\nmodel-topic: m\ngroup: \"\"\nhttp: localhost\nsasl: gssapi\nsasl-user: bob\n")
	code, stdout, _ = mvml(t, "lint", "--command", "refit", refit)
	for _, want := range []string{"refit.yaml: line 4: group: ", "refit.yaml: line 5: http: ", "refit.yaml: line 6: sasl: "} {
		if code != exitError || !strings.Contains(stdout, want) {
			t.Errorf("lint --command refit: exit %d, stdout:\n%s\nwant %q", code, stdout, want)
		}
	}
}

// lint reports every problem of a tune grid, each at the tune key's line,
// and refit and serve refuse the same grid with the same lines.
func TestLintReportsEveryTuneProblem(t *testing.T) {
	grid := "tune:\n  - lambda=1,1,-2\n  - lamda=0.1\n"
	want := []string{
		"line 4: tune: tune lambda 1 is given twice",
		"line 4: tune: tune lambda -2: want a positive finite number",
		`line 4: tune: tune unknown hyper-parameter "lamda"`,
	}
	refit := writeRefitConfig(t, "brokers: k:9092\nstats-topic: s\nmodel-topic: m\n"+grid)
	serve := writeConfig(t, "brokers: k:9092\ntopic: in\noutput-topic: out\ndead-letter-topic: dlq\nmodel: m.mvml\nrefit-rows: 100\nlabels-topic: labels\n"+
		strings.Replace(grid, "tune:", "folds: 5\ntune:", 1))
	for _, tc := range []struct {
		command, path string
		line          string // of the tune key
	}{{"refit", refit, "line 4"}, {"serve", serve, "line 9"}} {
		code, stdout, _ := mvml(t, "lint", "--command", tc.command, tc.path)
		lines := strings.Split(strings.TrimSpace(stdout), "\n")
		if code != exitError || len(lines) != len(want) {
			t.Fatalf("lint --command %s: exit %d, stdout:\n%s\nwant %d lines", tc.command, code, stdout, len(want))
		}
		for i, w := range want {
			if w = strings.Replace(w, "line 4", tc.line, 1); !strings.Contains(lines[i], w) {
				t.Errorf("lint --command %s: line %d is %q, want it to contain %q", tc.command, i+1, lines[i], w)
			}
		}
		code, _, stderr := mvml(t, tc.command, "--config", tc.path)
		for _, w := range []string{"--tune lambda 1 is given twice (", "--tune lambda -2: want a positive finite number (", `--tune unknown hyper-parameter "lamda"`} {
			if code != exitUsage || !strings.Contains(stderr, "mvml "+tc.command+": "+w) {
				t.Errorf("%s --config: exit %d, stderr:\n%s\nwant it to contain %q", tc.command, code, stderr, w)
			}
		}
	}
}

// lint reports a tab at the line it is on, a file that is missing as that
// file's problem (not as --config's), and goes on with the other files.
func TestLintFilesAndTabs(t *testing.T) {
	dir := t.TempDir()
	tab := filepath.Join(dir, "tab.yaml")
	if err := os.WriteFile(tab, []byte("brokers: k:9092\ntopic: in\n\tgroup: g\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	good := writeConfig(t, goodServeConfig)
	t.Setenv("MVML_TEST_USER", "alice")
	missing := filepath.Join(dir, "missing.yaml")
	code, stdout, stderr := mvml(t, "lint", tab, missing, good)
	want := tab + ": line 3: a tab in the indentation: YAML indents with spaces only\n" +
		missing + ": cannot read it: no such file or directory\n" +
		good + ": ok\n"
	if code != exitError || stdout != want || strings.Contains(stdout+stderr, "--config") || !strings.Contains(stderr, "2 of 3 files have problems") {
		t.Errorf("exit %d, stdout:\n%s\nwant:\n%s\nstderr: %s", code, stdout, want, stderr)
	}
}

// Every required flag missing is reported in one run, each on a line of
// its own, by the command and by lint.
func TestRequiredFlagsReportedTogether(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string // the lines of stderr before the hint, in order
	}{
		{"serve", []string{"serve", "--model", "m.mvml"},
			[]string{"--brokers is required", "--topic is required", "--dead-letter-topic is required"}},
		{"serve, one given", []string{"serve", "--topic", "in"},
			[]string{"--brokers is required", "--dead-letter-topic is required"}},
		{"refit", []string{"refit", "--brokers", "localhost:9092"},
			[]string{"--stats-topic is required", "--model-topic is required"}},
		{"score", []string{"score"},
			[]string{"--input is required", "--model is required", "--output is required"}},
		{"stats", []string{"stats", "--stats-topic", "s"},
			[]string{"--input is required", "--like is required", "--brokers is required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := mvml(t, tt.args...)
			var want strings.Builder
			for _, w := range tt.want {
				want.WriteString("mvml " + tt.args[0] + ": " + w + "\n")
			}
			want.WriteString("Run 'mvml " + tt.args[0] + " --help' for usage.\n")
			if code != exitUsage || stderr != want.String() {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d and\n%s", code, stderr, exitUsage, want.String())
			}
		})
	}

	// lint names every key missing from a file at once.
	path := writeConfig(t, "topic: in\nmodel: m.mvml\noutput-topic: out\n")
	code, stdout, _ := mvml(t, "lint", path)
	want := "serve.yaml: brokers is required\nserve.yaml: dead-letter-topic is required"
	if got := strings.TrimSpace(strings.ReplaceAll(stdout, filepath.Dir(path)+string(filepath.Separator), "")); code != exitError || got != want {
		t.Errorf("lint: exit %d, stdout:\n%s\nwant:\n%s", code, got, want)
	}
}
