package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mvml/mvml/pipeline"
	"github.com/mvml/mvml/registry"
	"github.com/mvml/mvml/sink"
)

// modelsHelp says what each registry command does; rollback's meaning in
// particular.
const modelsHelp = `Commands:
  list                    every version stored, oldest first: when it was created, its training rows, the fit's
                          final objective per row, who published it (host and role) and the version it continues;
                          * marks the current one (--format json for scripts)
  get VERSION --output F  write the model file of VERSION (or of the current model: current) to F ('-': standard
                          output), byte for byte as it was published, its SHA-256 checked against its manifest
  promote VERSION         make VERSION the current model, after checking it is stored whole: every mvml serve
                          following the store (--model-topic M, or --model DIR/current.mvml --reload-interval D)
                          serves it within seconds
  rollback                make current again the version that was current before the present one, taken from
                          the current pointer's history (the versions current before it, latest first, up to
                          64); a second rollback goes one further back, and promote undoes a rollback

A refitter (mvml refit) goes on refitting the current model's lineage: its next refit is published over a
promoted or rolled-back model. Scale it to 0 first to keep such a model in service.`

func runModels(ctx context.Context, a *app, args []string) error {
	sub := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	}
	fs := newFlagSet("models")
	kf := registerKafka(fs, "Kafka bootstrap `HOST:PORT` list, comma-separated, of the --model-topic")
	topic := fs.String("model-topic", "", "model `TOPIC` (one partition, compacted) to manage, with --brokers")
	dir := fs.String("model-dir", "", "model store `DIR` to manage instead (VERSION.mvml, current.mvml)")
	format := fs.String("format", "table", "with list, the output `FORMAT`: table or json")
	output := fs.String("output", "", "with get, the `FILE` to write the model to; '-' means standard output")
	version, err := parseModelsArgs(a, fs, sub, args)
	if err != nil {
		return err
	}
	given := givenFlags(fs)
	switch {
	case given["format"] && sub != "list":
		return usagef("--format is list's")
	case given["output"] != (sub == "get"):
		if sub == "get" {
			return usagef("--output is required")
		}
		return usagef("--output is get's")
	case sub == "list" && *format != "table" && *format != "json":
		return usagef("--format %q: want table or json", *format)
	case sub == "get" && *dir != "" && *output != "-" && pipeline.InDir(*output, *dir):
		// current.mvml written there would disagree with current.json,
		// and a version's file would no longer match its manifest.
		return usagef("--output %s is in the model store --model-dir %s, which only the store writes: write it elsewhere, or make a version current with mvml models promote", *output, *dir)
	}
	if sub == "get" && *output != "-" {
		if err := pipeline.CheckFiles(nil, []pipeline.File{{Role: "output", Path: *output}}); err != nil {
			return err
		}
	}
	store, err := openRegistry(ctx, a, kf, *topic, *dir, sub)
	if err != nil {
		return err
	}
	defer store.Close(context.WithoutCancel(ctx))
	meta := registry.Meta{Role: registry.RoleOperator, Host: operatorName()}
	switch sub {
	case "list":
		l, err := store.List(ctx)
		if err != nil {
			return err
		}
		if *format == "json" {
			return writeListingJSON(a.stdout, l)
		}
		return writeListing(a.stdout, l)
	case "get":
		return getModel(ctx, a, store, version, *output)
	case "promote":
		p, moved, err := store.Promote(ctx, version, meta)
		switch {
		case err != nil:
			return err
		case !moved:
			fmt.Fprintf(a.stdout, "model %s was current already\n", p.Version)
		case len(p.History) == 0:
			fmt.Fprintf(a.stdout, "model %s is current (promoted)\n", p.Version)
		default:
			fmt.Fprintf(a.stdout, "model %s is current (promoted; a rollback makes %s current again)\n", p.Version, p.History[0])
		}
		return nil
	default: // rollback
		p, err := store.Rollback(ctx, meta)
		if err != nil {
			return err
		}
		if len(p.History) == 0 {
			fmt.Fprintf(a.stdout, "model %s is current again (rolled back; it is the first of the history)\n", p.Version)
			return nil
		}
		fmt.Fprintf(a.stdout, "model %s is current again (rolled back; a further rollback makes %s current)\n", p.Version, p.History[0])
		return nil
	}
}

// parseModelsArgs parses the flags of sub, wherever they are among its
// arguments, and returns its VERSION argument (get and promote take one).
// Asked for help, it prints the commands and flags.
func parseModelsArgs(a *app, fs *flag.FlagSet, sub string, args []string) (string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				c := modelsCommand()
				fmt.Fprintf(a.stdout, "Usage: %s\n\n%s.\n\n%s\n\nFlags:\n", c.synopsis, capitalize(c.summary), modelsHelp)
				printFlags(a.stdout, fs)
				return "", flag.ErrHelp
			}
			return "", usageError{err}
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	want := 0
	switch sub {
	case "get", "promote":
		want = 1
	case "list", "rollback":
	case "":
		return "", usagef("which command? list, get VERSION, promote VERSION or rollback")
	default:
		return "", usagef("unknown command %q: want list, get VERSION, promote VERSION or rollback", sub)
	}
	switch {
	case len(positional) < want:
		return "", usagef("%s needs the VERSION (mvml models list shows them)", sub)
	case len(positional) > want:
		return "", usagef("unexpected argument %q", positional[want])
	case want == 0:
		return "", nil
	}
	return positional[0], nil
}

