package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/mvml/mvml/ingest"
	"github.com/mvml/mvml/internal/linedoc"
	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline"
	"github.com/mvml/mvml/schemas"
)

// newFlagSet returns the flag set of a command. The flag package would
// print its errors and the help to one writer; parseFlags prints them
// instead, the help to stdout and the errors to stderr.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.Var(new(logFormat), logFormatFlag, "`FORMAT` of the log lines on stderr: text (key=value) or json (one object per line)")
	return fs
}

// logFormatFlag is the flag every command has.
const logFormatFlag = "log-format"

// logFormat is the format of the log lines: text or json.
type logFormat string

func (f *logFormat) String() string {
	if *f == "" {
		return "text"
	}
	return string(*f)
}

func (f *logFormat) Set(s string) error {
	if s != "text" && s != "json" {
		return fmt.Errorf("%q: want text or json", s)
	}
	*f = logFormat(s)
	return nil
}

// useLogFormat makes the app log in the format the command's flags say.
func (a *app) useLogFormat(fs *flag.FlagSet) {
	if fl := fs.Lookup(logFormatFlag); fl != nil {
		a.logMu.Lock()
		a.log = newLogger(a.stderr, fl.Value.String(), a.tty)
		a.logMu.Unlock()
	}
}

// printHelp prints the synopsis of command c, what it does and every flag
// with its default.
func printHelp(w io.Writer, c command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: %s\n\n%s.\n\nFlags:\n", c.synopsis, capitalize(c.summary))
	printFlags(w, fs)
}

// printFlags lists the flags as the synopses write them, --name, with
// their defaults.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		kind, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if kind != "" {
			line += " " + kind
		}
		switch f.DefValue {
		case "", "0", "false", "[]":
		default:
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(w, "%s\n        %s\n", line, usage)
	})
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// parseFlags parses args and refuses positional arguments, which every
// command takes as flags. Asked for help, it prints it on stdout and
// returns flag.ErrHelp; a wrong flag is a usage error.
func parseFlags(a *app, fs *flag.FlagSet, args []string) error {
	if err := parseFlagsOnly(a, fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q (every input is given with a flag, e.g. --input)", fs.Arg(0))
	}
	return nil
}

// parseFlagsOnly is parseFlags for a command that takes arguments after
// its flags (fs.Args).
func parseFlagsOnly(a *app, fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			for _, c := range commands() {
				if c.name == fs.Name() {
					printHelp(a.stdout, c, fs)
				}
			}
			return flag.ErrHelp
		}
		return usageError{withFlagSuggestion(err, fs)}
	}
	a.useLogFormat(fs)
	return nil
}

// undefinedFlag is the flag package's error for a flag a command does
// not have.
const undefinedFlag = "flag provided but not defined: -"

// withFlagSuggestion adds to the error of an undefined flag the flag of
// fs closest to it, when one is close (--lamda: did you mean --lambda?).
func withFlagSuggestion(err error, fs *flag.FlagSet) error {
	name, ok := strings.CutPrefix(err.Error(), undefinedFlag)
	if !ok {
		return err
	}
	var names []string
	fs.VisitAll(func(fl *flag.Flag) { names = append(names, fl.Name) })
	best := linedoc.Suggest(strings.TrimLeft(name, "-"), names)
	if best == "" {
		return err
	}
	return fmt.Errorf("%w (did you mean --%s?)", err, best)
}

// required checks that flags were given: pairs of a flag name and its
// value ("" when missing), in the order they should be reported. Every
// flag missing is reported, each on a line of its own (see checks), so
// that one run (and mvml lint) names them all.
func required(pairs ...string) error {
	var c checks
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] == "" {
			c.failf("--%s is required", pairs[i])
		}
	}
	return c.err()
}

// inputsFlag collects a repeatable --input; ingest expands globs.
type inputsFlag []string

func (f *inputsFlag) String() string { return strings.Join(*f, " ") }

func (f *inputsFlag) Set(s string) error {
	if s == "" {
		return errors.New("empty file name")
	}
	*f = append(*f, s)
	return nil
}

