package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mvml/mvml/internal/kafkatest"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/registry"
)

// servedVersion is the model version a running serve reports in
// /metrics, "" while it cannot be read.
func servedVersion(base string) string {
	code, body := httpGet(base + "/metrics")
	if code != 200 {
		return ""
	}
	m := regexp.MustCompile(`mvml_model_info\{version="([0-9a-f]+)"\} 1`).FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return m[1]
}

// startReplica starts a serve replica with an HTTP server on a free port
// and returns it with the base URL of that server.
func startReplica(t *testing.T, args ...string) (*serveRun, string) {
	t.Helper()
	srv := startServe(append(args, "--http", "127.0.0.1:0")...)
	var base string
	srv.waitFor(t, "the HTTP address", func() bool {
		m := regexp.MustCompile(`ready=(http://\S+)/readyz`).FindStringSubmatch(srv.stderr.String())
		if m != nil {
			base = m[1]
		}
		return m != nil
	})
	return srv, base
}

// loadModelBytes decodes a model file's bytes.
func loadModelBytes(t *testing.T, file string) *model.Model {
	t.Helper()
	m, err := model.Decode(strings.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// trainedVersion is the version `mvml train` printed.
func trainedVersion(out string) string { return strings.TrimSuffix(strings.Fields(out)[1], ":") }

// The registry commands on a model topic and on a model directory: list
// shows every version with its metadata and the current one; get writes
// a version's file byte for byte; promote and rollback take every serve
// replica to the named version within 10 s (two replicas of one group,
// following the topic or the directory's current.mvml); a rollback goes
// back along the pointer's history, one version a time, and refuses at
// its start; an unknown version is refused by name.
func TestModelsCommands(t *testing.T) {
	dir := t.TempDir()
	specPath, trainCSV := fixture(t, dir, "train.csv", classSpec, 150, 1, nil)
	_, newCSV := fixture(t, dir, "new.csv", classSpec, 150, 5, nil)
	const swapWithin = 10 * time.Second
	for _, tc := range []struct {
		name string
		// store are the flags naming the store, follow those of serve
		// following it; publish are those of train publishing to it, and
		// of the file it writes of the model published (file, or in the
		// store).
		store, follow func(c *kafkatest.Cluster, storeDir string) []string
		publish       func(c *kafkatest.Cluster, storeDir, file string) []string
		published     func(storeDir, file, version string) string
	}{
		{"model topic",
			func(c *kafkatest.Cluster, _ string) []string {
				return []string{"--brokers", strings.Join(c.Brokers, ","), "--model-topic", "models"}
			},
			func(_ *kafkatest.Cluster, _ string) []string { return []string{"--model-topic", "models"} },
			func(c *kafkatest.Cluster, _, file string) []string {
				return []string{"--brokers", strings.Join(c.Brokers, ","), "--model-topic", "models", "--model", file}
			},
			func(_, file, _ string) string { return file }},
		{"model dir",
			func(_ *kafkatest.Cluster, storeDir string) []string { return []string{"--model-dir", storeDir} },
			func(_ *kafkatest.Cluster, storeDir string) []string {
				return []string{"--model", filepath.Join(storeDir, registry.CurrentModel), "--reload-interval", "100ms"}
			},
			func(_ *kafkatest.Cluster, storeDir, _ string) []string { return []string{"--model-dir", storeDir} },
			func(storeDir, _, version string) string { return filepath.Join(storeDir, version+".mvml") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			work := t.TempDir()
			storeDir := filepath.Join(work, "store")
			cluster := kafkatest.Start(t, 2, "records", "scores", "dead")
			cluster.CreateTopic(t, "models", 1)
			store := tc.store(cluster, storeDir)
			out, _ := mustRun(t, append([]string{"train", "--input", trainCSV, "--views", specPath, "--landmarks", "30"},
				tc.publish(cluster, storeDir, filepath.Join(work, "first.mvml"))...)...)
			v1 := trainedVersion(out)
			first := tc.published(storeDir, filepath.Join(work, "first.mvml"), v1)
			out, _ = mustRun(t, append([]string{"train", "--input", newCSV, "--like", first, "--max-iter", "3"},
				tc.publish(cluster, storeDir, filepath.Join(work, "second.mvml"))...)...)
			v2 := trainedVersion(out)

			serve := append([]string{"--brokers", strings.Join(cluster.Brokers, ","), "--topic", "records", "--output-topic", "scores",
				"--dead-letter-topic", "dead", "--max-wait", "20ms"}, tc.follow(cluster, storeDir)...)
			var bases []string
			for range 2 {
				srv, base := startReplica(t, serve...)
				defer func() {
					if code := srv.stop(t); code != exitOK {
						t.Errorf("a replica exited %d: %s", code, srv.stderr)
					}
				}()
				bases = append(bases, base)
			}
			// everyReplica waits until both replicas serve version, and
			// says how long they took.
			everyReplica := func(version, after string) {
				t.Helper()
				start := time.Now()
				for _, base := range bases {
					for servedVersion(base) != version {
						if time.Since(start) > swapWithin {
							t.Fatalf("%s: replica %s serves %q, not %s, %v after %s", tc.name, base, servedVersion(base), version, swapWithin, after)
						}
						time.Sleep(10 * time.Millisecond)
					}
				}
				t.Logf("%s: both replicas serve %s %v after %s", tc.name, version, time.Since(start).Round(time.Millisecond), after)
			}
			everyReplica(v2, "the start")

			out, _ = mustRun(t, append([]string{"models", "list"}, store...)...)
			rows := map[string]string{}
			for _, line := range strings.Split(out, "\n") {
				f := strings.Fields(line)
				switch {
				case len(f) > 1 && f[0] == "*":
					rows[f[1]] = line
				case len(f) > 1:
					rows[f[0]] = line
				}
			}
			if row := rows[v2]; !strings.HasPrefix(row, "*") || !strings.Contains(row, " 150 ") || !strings.Contains(row, "(train)") || !strings.Contains(row, v1) {
				t.Errorf("list's row of %s, the current model, rows 150, published by train, parent %s: %q\n%s", v2, v1, row, out)
			}
			if row := rows[v1]; strings.HasPrefix(row, "*") || !strings.Contains(row, " 150 ") {
				t.Errorf("list's row of %s: %q\n%s", v1, row, out)
			}
			if !strings.Contains(out, "current: "+v2+" (publish by ") || !strings.Contains(out, "a rollback makes "+v1+" current again") {
				t.Errorf("list's pointer line:\n%s", out)
			}
			out, _ = mustRun(t, append([]string{"models", "list", "--format", "json"}, store...)...)
			var listed struct {
				Versions []struct {
					Version, Parent string
					Rows            int
					Objective       *float64 `json:"objective_per_row"`
					Publisher       registry.Publisher
					Created         time.Time
					Current         bool
				}
				Current registry.Pointer
			}
			if err := json.Unmarshal([]byte(out), &listed); err != nil {
				t.Fatalf("list --format json: %v\n%s", err, out)
			}
			if len(listed.Versions) != 2 || listed.Versions[0].Version != v1 || listed.Versions[1].Version != v2 || !listed.Versions[1].Current ||
				listed.Versions[0].Current || listed.Versions[1].Parent != v1 || listed.Versions[0].Objective == nil || listed.Versions[0].Rows != 150 ||
				listed.Versions[0].Publisher.Role != registry.RoleTrain || listed.Versions[0].Created.IsZero() || listed.Current.Version != v2 {
				t.Errorf("list --format json:\n%s", out)
			}

			got := filepath.Join(work, "got.mvml")
			out, _ = mustRun(t, append([]string{"models", "get", v1, "--output", got}, store...)...)
			want, err := os.ReadFile(first)
			if err != nil {
				t.Fatal(err)
			}
			if data, err := os.ReadFile(got); err != nil || !bytes.Equal(data, want) {
				t.Errorf("models get %s: %d bytes (%v), want the %d bytes of the file train wrote", v1, len(data), err, len(want))
			}
			if !strings.Contains(out, "model "+v1+": ") || !strings.Contains(out, "→ "+got) {
				t.Errorf("get says %q", out)
			}
			if out, _ = mustRun(t, append([]string{"models", "get", "current", "--output", "-"}, store...)...); loadModelBytes(t, out).Version != v2 {
				t.Errorf("get current wrote a model other than %s, the current one", v2)
			}

			out, _ = mustRun(t, append([]string{"models", "promote", v1}, store...)...)
			if want := "model " + v1 + " is current (promoted; a rollback makes " + v2 + " current again)"; !strings.Contains(out, want) {
				t.Errorf("promote says %q, want %q", out, want)
			}
			everyReplica(v1, "promote")
			out, _ = mustRun(t, append([]string{"models", "rollback"}, store...)...)
			if want := "model " + v2 + " is current again (rolled back; a further rollback makes " + v1 + " current)"; !strings.Contains(out, want) {
				t.Errorf("rollback says %q, want %q", out, want)
			}
			everyReplica(v2, "rollback")
			mustRun(t, append([]string{"models", "rollback"}, store...)...)
			everyReplica(v1, "the second rollback")
			for _, bad := range []struct {
				args []string
				want string
			}{
				{[]string{"rollback"}, "mvml models: roll back: current model " + v1 + ": no version was current before it: nothing to roll back to"},
				{[]string{"promote", "0123456789ab"}, "promote 0123456789ab: "},
				{[]string{"get", "0123456789ab", "--output", got}, "model 0123456789ab: no such version in the model store"},
			} {
				code, _, stderr := mvml(t, append(append([]string{"models"}, bad.args...), store...)...)
				if code != exitError || !strings.Contains(stderr, bad.want) {
					t.Errorf("models %v: exit %d, %q; want %d and %q", bad.args, code, stderr, exitError, bad.want)
				}
			}
			everyReplica(v1, "the refusals")
		})
	}
}

// Wrong command lines of mvml models are usage errors.
func TestModelsUsage(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "which command? list, get VERSION, promote VERSION or rollback"},
		{[]string{"remove", "--model-dir", dir}, `unknown command "remove"`},
		{[]string{"list"}, "give --model-topic (with --brokers) or --model-dir"},
		{[]string{"list", "--model-dir", dir, "--model-topic", "m"}, "give --model-topic (with --brokers) or --model-dir"},
		{[]string{"list", "--model-topic", "m"}, "--model-topic needs --brokers"},
		{[]string{"list", "--model-dir", dir, "--brokers", "localhost:9092"}, "--brokers reaches a --model-topic"},
		{[]string{"list", "--model-dir", dir, "--format", "yaml"}, `--format "yaml": want table or json`},
		{[]string{"promote", "--model-dir", dir}, "promote needs the VERSION"},
		{[]string{"promote", "a", "b", "--model-dir", dir}, `unexpected argument "b"`},
		{[]string{"rollback", "--model-dir", dir, "--format", "json"}, "--format is list's"},
		{[]string{"get", "abc", "--model-dir", dir}, "--output is required"},
		{[]string{"promote", "abc", "--model-dir", dir, "--output", "x"}, "--output is get's"},
	} {
		code, _, stderr := mvml(t, append([]string{"models"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("models %v: exit %d, %q; want %d and %q", tc.args, code, stderr, exitUsage, tc.want)
		}
	}
	for _, args := range [][]string{{"--help"}, {"rollback", "-h"}, {"get", "abc", "--help"}} {
		code, stdout, stderr := mvml(t, append([]string{"models"}, args...)...)
		if code != exitOK || stderr != "" || !strings.Contains(stdout, "make current again the version that was current before the present one") ||
			!strings.Contains(stdout, "a second rollback goes one further back") || !strings.Contains(stdout, "--model-topic TOPIC") {
			t.Errorf("models %v: exit %d, stderr %q, help %q", args, code, stderr, stdout)
		}
	}
	code, _, stderr := mvml(t, "models", "list", "--model-dir", filepath.Join(dir, "missing"))
	if code != exitError || !strings.Contains(stderr, "does not exist") {
		t.Errorf("a missing store: exit %d, %q", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "missing")); err == nil {
		t.Error("models list created the store it was to read")
	}
}
