package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/mvml/mvml/internal/blasimpl"
	"github.com/mvml/mvml/internal/linedoc"
)

func main() {
	os.Exit(runProcess(os.Args[1:], os.Stdout, os.Stderr, os.Exit))
}

// Exit statuses.
const (
	exitOK    = 0
	exitError = 1 // the job failed
	exitUsage = 2 // the command line is wrong
)

// app is what every command shares: where output goes and how the user is
// kept informed.
type app struct {
	stdout, stderr io.Writer
	log            *slog.Logger
	// logMu guards log against the signal watcher (app.logger) while a
	// command sets it from its flags.
	logMu sync.Mutex
	// tty is set when stderr is a terminal: progress bars replace the
	// informational log lines there.
	tty bool
	// progressEvery is how often a long job logs how far it got when
	// stderr is not a terminal.
	progressEvery time.Duration
	// configMode says whether a command that reads a configuration file
	// runs, or only checks it (lint) or hands its flags over (flags);
	// config is the file it read.
	configMode configMode
	config     *configFile
	flags      *flag.FlagSet
}

// defaultProgressEvery keeps a job run by a scheduler visibly alive
// without flooding its log.
const defaultProgressEvery = 5 * time.Second

// newApp is the program writing to stdout and stderr, informing the user
// as suits stderr: a terminal or a log.
func newApp(stdout, stderr io.Writer) *app {
	a := &app{stdout: stdout, stderr: stderr, tty: isTerminal(stderr), progressEvery: defaultProgressEvery}
	a.log = newLogger(stderr, "text", a.tty)
	return a
}

// newLogger logs to w in format, text or json: on a terminal only
// warnings and errors (progress bars show the rest), otherwise from
// informational lines on.
func newLogger(w io.Writer, format string, tty bool) *slog.Logger {
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	if tty {
		opts.Level = slog.LevelWarn
	}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

type command struct {
	name, synopsis, summary string
	run                     func(ctx context.Context, a *app, args []string) error
}

func commands() []command {
	return []command{
		{"demo", "mvml demo [--rows N] [--classes C] [--data-seed S] [--keep DIR] [--kafka=false] [fit flags]",
			"train and score on a generated multi-view data set, then serve it through Kafka on an in-process broker (no files, no network)", runDemo},
		{"broker", "mvml broker [--listen HOST:PORT] [--topics NAME[:N],...] [--partitions N] [--model-topics NAMES]",
			"run the demo's in-process Kafka broker alone until interrupted, for kcat and mvml processes to share: a development broker, in memory", runBroker},
		{"train", "mvml train --input FILE... | --brokers HOST:PORT --topic T [--from TIME] [--to TIME] --views SPEC | --like BASE.mvml --model OUT.mvml | --model-dir DIR | --brokers HOST:PORT --model-topic M [fit flags]",
			"train a model on labelled files or a time range of a Kafka topic, and write it atomically or publish it", runTrain},
		{"score", "mvml score --input FILE... --model M.mvml --output OUT.parquet|OUT.jsonl|- [--on-error fail|skip] [--rejects F] [--contributions]",
			"score files into Parquet or JSON Lines, in input order", runScore},
		{"eval", "mvml eval --input FILE... --model M.mvml [--json]",
			"score labelled files and print the metrics", runEval},
		{"cv", "mvml cv --input FILE... --views SPEC --folds K --seed S [fit flags] [--grid NAME=V1,V2...] [--json]",
			"estimate performance by (nested) cross-validation", runCV},
		{"stats", "mvml stats --input FILE... --like BASE.mvml --brokers HOST:PORT --stats-topic S [--shard I/N | --shards N] [--delta-rows R]",
			"publish the statistics of labelled files on BASE's features to a stats topic, one share of the files per job of an indexed job, for mvml refit --once to merge into a model like train --like BASE on all the files", runStats},
		{"serve", "mvml serve --brokers HOST:PORT --topic IN --output-topic OUT|--output-dir DIR --dead-letter-topic DLQ --model M.mvml | --model-topic M [--labels-topic L] [--stats-topic S | --refit-rows N [--model-dir DIR]]",
			"score a Kafka topic as a consumer group, join labels that come later, refit on labels or publish their statistics for mvml refit, and swap the model", runServe},
		{"refit", "mvml refit --brokers HOST:PORT --stats-topic S --model-topic M [--refit-rows N] [--refit-interval D] [--decay F] [--model-dir DIR] [--group G] [--cold] [--once] [--config refit.yaml]",
			"merge the statistics deltas of the serve replicas, refit the current model of the model topic and publish it (one refitter of a group active, the others standby)", runRefit},
		{"models", "mvml models list [--format table|json] | get VERSION|current --output F | promote VERSION | rollback  (--brokers HOST:PORT --model-topic M | --model-dir DIR)",
			"list the versions of a model store and get their files, or change the model every replica serves: promote a version, roll back to the one current before", runModels},
		{"inspect", "mvml inspect --model M.mvml [--format text|json] [--plot OUT.png] [--plot-trace OUT.png]",
			"print a model's views, kernels, weights and view-pair blocks of Ã", runInspect},
		{"lint", "mvml lint [--command serve|refit] FILE... | --reference",
			"check configuration files (unknown keys, wrong types, invalid values, by line) without running anything", runLint},
		{"wait", "mvml wait --brokers HOST:PORT [--topics T1,T2] | --http ADDR METRIC>=V... [--timeout D]",
			"wait until the brokers answer, or until the /metrics of a running mvml serve or refit reach values, for scripts to go on only once what they need is there", runWait},
		{"version", "mvml version  (or mvml --version)",
			"print the module version, the commit, the build tags, the Go toolchain and the BLAS of this binary", runVersion},
	}
}

// usageError marks a wrong command line: exit status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// run is the whole program: it returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return newApp(stdout, stderr).run(ctx, args)
}

