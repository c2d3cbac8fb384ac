package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/mvml/mvml/internal/blasimpl"
)

// buildFacts are what a binary says of its own build: the module's
// version, the commit it was built from, its build tags and BLAS.
type buildFacts struct {
	module, version      string
	commit, commitTime   string
	modified             bool
	tags, goVersion, cgo string
	blas                 string
}

// readBuildFacts reads the facts of the running binary from the build
// information the Go toolchain embeds in it.
func readBuildFacts() buildFacts {
	f := buildFacts{module: "github.com/mvml/mvml", version: "(unknown)", goVersion: runtime.Version(), blas: blasimpl.Name()}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return f
	}
	if info.Main.Path != "" {
		f.module = info.Main.Path
	}
	if info.Main.Version != "" {
		f.version = info.Main.Version
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			f.commit = s.Value
		case "vcs.time":
			f.commitTime = s.Value
		case "vcs.modified":
			f.modified = s.Value == "true"
		case "-tags":
			f.tags = s.Value
		case "CGO_ENABLED":
			f.cgo = s.Value
		}
	}
	return f
}

// write prints the facts, one a line.
func (f buildFacts) write(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "mvml %s (module %s)\n", f.version, f.module)
	switch {
	case f.commit == "":
		b.WriteString("commit   unknown (built without version control information, e.g. -buildvcs=false or outside a clone)\n")
	default:
		fmt.Fprintf(&b, "commit   %s", f.commit)
		if f.commitTime != "" {
			fmt.Fprintf(&b, " (%s)", f.commitTime)
		}
		if f.modified {
			b.WriteString(", with uncommitted changes")
		}
		b.WriteString("\n")
	}
	tags := f.tags
	if tags == "" {
		tags = "none"
	}
	fmt.Fprintf(&b, "tags     %s\n", tags)
	fmt.Fprintf(&b, "go       %s %s/%s", f.goVersion, runtime.GOOS, runtime.GOARCH)
	if f.cgo != "" {
		fmt.Fprintf(&b, ", CGO_ENABLED=%s", f.cgo)
	}
	fmt.Fprintf(&b, "\nBLAS     %s\n", f.blas)
	_, err := io.WriteString(w, b.String())
	return err
}

func runVersion(_ context.Context, a *app, args []string) error {
	fs := newFlagSet("version")
	if err := parseFlags(a, fs, args); err != nil {
		return err
	}
	return readBuildFacts().write(a.stdout)
}
