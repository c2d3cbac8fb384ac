package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"
)

// configuredCommands are the commands that read a configuration file
// (--config), whose files lint checks.
var configuredCommands = []string{"serve", "refit"}

func runLint(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("lint")
	name := fs.String("command", "serve", "the `COMMAND` whose configuration files these are: "+strings.Join(configuredCommands, ", "))
	reference := fs.Bool("reference", false, "write the command's keys, their types, defaults and meanings as a Markdown table instead")
	if err := parseFlagsOnly(a, fs, args); err != nil {
		return err
	}
	c, ok := configuredCommand(*name)
	if !ok {
		return usagef("--command %q: want one of %s", *name, strings.Join(configuredCommands, ", "))
	}
	if *reference {
		if fs.NArg() > 0 {
			return usagef("--reference takes no file")
		}
		keys, err := commandFlags(ctx, c)
		if err != nil {
			return err
		}
		return writeReference(a.stdout, keys)
	}
	if fs.NArg() == 0 {
		return usagef("no file to check")
	}
	bad := 0
	for _, path := range fs.Args() {
		problems, notes, err := lintFile(ctx, c, path)
		if err != nil {
			return err
		}
		for _, p := range notes {
			fmt.Fprintf(a.stdout, "%s: %s (note)\n", path, p)
		}
		for _, p := range problems {
			fmt.Fprintf(a.stdout, "%s: %s\n", path, p)
		}
		if len(problems) > 0 {
			bad++
		} else {
			fmt.Fprintf(a.stdout, "%s: ok\n", path)
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d files have problems", bad, fs.NArg())
	}
	return nil
}

func configuredCommand(name string) (command, bool) {
	if !slices.Contains(configuredCommands, name) {
		return command{}, false
	}
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// quietApp runs a command for lint: nothing it would write is shown.
func quietApp(mode configMode) *app {
	return &app{stdout: io.Discard, stderr: io.Discard, log: slog.New(slog.DiscardHandler), configMode: mode}
}

// lintFile checks the configuration file at path as c would read it with
// no other flag: its keys one by one, then c's own checks of its
// settings. It returns the problems and the values it could not check.
func lintFile(ctx context.Context, c command, path string) (problems, notes []configProblem, err error) {
	if _, err := os.Stat(path); err != nil {
		// A file that is not there is this file's problem, not the
		// command's: the others are still checked.
		var pathErr *fs.PathError
		if errors.As(err, &pathErr) {
			err = pathErr.Err
		}
		return []configProblem{{msg: fmt.Sprintf("cannot read it: %v", err)}}, nil, nil
	}
	la := quietApp(configLint)
	err = c.run(ctx, la, []string{"--config", path})
	if la.config != nil {
		notes = la.config.notes
	}
	var ce *configError
	switch {
	case errors.Is(err, errConfigChecked):
		return nil, notes, nil
	case errors.As(err, &ce):
		return ce.problems, notes, nil
	case errors.As(err, new(usageError)):
		// The checks of the command, every one: each at the line of a key
		// it names, in the file's words (keys, not --flags).
		for _, e := range splitErrors(err) {
			p, ok := la.config.problemOf(usageError{e})
			if !ok {
				p = configProblem{msg: e.Error()}
			}
			p.msg = flagMention.ReplaceAllString(p.msg, "$1")
			problems = append(problems, p)
		}
		slices.SortStableFunc(problems, func(a, b configProblem) int { return a.line - b.line })
		return problems, notes, nil
	}
	return nil, nil, err
}

// commandFlags returns the flag set of configured command c, the keys of
// its files.
func commandFlags(ctx context.Context, c command) (*flag.FlagSet, error) {
	la := quietApp(configReference)
	if err := c.run(ctx, la, nil); !errors.Is(err, errConfigChecked) {
		return nil, fmt.Errorf("the keys of %s: %v", c.name, err)
	}
	return la.flags, nil
}

// writeReference writes the keys of fs as a Markdown table: key, type,
// default and meaning, as the flags define them.
func writeReference(w io.Writer, fs *flag.FlagSet) error {
	var b strings.Builder
	b.WriteString("| key | type | default | meaning |\n|---|---|---|---|\n")
	fs.VisitAll(func(fl *flag.Flag) {
		if slices.Contains(configOnlyFlags, fl.Name) {
			return
		}
		_, usage := flag.UnquoteUsage(fl)
		def := fl.DefValue
		if def != "" {
			def = "`" + def + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", fl.Name, keyType(fl), def, strings.ReplaceAll(usage, "|", `\|`))
	})
	_, err := io.WriteString(w, b.String())
	return err
}

// keyType names the type of a key's value.
func keyType(fl *flag.Flag) string {
	switch flagType(fl).(type) {
	case bool:
		return "boolean"
	case int, int64, uint, uint64:
		return "integer"
	case float64:
		return "number"
	case time.Duration:
		return "duration"
	case string:
		if listFlag(fl) {
			return "string or list"
		}
		return "string"
	}
	if isRepeatable(fl) {
		return "list"
	}
	return "string"
}