func (a *app) run(ctx context.Context, args []string) int {
	stderr := a.stderr
	if len(args) == 0 {
		printUsage(stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "help", "-h", "--help", "-help":
		printUsage(a.stdout)
		return exitOK
	case "--version", "-version":
		name, args = "version", append([]string{"version"}, args[1:]...)
	}
	for _, c := range commands() {
		if c.name != name {
			continue
		}
		err := c.run(ctx, a, args[1:])
		switch {
		case err == nil:
			return exitOK
		case errors.Is(err, flag.ErrHelp):
			return exitOK
		}
		// Every wrong setting on a line of its own, at its line of the
		// configuration file when the file gave it.
		var b strings.Builder
		for _, e := range splitErrors(err) {
			e = a.config.locate(e)
			if ctx.Err() != nil && !errors.As(e, new(usageError)) {
				fmt.Fprintf(&b, "mvml %s: interrupted: %v\n", name, e)
				continue
			}
			fmt.Fprintf(&b, "mvml %s: %v\n", name, e)
		}
		if errors.As(err, new(usageError)) {
			fmt.Fprintf(&b, "Run 'mvml %s --help' for usage.\n", name)
			io.WriteString(stderr, b.String())
			return exitUsage
		}
		io.WriteString(stderr, b.String())
		return exitError
	}
	// One line and a hint: the whole usage would push the error off the
	// screen.
	fmt.Fprintf(stderr, "mvml: unknown command %q%s\nRun 'mvml help' for the commands.\n", name, suggestCommand(name))
	return exitUsage
}

// suggestCommand proposes the command closest to a misspelt one, or the
// flag of mvml a dashed word may mean.
func suggestCommand(name string) string {
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	best := linedoc.Suggest(strings.TrimLeft(name, "-"), names)
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", best)
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "mvml — Multi-View Metric Learning (Huusari, Kadri, Capponi, AISTATS 2018) for data pipelines")
	fmt.Fprintln(w, "\nUsage:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %s\n        %s\n", c.synopsis, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'mvml COMMAND --help' for the flags of a command.")
	fmt.Fprintf(w, "BLAS: %s\n", blasimpl.Name())
}

// isTerminal reports whether w is a character device, such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}
