// Command mvmlgen writes a synthetic multi-view data set of any size as
// Parquet (or CSV), with its view spec, for benchmarks and load tests of
// the batch path: `mvmlgen --rows 1000000 --output big.parquet --spec views.json`.
//
// Each class has its own mean per view and every view adds Gaussian noise,
// so a model trained on the data has something to learn. Rows are
// generated and written in batches, so memory does not grow with --rows.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/mvml/mvml/pipeline"
	"github.com/mvml/mvml/schemas"
	"github.com/mvml/mvml/sink"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit statuses, as mvml's.
const (
	exitOK    = 0
	exitError = 1 // the generation failed
	exitUsage = 2 // the command line is wrong
)

const synopsis = "mvmlgen --output FILE.parquet [--spec VIEWS.json] [--rows N] [--views V] [--dim D] [--classes C] [--list] [--float64]"

// usageError marks a wrong command line.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// run is the whole program: it returns the exit status. Help goes to
// stdout; errors go to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := generate(ctx, args, stdout)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, new(usageError)):
		fmt.Fprintf(stderr, "mvmlgen: %v\nRun 'mvmlgen --help' for usage.\n", err)
		return exitUsage
	}
	fmt.Fprintf(stderr, "mvmlgen: %v\n", err)
	return exitError
}

func generate(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("mvmlgen", flag.ContinueOnError)
	// The flag package would print errors and help to one writer: run
	// reports the errors, the help goes to stdout.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	rows := fs.Int("rows", 100000, "number of rows")
	views := fs.Int("views", 3, "number of views")
	dim := fs.Int("dim", 64, "features per view")
	classes := fs.Int("classes", 2, "number of classes")
	seed := fs.Uint64("seed", 1, "random seed")
	output := fs.String("output", "", "output file (.parquet, .pq or .jsonl); required")
	specPath := fs.String("spec", "", "also write the view spec (JSON) here")
	list := fs.Bool("list", false, "store each view as one LIST column instead of flat prefix columns")
	float64s := fs.Bool("float64", false, "store features as DOUBLE instead of FLOAT")
	batch := fs.Int("batch", 65536, "rows generated and written at a time")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stdout, "Usage: %s\n\nWrites a synthetic multi-view classification data set and its view spec.\n\nFlags:\n", synopsis)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return err
		}
		return usageError{err}
	}
	switch {
	case fs.NArg() > 0:
		return usageError{fmt.Errorf("unexpected argument %q (every setting is a flag, e.g. --output)", fs.Arg(0))}
	case *output == "":
		return usageError{errors.New("--output is required")}
	case *rows < 0 || *views < 1 || *dim < 1 || *classes < 2 || *batch < 1:
		return usageError{errors.New("want --rows ≥ 0, --views ≥ 1, --dim ≥ 1, --classes ≥ 2 and --batch ≥ 1")}
	}
	var writes []pipeline.File
	if *output != sink.Stdout {
		writes = append(writes, pipeline.File{Role: "output", Path: *output})
	}
	if *specPath != "" {
		writes = append(writes, pipeline.File{Role: "view spec", Path: *specPath})
	}
	if err := pipeline.CheckFiles(nil, writes); err != nil {
		return err
	}
	spec := &schemas.ViewSpec{Name: "synthetic", Task: schemas.Classification, ID: "id", Label: "label"}
	for l := 0; l < *views; l++ {
		v := schemas.View{Name: "v" + strconv.Itoa(l)}
		if *list {
			v.List, v.Dim = v.Name, *dim
		} else {
			v.Prefix, v.Dim = v.Name+"_", *dim
		}
		spec.Views = append(spec.Views, v)
	}
	if err := spec.Validate(); err != nil {
		return err
	}
	opts := sink.ParquetOptions{Float32: !*float64s}
	if !*list {
		opts.Flatten = map[string][]string{}
		for l := range spec.Views {
			opts.Flatten[spec.Views[l].Name] = spec.Views[l].ColumnNames()
		}
	}
	out, err := sink.Create(*output, schemas.InputSchema(spec), opts)
	if err != nil {
		return err
	}
	if err := write(ctx, out, spec, *rows, *classes, *batch, *seed); err != nil {
		// An interrupted run leaves no partial file behind.
		if a, ok := out.(sink.Aborter); ok {
			err = errors.Join(err, a.Abort())
		}
		return err
	}
	if err := out.Close(ctx); err != nil {
		return err
	}
	if *specPath != "" {
		js, err := json.MarshalIndent(spec, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(*specPath, append(js, '\n'), 0o644)
	}
	return nil
}

func write(ctx context.Context, out sink.Sink, spec *schemas.ViewSpec, rows, classes, batch int, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 7))
	dims := spec.Dims()
	means := make([][][]float64, classes)
	for c := range means {
		means[c] = make([][]float64, len(dims))
		for l, d := range dims {
			means[c][l] = make([]float64, d)
			for j := range means[c][l] {
				means[c][l][j] = 0.5 * rng.NormFloat64()
			}
		}
	}
	b := schemas.NewRecordBuilder(memory.NewGoAllocator(), spec)
	defer b.Release()
	vals := make([][]float64, len(dims))
	for l, d := range dims {
		vals[l] = make([]float64, d)
	}
	for done := 0; done < rows; {
		n := min(batch, rows-done)
		b.Reserve(n)
		for i := 0; i < n; i++ {
			c := rng.IntN(classes)
			for l := range vals {
				for j := range vals[l] {
					vals[l][j] = means[c][l][j] + rng.NormFloat64()
				}
			}
			b.Append(int64(done+i), float64(c), true, vals)
		}
		rec := b.NewRecord()
		err := out.Write(ctx, rec)
		rec.Release()
		if err != nil {
			return err
		}
		done += n
	}
	return nil
}
