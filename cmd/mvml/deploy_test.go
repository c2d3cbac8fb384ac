package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/mvml/mvml/schemas"
)

// deployDir holds the Kubernetes manifests and the Dockerfile.
const deployDir = "../../deploy"

// manifest is one YAML document of deploy/, as parsed.
type manifest struct {
	file string
	doc  map[string]any
}

// readManifests parses every YAML document of deploy/ and its
// subdirectories.
func readManifests(t *testing.T) []manifest {
	t.Helper()
	var out []manifest
	err := filepath.WalkDir(deployDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		dec := yaml.NewDecoder(f)
		for {
			var doc map[string]any
			err := dec.Decode(&doc)
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if doc["apiVersion"] == nil || doc["kind"] == nil {
				return fmt.Errorf("%s: a document without apiVersion or kind", path)
			}
			out = append(out, manifest{file: path, doc: doc})
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// at walks a parsed document along keys (map keys, or list indexes as
// ints), nil where there is nothing.
func at(v any, keys ...any) any {
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func str(v any) string { s, _ := v.(string); return s }

// podSpec is the pod template's spec of a workload, nil for other kinds.
func podSpec(m manifest) any {
	switch m.doc["kind"] {
	case "Deployment", "Job":
		return at(m.doc, "spec", "template", "spec")
	case "CronJob":
		return at(m.doc, "spec", "jobTemplate", "spec", "template", "spec")
	}
	return nil
}

// containerArgs are a container's arguments with the $(VAR) references
// Kubernetes expands replaced by the values of the container's env.
func containerArgs(t *testing.T, c any, configMaps map[string]map[string]any) []string {
	t.Helper()
	env := containerEnv(t, c, configMaps)
	var args []string
	for _, a := range asList(at(c, "args")) {
		s, ok := a.(string)
		if !ok {
			t.Errorf("argument %v is not a string", a)
		}
		args = append(args, regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`).ReplaceAllStringFunc(s, func(ref string) string {
			name := ref[2 : len(ref)-1]
			v, ok := env[name]
			if !ok {
				t.Errorf("argument %q refers to $(%s), which the container's env does not set", s, name)
			}
			return v
		}))
	}
	return args
}

// containerEnv is a container's environment: its variables' values,
// literal or from a ConfigMap of deploy/.
func containerEnv(t *testing.T, c any, configMaps map[string]map[string]any) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, e := range asList(at(c, "env")) {
		name := str(at(e, "name"))
		switch ref := at(e, "valueFrom", "configMapKeyRef"); {
		case ref != nil:
			v, ok := configMaps[str(at(ref, "name"))][str(at(ref, "key"))]
			if !ok {
				t.Errorf("env %s refers to ConfigMap %v, not in deploy/", name, ref)
			}
			env[name] = str(v)
		case at(e, "value") != nil:
			env[name] = str(at(e, "value"))
		}
	}
	return env
}

// checkConfigFile lints the --config file of a container, which a volume
// mounts from a ConfigMap of deploy/, as the container's command reads it,
// with the container's environment: it must be ok, with no value left
// unchecked.
func checkConfigFile(t *testing.T, command, path string, spec, c any, configMaps map[string]map[string]any) {
	t.Helper()
	var configMap string
	for _, m := range asList(at(c, "volumeMounts")) {
		if str(at(m, "mountPath")) != filepath.Dir(path) {
			continue
		}
		for _, v := range asList(at(spec, "volumes")) {
			if at(v, "name") == at(m, "name") && at(v, "configMap", "items") == nil {
				configMap = str(at(v, "configMap", "name"))
			}
		}
	}
	text, ok := configMaps[configMap][filepath.Base(path)].(string)
	if !ok {
		t.Fatalf("--config %s is not mounted from a ConfigMap of deploy/ holding %s (without items)", path, filepath.Base(path))
	}
	file := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, value := range containerEnv(t, c, configMaps) {
		t.Setenv(name, value)
	}
	if code, stdout, stderr := mvml(t, "lint", "--command", command, file); code != exitOK || stdout != file+": ok\n" {
		t.Errorf("mvml lint --command %s of ConfigMap %s's %s: exit %d\n%s%s", command, configMap, filepath.Base(path), code, stdout, stderr)
	}
}

func asList(v any) []any { l, _ := v.([]any); return l }

// flagValue is the value of --name in args, given as --name=V or --name V.
func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
		if a == "--"+name && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}

// The manifests of deploy/ parse, and every container runs mvml (the
// image's entry point) with arguments that mvml accepts: its command, and
// every flag parsed by that command's own flag set (mvml COMMAND ARGS
// --help parses ARGS and stops before running); the $(VAR) references
// are expanded from the ConfigMaps of deploy/ first. The roles are there:
// serve (probes on its --http port), refit (2 replicas), the retraining
// CronJob publishing to the model topic, the indexed statistics job
// (--shards equal to its completions); pods run as non-root; the view
// spec parses; a --config file, mounted from a ConfigMap, lints clean.
func TestDeployManifests(t *testing.T) {
	manifests := readManifests(t)
	configMaps := map[string]map[string]any{}
	for _, m := range manifests {
		if m.doc["kind"] == "ConfigMap" {
			data, _ := at(m.doc, "data").(map[string]any)
			configMaps[str(at(m.doc, "metadata", "name"))] = data
		}
	}
	roles := map[string]bool{}
	// topics are the topics every container names, by flag: the roles
	// must meet on the same model and stats topics.
	topics := map[string]map[string]bool{}
	for _, m := range manifests {
		spec := podSpec(m)
		if spec == nil {
			continue
		}
		kind := m.doc["kind"].(string)
		if at(spec, "securityContext", "runAsNonRoot") != true {
			t.Errorf("%s: %s does not run as non-root", m.file, kind)
		}
		containers := append(asList(at(spec, "initContainers")), asList(at(spec, "containers"))...)
		for i, c := range containers {
			name := fmt.Sprintf("%s/%s/%s", filepath.Base(m.file), kind, str(at(c, "name")))
			args := containerArgs(t, c, configMaps)
			if at(c, "command") != nil || str(at(c, "image")) == "" || len(args) == 0 {
				t.Errorf("%s: want an image run with its entry point, mvml, and arguments", name)
				continue
			}
			command := args[0]
			for _, flag := range []string{"stats-topic", "model-topic"} {
				if v, ok := flagValue(args, flag); ok {
					if topics[flag] == nil {
						topics[flag] = map[string]bool{}
					}
					topics[flag][v] = true
				}
			}
			t.Run(name, func(t *testing.T) {
				if !hasCommand(command) {
					t.Fatalf("mvml has no command %q", command)
				}
				code, stdout, stderr := mvml(t, append(slices.Clone(args), "--help")...)
				if code != exitOK || stderr != "" || !strings.HasPrefix(stdout, "Usage: mvml "+command) {
					t.Errorf("mvml %s --help: exit %d, stderr %q; its arguments are not all mvml %s's", strings.Join(args, " "), code, stderr, command)
				}
				if path, ok := flagValue(args, "config"); ok {
					checkConfigFile(t, command, path, spec, c, configMaps)
				}
			})
			if i < len(asList(at(spec, "initContainers"))) {
				continue
			}
			role := command
			switch {
			case kind == "Deployment" && command == "serve":
				checkServeProbes(t, name, c, args)
				checkServeReplica(t, name, args)
			case kind == "Deployment" && command == "refit":
				if n, _ := at(m.doc, "spec", "replicas").(int); n != 2 {
					t.Errorf("%s: %d refitters, want 2 (one active, one standing by)", name, n)
				}
			case kind == "CronJob" && command == "train":
				if v, _ := flagValue(args, "model-topic"); v == "" {
					t.Errorf("%s: the retraining does not publish to a --model-topic", name)
				}
				role = "retrain"
			case kind == "Job" && command == "stats":
				shards, _ := flagValue(args, "shards")
				completions := at(m.doc, "spec", "completions")
				if at(m.doc, "spec", "completionMode") != "Indexed" || shards == "" || fmt.Sprint(completions) != shards {
					t.Errorf("%s: an Indexed job of %v completions with --shards %q; want --shards equal to the completions", name, completions, shards)
				}
			default:
				role = ""
			}
			if role != "" {
				roles[role] = true
			}
		}
	}
	for _, role := range []string{"serve", "refit", "retrain", "stats"} {
		if !roles[role] {
			t.Errorf("deploy/ has no %s workload", role)
		}
	}
	for _, flag := range []string{"stats-topic", "model-topic"} {
		if len(topics[flag]) != 1 {
			t.Errorf("the containers of deploy/ name the --%s %v, want one", flag, slices.Sorted(maps.Keys(topics[flag])))
		}
	}
	views, ok := configMaps["mvml-views"]["views.yaml"].(string)
	if !ok {
		t.Fatal("deploy/ has no view spec (ConfigMap mvml-views, key views.yaml)")
	}
	path := filepath.Join(t.TempDir(), "views.yaml")
	if err := os.WriteFile(path, []byte(views), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := schemas.LoadViewSpec(path); err != nil {
		t.Errorf("the view spec of deploy/: %v", err)
	}
}

// checkServeProbes checks that serve's probes ask /healthz and /readyz on
// the container port its --http flag listens on.
func checkServeProbes(t *testing.T, name string, c any, args []string) {
	t.Helper()
	addr, _ := flagValue(args, "http")
	_, port, _ := strings.Cut(addr, ":")
	var portName string
	for _, p := range asList(at(c, "ports")) {
		if fmt.Sprint(at(p, "containerPort")) == port {
			portName = str(at(p, "name"))
		}
	}
	if port == "" || portName == "" {
		t.Errorf("%s: --http %q is not a container port", name, addr)
	}
	for probe, path := range map[string]string{"livenessProbe": "/healthz", "readinessProbe": "/readyz"} {
		get := at(c, probe, "httpGet")
		if str(at(get, "path")) != path || (fmt.Sprint(at(get, "port")) != port && str(at(get, "port")) != portName) {
			t.Errorf("%s: %s %v, want GET %s on port %s", name, probe, get, path, port)
		}
	}
	if at(c, "resources", "requests") == nil || at(c, "resources", "limits", "memory") == nil {
		t.Errorf("%s: no resource requests or memory limit", name)
	}
}

// checkServeReplica checks that the serve Deployment is a replica of
// Running at scale: it joins late labels and publishes their statistics
// for the refitter, following the model topic, with the join's bounds and
// the delta cadence given.
func checkServeReplica(t *testing.T, name string, args []string) {
	t.Helper()
	for _, flag := range []string{"model-topic", "labels-topic", "label-window", "label-cache-bytes", "stats-topic", "stats-interval", "stats-rows"} {
		if v, _ := flagValue(args, flag); v == "" {
			t.Errorf("%s: no --%s", name, flag)
		}
	}
}

// The Dockerfile builds a static binary in a build stage (CGO_ENABLED=0,
// as CI's make static does) and runs it as a non-root user from a
// distroless or scratch image, with mvml as the entry point the manifests
// rely on.
func TestDockerfile(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(deployDir, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var froms, users []string
	var entry string
	build := false
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "FROM":
			froms = append(froms, f[1])
		case "USER":
			users = append(users, f[1])
		case "ENTRYPOINT":
			entry = strings.Join(f[1:], " ")
		case "RUN":
			build = build || strings.Contains(line, "CGO_ENABLED=0 go build") && strings.Contains(line, "./cmd/mvml")
		}
	}
	runtime := froms[len(froms)-1]
	switch {
	case len(froms) < 2:
		t.Errorf("%d stages, want a build stage and a runtime stage", len(froms))
	case !strings.HasPrefix(runtime, "gcr.io/distroless/static") && runtime != "scratch":
		t.Errorf("runtime stage FROM %s, want distroless static or scratch", runtime)
	}
	if !build {
		t.Error("no RUN CGO_ENABLED=0 go build of ./cmd/mvml")
	}
	if len(users) == 0 || slices.ContainsFunc(users, func(u string) bool { return u == "root" || strings.HasPrefix(u, "0") }) {
		t.Errorf("USER %v, want a non-root user", users)
	}
	if entry != `["/mvml"]` {
		t.Errorf("ENTRYPOINT %s, want [\"/mvml\"]", entry)
	}
	makefile, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	ci, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(makefile), "CGO_ENABLED=0 $(GO) build") || !regexp.MustCompile(`(?m)^make static$`).Match(ci) {
		t.Error("CI does not build the static binary: want make static in .ci/run, a CGO_ENABLED=0 build in the Makefile")
	}
}