// modelsCommand is the entry of models in commands().
func modelsCommand() command {
	for _, c := range commands() {
		if c.name == "models" {
			return c
		}
	}
	panic("models is not a command")
}

// openRegistry opens the store the flags name: a model topic or an
// existing directory.
func openRegistry(ctx context.Context, a *app, kf *kafkaFlags, topic, dir, sub string) (registry.Registry, error) {
	switch {
	case (topic == "") == (dir == ""):
		return nil, usagef("give --model-topic (with --brokers) or --model-dir")
	case dir != "":
		if kf.brokers != "" {
			return nil, usagef("--brokers reaches a --model-topic; --model-dir is a directory")
		}
		return registry.OpenDir(dir, registry.DirOptions{Logger: a.log, Existing: true})
	case kf.brokers == "":
		return nil, usagef("--model-topic needs --brokers")
	}
	conn, err := kf.connection()
	if err != nil {
		return nil, err
	}
	return registry.OpenKafka(ctx, registry.KafkaConfig{Conn: conn, Topic: topic, Logger: a.log})
}

// operatorName says who moves the pointer: user@host when the user is
// known.
func operatorName() string {
	host, _ := os.Hostname()
	if user := os.Getenv("USER"); user != "" {
		return user + "@" + host
	}
	return host
}

// currentVersion is the VERSION argument that names the current model.
const currentVersion = "current"

// getModel writes the file of version (or of the current model) to
// output, atomically.
func getModel(ctx context.Context, a *app, store registry.Registry, version, output string) error {
	if version == currentVersion {
		l, err := store.List(ctx)
		switch {
		case err != nil:
			return err
		case l.Current == nil:
			return fmt.Errorf("get the current model: %w", registry.ErrNoModel)
		}
		version = l.Current.Version
	}
	file, man, err := store.Get(ctx, version)
	if err != nil {
		return err
	}
	if output == "-" {
		_, err := a.stdout.Write(file)
		return err
	}
	f, err := sink.CreateAtomic(output)
	if err != nil {
		return err
	}
	if _, err := f.Write(file); err != nil {
		return errors.Join(fmt.Errorf("write %s: %w", output, err), f.Abort())
	}
	if err := f.Commit(); err != nil {
		return err
	}
	sum := sha256.Sum256(file)
	fmt.Fprintf(a.stdout, "model %s: %d bytes, SHA-256 %s → %s\n", man.Version, len(file), hex.EncodeToString(sum[:]), output)
	return nil
}

// writeListing prints the versions as a table, then what the current
// pointer says.
func writeListing(w io.Writer, l registry.Listing) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CURRENT\tVERSION\tCREATED\tROWS\tOBJECTIVE/ROW\tTUNED\tPUBLISHER\tPARENT\tNOTE")
	for _, man := range l.Versions {
		mark := ""
		if l.Current != nil && l.Current.Version == man.Version {
			mark = "*"
		}
		objective := "-"
		if man.ObjectivePerRow != nil {
			objective = strconv.FormatFloat(*man.ObjectivePerRow, 'g', 6, 64)
		}
		created := "-"
		if !man.Created.IsZero() {
			created = man.Created.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", mark, man.Version, created, man.Rows, objective,
			tunedSummary(man.Tuning), publisherName(man.Publisher), orDash(man.Parent), man.Note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	p := l.Current
	if p == nil {
		_, err := fmt.Fprintln(w, "\nno current model")
		return err
	}
	fmt.Fprintf(w, "\ncurrent: %s", p.Version)
	if p.Reason != "" {
		fmt.Fprintf(w, " (%s by %s, %s)", p.Reason, publisherName(p.By), p.At.UTC().Format(time.RFC3339))
	}
	if len(p.History) > 0 {
		fmt.Fprintf(w, "; a rollback makes %s current again", p.History[0])
	}
	_, err := fmt.Fprintln(w)
	return err
}

func publisherName(p registry.Publisher) string {
	switch {
	case p.Host == "" && p.Role == "":
		return "-"
	case p.Role == "":
		return p.Host
	}
	return p.Host + " (" + string(p.Role) + ")"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// listedVersion is a version in list's JSON: its manifest, and whether it
// is the current one.
type listedVersion struct {
	registry.Manifest
	Current bool `json:"current"`
}

// writeListingJSON prints the listing as one JSON object: "versions" and
// "current" (the pointer, null when none).
func writeListingJSON(w io.Writer, l registry.Listing) error {
	out := struct {
		Versions []listedVersion   `json:"versions"`
		Current  *registry.Pointer `json:"current"`
	}{Versions: []listedVersion{}, Current: l.Current}
	for _, man := range l.Versions {
		out.Versions = append(out.Versions, listedVersion{man, l.Current != nil && l.Current.Version == man.Version})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
