package main

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mvml/mvml/internal/blasimpl"
)

// mvml version and mvml --version say the same: the module, its version,
// the commit (or that it is not known), the build tags, the toolchain and
// the BLAS; the built binary says the same of itself.
func TestVersion(t *testing.T) {
	out, _ := mustRun(t, "version")
	dashed, _ := mustRun(t, "--version")
	if out != dashed {
		t.Errorf("version:\n%s\n--version:\n%s", out, dashed)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^mvml \S+ \(module github\.com/mvml/mvml\)$`),
		regexp.MustCompile(`(?m)^commit   ([0-9a-f]{40}|unknown)`),
		regexp.MustCompile(`(?m)^tags     \S+`),
		regexp.MustCompile(`(?m)^go       go1\.\d+`),
		regexp.MustCompile(`(?m)^BLAS     ` + regexp.QuoteMeta(blasimpl.Name()) + `$`),
	} {
		if !want.MatchString(out) {
			t.Errorf("version lacks %v:\n%s", want, out)
		}
	}
	if code, _, stderr := mvml(t, "version", "extra"); code != exitUsage || !strings.Contains(stderr, `unexpected argument "extra"`) {
		t.Errorf("version extra: exit %d, %q", code, stderr)
	}

	// The binary as built: no tags, the module of the build.
	bin := buildMVML(t)
	built, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(built), "(module github.com/mvml/mvml)\n") || !strings.Contains(string(built), "\ntags     none\n") {
		t.Errorf("the built binary's --version:\n%s", built)
	}
}

// An unknown command is one line with the command meant, if any is
// close, and where to find the commands: not the whole usage. A misspelt
// flag is answered with the flag meant.
func TestUnknownCommandAndFlag(t *testing.T) {
	tests := []struct {
		args   []string
		stderr string
	}{
		{[]string{"serv"}, "mvml: unknown command \"serv\" (did you mean serve?)\nRun 'mvml help' for the commands.\n"},
		{[]string{"frobnicate"}, "mvml: unknown command \"frobnicate\"\nRun 'mvml help' for the commands.\n"},
		{[]string{"-version"}, ""},
		{[]string{"train", "--lamda", "1"}, "mvml train: flag provided but not defined: -lamda (did you mean --lambda?)\nRun 'mvml train --help' for usage.\n"},
		{[]string{"serve", "--max-wiat", "1s"}, "mvml serve: flag provided but not defined: -max-wiat (did you mean --max-wait?)\nRun 'mvml serve --help' for usage.\n"},
	}
	for _, tt := range tests {
		code, stdout, stderr := mvml(t, tt.args...)
		if tt.stderr == "" {
			if code != exitOK || !strings.HasPrefix(stdout, "mvml ") {
				t.Errorf("mvml %s: exit %d, stdout %q", strings.Join(tt.args, " "), code, stdout)
			}
			continue
		}
		if code != exitUsage || stderr != tt.stderr || stdout != "" {
			t.Errorf("mvml %s: exit %d, stderr %q, stdout %q; want exit 2 and %q", strings.Join(tt.args, " "), code, stderr, stdout, tt.stderr)
		}
	}
}

// inspect explains "converged false": the default fit stops at --max-iter
// before --tol, and the model is usable; a fit that met --tol gets no
// such note.
func TestInspectExplainsConvergence(t *testing.T) {
	dir := t.TempDir()
	spec, data := fixture(t, dir, "data.csv", classSpec, 200, 3, nil)
	capped := filepath.Join(dir, "capped.mvml")
	mustRun(t, "train", "--input", data, "--views", spec, "--model", capped, "--landmarks", "20", "--max-iter", "2", "--tol", "1e-12")
	out, _ := mustRun(t, "inspect", "--model", capped)
	for _, want := range []string{
		"converged false (heads 1 (class 1), 2 (class 2), 3 (class 3)): the fit ran all --max-iter 2 iterations without meeting --tol 1e-12",
		"the last iteration lowered the objective by ",
		"The model is complete and usable",
		"train again with a larger --max-iter (e.g. 10) or accept a looser --tol",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect lacks %q:\n%s", want, out)
		}
	}
	loose := filepath.Join(dir, "loose.mvml")
	mustRun(t, "train", "--input", data, "--views", spec, "--model", loose, "--landmarks", "20", "--tol", "0.5")
	if out, _ := mustRun(t, "inspect", "--model", loose); strings.Contains(out, "converged false") || !strings.Contains(out, "true") {
		t.Errorf("a converged fit:\n%s", out)
	}
}