func registerInputs(fs *flag.FlagSet, inputs *inputsFlag) {
	fs.Var(inputs, "input", "input `FILE` or glob: .csv, .csv.gz, .parquet or .pq (repeatable; required)")
}

// gridFlag collects repeatable --grid NAME=V1,V2,... values.
type gridFlag map[string][]float64

func (g gridFlag) String() string {
	var parts []string
	for k, vs := range g {
		parts = append(parts, k+"="+joinFloats(vs))
	}
	return strings.Join(parts, " ")
}

func (g gridFlag) Set(s string) error {
	name, values, err := parseGrid(s)
	if err != nil {
		return err
	}
	if _, dup := g[name]; dup {
		return fmt.Errorf("%s is given twice", name)
	}
	g[name] = values
	return nil
}

// parseGrid reads NAME=V1,V2,... with at least one finite value.
func parseGrid(s string) (string, []float64, error) {
	name, list, ok := strings.Cut(s, "=")
	name = strings.TrimSpace(name)
	if !ok || name == "" || strings.TrimSpace(list) == "" {
		return "", nil, fmt.Errorf("%q: want NAME=V1,V2,... (e.g. lambda=1e-4,1e-2)", s)
	}
	var values []float64
	for _, field := range strings.Split(list, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(field), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return "", nil, fmt.Errorf("%s: %q is not a finite number", name, field)
		}
		values = append(values, v)
	}
	return name, values, nil
}

func joinFloats(vs []float64) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = strconv.FormatFloat(v, 'g', -1, 64)
	}
	return strings.Join(parts, ",")
}

// landmarksFlag is p: a fraction of the training rows in (0,1] or a
// whole count above 1.
type landmarksFlag float64

func (f *landmarksFlag) String() string { return strconv.FormatFloat(float64(*f), 'g', -1, 64) }

func (f *landmarksFlag) Set(s string) error {
	v, err := parseLandmarks(s)
	if err != nil {
		return err
	}
	*f = landmarksFlag(v)
	return nil
}

func parseLandmarks(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	switch {
	case err != nil || math.IsNaN(v) || math.IsInf(v, 0):
		return 0, fmt.Errorf("%q is not a number", s)
	case v <= 0:
		return 0, fmt.Errorf("%v: want a fraction in (0,1] or a count", v)
	case v > 1 && v != math.Trunc(v):
		return 0, fmt.Errorf("%v: a count above 1 must be whole", v)
	}
	return v, nil
}

// optionalFloat is a number flag whose absence differs from every value
// it may be given, 0 included: a default that is not a number (μ following
// η, γ derived from the data) applies only while it is not set.
type optionalFloat struct {
	value float64
	set   bool
}

func (f *optionalFloat) String() string {
	if !f.set {
		return ""
	}
	return strconv.FormatFloat(f.value, 'g', -1, 64)
}

func (f *optionalFloat) Set(s string) error {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("%q is not a finite number", s)
	}
	f.value, f.set = v, true
	return nil
}

// fitFlags are the hyper-parameters shared by train, cv and demo. Every
// default is model's, and a value given is passed on exactly: the model
// (or the checks here, for the kernel) refuses what it cannot use.
type fitFlags struct {
	lambda, eta       float64
	mu                optionalFloat
	landmarks         landmarksFlag
	mode              string
	learnW            bool
	multiclass        string
	kernel, sigma     string
	gamma, sigmaScale optionalFloat
	maxIter           int
	tol               float64
	seed              uint64
	standardize       bool
	noIntercept       bool
}

func registerFit(fs *flag.FlagSet) *fitFlags {
	f := &fitFlags{landmarks: model.DefaultLandmarks}
	fs.Float64Var(&f.lambda, "lambda", model.DefaultLambda, "λ > 0, the weight of ⟨g̃, Ã⁻¹g̃⟩")
	fs.Float64Var(&f.eta, "eta", model.DefaultEta, "η > 0, the weight of the penalty on Ã")
	fs.Var(&f.mu, "mu", fmt.Sprintf("`MU` > 0, the first trial step of the Ã update (mode learned: μ·η < 1/2) (default %g/eta)", model.DefaultMuEta))
	fs.Var(&f.landmarks, "landmarks", fmt.Sprintf("`P` landmarks per view: a fraction of the training rows in (0,1] or a count, used as given; not given, train and cv take the default fraction but at most %d", pipeline.DefaultMaxLandmarks))
	fs.StringVar(&f.mode, "mode", string(model.DefaultMode), "metric mode: learned, sparse, cov or identity")
	fs.BoolVar(&f.learnW, "learn-w", false, "learn the view weights w (otherwise uniform 1/v)")
	fs.StringVar(&f.multiclass, "multiclass", string(model.DefaultMulticlass), "more than two classes: ovr (one metric per class) or shared")
	fs.StringVar(&f.kernel, "kernel", "", "kernel for every view: rbf, linear or poly (default: the view spec's, else rbf)")
	fs.StringVar(&f.sigma, "sigma", "", "RBF width for every view: mean, median (pairwise distance) or a number (default: the view spec's, else mean)")
	fs.Var(&f.sigmaScale, "sigma-scale", "`F` > 0 multiplies a σ derived from the data (mean or median) for every view (default 1)")
	fs.Var(&f.gamma, "gamma", "`GAMMA` > 0, the kernel gamma of every view (rbf: exp(-gamma·‖x-z‖²); poly: scale) (default: derived from σ, or 1/dim for poly)")
	fs.IntVar(&f.maxIter, "max-iter", model.DefaultMaxIter, "outer iterations of the fit at most; 0 fits g̃ at the initial metric only")
	fs.Float64Var(&f.tol, "tol", model.DefaultTol, "relative decrease of the objective that stops the fit; 0 runs all --max-iter iterations")
	fs.Uint64Var(&f.seed, "seed", 0, "seed of the landmark and σ samples (and of the folds in cv)")
	fs.BoolVar(&f.standardize, "standardize", false, "standardize every view's features (training mean and σ) before its kernel")
	fs.BoolVar(&f.noIntercept, "no-intercept", false, "fit without the unpenalised intercept (the paper's exact objective)")
	return f
}

// config turns the flags into a training configuration for a spec of
// nViews views, exactly as given; it checks what can be checked before any
// data is read.
func (f *fitFlags) config(nViews int) (model.TrainConfig, error) {
	mode, err := model.ParseMode(f.mode)
	if err != nil {
		return model.TrainConfig{}, usageError{err}
	}
	multi, err := model.ParseMulticlass(f.multiclass)
	if err != nil {
		return model.TrainConfig{}, usageError{err}
	}
	cfg := model.TrainConfig{
		Fit: model.Config{
			Lambda: f.lambda, Eta: f.eta, Mode: mode, LearnW: f.learnW,
			MaxIter: f.maxIter, Tol: f.tol, NoIntercept: f.noIntercept,
			MaxCondGrowth: model.DefaultMaxCondGrowth,
		},
		Landmarks:   float64(f.landmarks),
		Seed:        f.seed,
		Multiclass:  multi,
		Standardize: f.standardize,
	}
	if f.mu.set {
		cfg.Fit.Mu = new(f.mu.value)
	}
	if err := cfg.Validate(); err != nil {
		return model.TrainConfig{}, usageError{err}
	}
	kernel, err := f.kernelOverride()
	if err != nil {
		return model.TrainConfig{}, err
	}
	if kernel != nil {
		cfg.Kernels = make([]*schemas.KernelSpec, nViews)
		for l := range cfg.Kernels {
			cfg.Kernels[l] = kernel
		}
	}
	return cfg, nil
}

// kernelOverride is the kernel --kernel, --sigma, --gamma and
// --sigma-scale set for every view, or nil when none of them is given.
func (f *fitFlags) kernelOverride() (*schemas.KernelSpec, error) {
	if f.kernel == "" && f.sigma == "" && !f.gamma.set && !f.sigmaScale.set {
		return nil, nil
	}
	k := &schemas.KernelSpec{Type: f.kernel, Sigma: f.sigma}
	if k.Type == "" {
		k.Type = schemas.KernelRBF
	}
	switch k.Type {
	case schemas.KernelRBF, schemas.KernelLinear, schemas.KernelPoly:
	default:
		return nil, usagef("--kernel %q: want rbf, linear or poly", k.Type)
	}
	if k.Sigma != "" {
		if k.Type != schemas.KernelRBF {
			return nil, usagef("--sigma applies to the rbf kernel, not %s", k.Type)
		}
		if k.Sigma != "mean" && k.Sigma != "median" {
			if v, err := strconv.ParseFloat(k.Sigma, 64); err != nil || !(v > 0) || math.IsInf(v, 0) {
				return nil, usagef("--sigma %q: want mean, median or a positive number", k.Sigma)
			}
		}
	}
	if f.sigmaScale.set {
		if k.Type != schemas.KernelRBF || !(f.sigmaScale.value > 0) {
			return nil, usagef("--sigma-scale %v: want a positive number, for the rbf kernel", f.sigmaScale.value)
		}
		k.SigmaScale = f.sigmaScale.value
	}
	if f.gamma.set {
		if k.Type == schemas.KernelLinear {
			return nil, usagef("--gamma does not apply to the linear kernel")
		}
		if !(f.gamma.value > 0) {
			return nil, usagef("--gamma %v: want a positive number", f.gamma.value)
		}
		k.Gamma = f.gamma.value
	}
	return k, nil
}

// readOptions are the input flags every reading command shares.
type readOptions struct {
	batchSize int
}

func registerRead(fs *flag.FlagSet) *readOptions {
	r := &readOptions{}
	fs.IntVar(&r.batchSize, "batch-size", ingest.DefaultBatchSize, "rows per input batch")
	return r
}

func (r *readOptions) options(a *app) (pipeline.Options, error) {
	if r.batchSize <= 0 {
		return pipeline.Options{}, usagef("--batch-size %d must be positive", r.batchSize)
	}
	return pipeline.Options{BatchSize: r.batchSize, Logger: a.log}, nil
}

// givenFlags are the names of the flags of fs that were set: on the
// command line, or from a configuration file once it is applied.
func givenFlags(fs *flag.FlagSet) map[string]bool {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	return given
}

// bytesFlag is a memory size: a byte count with an optional decimal (kB,
// MB, GB, TB) or binary (KiB, MiB, GiB, TiB) unit, "2GB" or "1.5 GiB".
type bytesFlag struct {
	value int64
	set   bool
}

func (f *bytesFlag) String() string {
	if !f.set {
		return ""
	}
	return pipeline.Bytes(f.value)
}

func (f *bytesFlag) Set(s string) error {
	v, err := parseBytes(s)
	if err != nil {
		return err
	}
	f.value, f.set = v, true
	return nil
}

// parseBytes reads a memory size (see bytesFlag).
func parseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := len(t)
	for i > 0 && (t[i-1] < '0' || t[i-1] > '9') && t[i-1] != '.' {
		i--
	}
	num, unit := strings.TrimSpace(t[:i]), strings.ToLower(strings.TrimSpace(t[i:]))
	mult := map[string]float64{"": 1, "b": 1, "k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12,
		"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}[unit]
	v, err := strconv.ParseFloat(num, 64)
	switch {
	case mult == 0:
		return 0, fmt.Errorf("%q: unknown unit %q (want B, kB, MB, GB, TB, KiB, MiB, GiB or TiB)", s, t[i:])
	case err != nil || math.IsNaN(v) || math.IsInf(v, 0):
		return 0, fmt.Errorf("%q: want a size such as 2GB or 512MiB", s)
	case v*mult < 1 || v*mult > math.MaxInt64/2:
		return 0, fmt.Errorf("%q: want a positive size below 4 EB", s)
	}
	return int64(v * mult), nil
}
