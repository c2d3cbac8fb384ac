package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/mvml/mvml/internal/linedoc"
)

// A command that reads a configuration file (serve, refit) takes --config FILE:
// a YAML mapping whose keys are the command's flag names (brokers,
// refit-interval, …), so that a flag added to the command is a key at
// once. A flag given on the command line overrides the file. A value may
// refer to environment variables as ${NAME}, the way to keep secrets out
// of the file; --print-config writes the effective configuration with such
// values masked as their references, and `mvml lint FILE` checks a file
// without running anything.

// configFlags are the flags of a command that reads a configuration file.
type configFlags struct {
	path  string
	print bool
	// inapplicable are the flags of the command that tune a part its other
	// flags leave off, which it refuses when given: --print-config leaves
	// out their defaults.
	inapplicable func(*flag.FlagSet) map[string]bool
}

func registerConfig(fs *flag.FlagSet, inapplicable func(*flag.FlagSet) map[string]bool) *configFlags {
	c := &configFlags{inapplicable: inapplicable}
	fs.StringVar(&c.path, "config", "", "YAML `FILE` whose keys are this command's flag names; a flag given on the command line overrides the file; values may refer to environment variables as ${NAME}")
	fs.BoolVar(&c.print, "print-config", false, "write the effective configuration as YAML (values from environment variables masked as their ${NAME}) and exit")
	return c
}

// configOnlyFlags are not keys of a configuration file.
var configOnlyFlags = []string{"config", "print-config"}

// parseConfigured parses args, then sets every flag the --config file
// gives and args do not. In lint's and the reference's modes it stops
// (errConfigChecked) as soon as it has the flag set.
func parseConfigured(a *app, fs *flag.FlagSet, c *configFlags, args []string) error {
	if a.configMode == configReference {
		a.flags = fs
		return errConfigChecked
	}
	if err := parseFlags(a, fs, args); err != nil {
		return err
	}
	if c.path == "" {
		return nil
	}
	file, err := loadConfig(c.path, fs, a.configMode == configLint)
	if err != nil {
		return err
	}
	a.config = file
	err = file.apply(fs)
	a.useLogFormat(fs) // the file may set it
	return err
}

// checked is called by a configured command once its settings are
// checked, before it does anything: in lint's mode it stops there, and
// with --print-config it writes them and stops.
func (c *configFlags) checked(a *app, fs *flag.FlagSet) (stop bool, err error) {
	switch {
	case a.configMode == configLint:
		return true, errConfigChecked
	case c.print:
		return true, printConfig(a.stdout, fs, a.config, c.inapplicable(fs))
	}
	return false, nil
}

// configMode says what a configured command is run for.
type configMode int

const (
	configRun       configMode = iota
	configLint                 // check the --config file and stop
	configReference            // hand over the flag set and stop
)

// errConfigChecked stops a configured command run for lint or the
// reference; it is not a failure.
var errConfigChecked = errors.New("configuration checked")

// configFile is a configuration file read: every key's value and line.
type configFile struct {
	path    string
	entries []configEntry
	// problems are those of the keys (unknown, wrong type, invalid); apply
	// reports them all.
	problems []configProblem
	// notes are the values lint could not check: their environment
	// variables are not set.
	notes []configProblem
	// fromFile are the keys whose flags the file set (the command line did
	// not).
	fromFile map[string]bool
}

// configEntry is one key of a configuration file.
type configEntry struct {
	key  string
	line int
	// values are the value as text, one per item of a sequence, with the
	// environment references expanded; raw is the value as written when it
	// refers to the environment ("" otherwise), shown instead by
	// --print-config.
	values []string
	raw    string
}

// configProblem is a problem at a key of a configuration file.
type configProblem struct {
	line int
	key  string
	msg  string
}

// configError lists every problem of a configuration file.
type configError struct {
	path     string
	problems []configProblem
}

func (e *configError) Error() string {
	lines := make([]string, len(e.problems))
	for i, p := range e.problems {
		lines[i] = e.path + ": " + p.String()
	}
	return strings.Join(lines, "\n")
}

func (p configProblem) String() string {
	return (&linedoc.Error{Line: p.line, Path: p.key, Msg: p.msg}).Error()
}

// loadConfig reads the configuration file at path for the flags of fs,
// checking each key's type against its flag. An environment variable that
// is not set is a problem, or for lint (placeholders) a note, the value
// left unchecked.
func loadConfig(path string, fs *flag.FlagSet, placeholders bool) (*configFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	f := &configFile{path: path}
	root, err := linedoc.ParseYAML(data)
	var le *linedoc.Error
	switch {
	case errors.As(err, &le):
		return nil, usageError{&configError{path, []configProblem{{line: le.Line, key: le.Path, msg: le.Msg}}}}
	case err != nil:
		return nil, err
	case root == nil:
		return f, nil // an empty file sets nothing
	case root.Kind != linedoc.Mapping:
		return nil, usageError{&configError{path, []configProblem{{line: root.Line, msg: fmt.Sprintf("found %s, want a mapping of keys to values", describeNode(root))}}}}
	}
	for _, k := range root.Keys {
		key := k.Name
		problem := func(format string, args ...any) {
			f.problems = append(f.problems, configProblem{line: k.Line, key: key, msg: fmt.Sprintf(format, args...)})
		}
		fl := fs.Lookup(key)
		switch {
		case !k.Named:
			problem("a key must be a name")
			continue
		case k.First > 0:
			problem("given twice (first on line %d)", k.First)
			continue
		case fl == nil || slices.Contains(configOnlyFlags, key):
			problem("unknown key%s", suggestKey(key, fs))
			continue
		}
		entry, ok := readEntry(key, k.Line, k.Value, fl, problem)
		if !ok {
			continue
		}
		if missing := missingEnv(entry.raw); len(missing) > 0 {
			msg := fmt.Sprintf("environment variable %s is not set", strings.Join(missing, ", "))
			if !placeholders {
				problem("%s", msg)
				continue
			}
			f.notes = append(f.notes, configProblem{line: k.Line, key: key, msg: msg + " here: its value is not checked"})
			if _, isString := flagType(fl).(string); !isString {
				continue
			}
			// A string stands for itself, the reference as written, so
			// that the checks of keys that need one pass.
			entry.values = []string{entry.raw}
		}
		f.entries = append(f.entries, entry)
	}
	return f, nil
}

// readEntry reads the value v of key, of flag fl: a scalar of the flag's
// type or, for a list of names such as brokers or a flag given several
// times, a sequence of scalars.
func readEntry(key string, line int, v *linedoc.Node, fl *flag.Flag, problem func(string, ...any)) (configEntry, bool) {
	entry := configEntry{key: key, line: line}
	items := []*linedoc.Node{v}
	if v.Kind == linedoc.Sequence {
		items = v.Items
	}
	want := flagType(fl)
	var raws []string
	for _, item := range items {
		if item.Kind != linedoc.Scalar || v.Kind == linedoc.Sequence && !listFlag(fl) {
			problem("found %s, want %s", describeNode(v), describeType(want))
			return entry, false
		}
		text, refers, err := expandEnv(item.Text)
		switch {
		case err != nil:
			problem("%v", err)
			return entry, false
		case !refers && !scalarFits(item, want):
			problem("found %s, want %s", describeNode(item), describeType(want))
			return entry, false
		case item.Tag == "!!null":
			text = ""
		}
		entry.values = append(entry.values, text)
		raws = append(raws, text)
		if refers {
			raws[len(raws)-1] = item.Text
			entry.raw = "refers"
		}
	}
	if entry.raw != "" {
		entry.raw = strings.Join(raws, ",")
	}
	return entry, true
}

// apply sets the flags the file gives and the command line does not, and
// returns every problem of the file.
func (f *configFile) apply(fs *flag.FlagSet) error {
	given := givenFlags(fs)
	f.fromFile = map[string]bool{}
	for _, e := range f.entries {
		fl := fs.Lookup(e.key)
		values := e.values
		if listFlag(fl) && !isRepeatable(fl) {
			// A list of names is one comma-separated value.
			values = []string{strings.Join(values, ",")}
		}
		for _, v := range values {
			if given[e.key] {
				// The command line wins; the value is still checked.
				if err := validFor(fl, v); err != nil {
					f.problems = append(f.problems, configProblem{e.line, e.key, err.Error()})
				}
				continue
			}
			if err := fs.Set(e.key, v); err != nil {
				f.problems = append(f.problems, configProblem{e.line, e.key, invalidValue(fl, v, err)})
			}
			f.fromFile[e.key] = true
		}
	}
	slices.SortStableFunc(f.problems, func(a, b configProblem) int { return a.line - b.line })
	if len(f.problems) > 0 {
		return usageError{&configError{f.path, f.problems}}
	}
	return nil
}

// validFor checks v as a value of fl without setting fl.
func validFor(fl *flag.Flag, v string) error {
	probe := flag.NewFlagSet("", flag.ContinueOnError)
	probe.SetOutput(io.Discard)
	switch flagType(fl).(type) {
	case bool:
		probe.Bool("x", false, "")
	case int, int64, uint, uint64:
		probe.Int64("x", 0, "")
	case float64:
		probe.Float64("x", 0, "")
	case time.Duration:
		probe.Duration("x", 0, "")
	default:
		return nil
	}
	if err := probe.Set("x", v); err != nil {
		return errors.New(invalidValue(fl, v, err))
	}
	return nil
}

// invalidValue says why v is not a value of fl: what a value of its type
// looks like, or the flag's own reason.
func invalidValue(fl *flag.Flag, v string, err error) string {
	if want := flagType(fl); want != nil {
		if _, isString := want.(string); !isString {
			return fmt.Sprintf("invalid value %q: want %s", v, describeType(want))
		}
	}
	// The flag package wraps the flag's own error: its last part says it.
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 {
		msg = msg[i+2:]
	}
	return fmt.Sprintf("invalid value %q: %s", v, msg)
}

// flagType is the Go value of fl's type (false, 0, time.Duration(0), "",
// …), or nil for a flag of its own kind.
func flagType(fl *flag.Flag) any {
	if g, ok := fl.Value.(flag.Getter); ok {
		return g.Get()
	}
	return nil
}

// repeatable is implemented by the flags that may be given several times
// (--input, --grid); a sequence in a file gives each item.
type repeatable interface{ repeatable() }

func (*inputsFlag) repeatable() {}
func (gridFlag) repeatable()    {}

func isRepeatable(fl *flag.Flag) bool {
	_, ok := fl.Value.(repeatable)
	return ok
}

// listFlag says whether fl takes a list: a repeatable flag, or a string
// flag of comma-separated names (brokers).
func listFlag(fl *flag.Flag) bool {
	if isRepeatable(fl) {
		return true
	}
	_, isString := flagType(fl).(string)
	return isString && strings.Contains(fl.Usage, "comma-separated")
}

// scalarFits says whether a YAML scalar as written (its tag) may be a
// value of a flag of type want; its text is then checked by the flag.
func scalarFits(n *linedoc.Node, want any) bool {
	switch want.(type) {
	case bool:
		return n.Tag == "!!bool"
	case int, int64, uint, uint64:
		return n.Tag == "!!int"
	case float64:
		return n.Tag == "!!int" || n.Tag == "!!float"
	case time.Duration:
		return n.Tag == "!!str" || n.Tag == "!!int"
	}
	return true
}

func describeType(want any) string {
	switch want.(type) {
	case bool:
		return "true or false"
	case int, int64, uint, uint64:
		return "an integer"
	case float64:
		return "a number"
	case time.Duration:
		return "a duration such as 30s or 10m"
	case string:
		return "a string"
	}
	return "a value"
}

func describeNode(n *linedoc.Node) string {
	switch n.Kind {
	case linedoc.Mapping:
		return "a mapping"
	case linedoc.Sequence:
		return "a list"
	}
	switch n.Tag {
	case "!!bool":
		return "the boolean " + n.Text
	case "!!int", "!!float":
		return "the number " + n.Text
	case "!!null":
		return "null"
	}
	return "the string " + strconv.Quote(n.Text)
}

// envRef is a reference to an environment variable, ${NAME}; $$ is a
// dollar sign.
var envRef = regexp.MustCompile(`\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$\{?`)

// expandEnv replaces the references of s by their variables' values (""
// for one not set; missingEnv names those) and says whether s has any.
func expandEnv(s string) (string, bool, error) {
	var err error
	refers := false
	out := envRef.ReplaceAllStringFunc(s, func(m string) string {
		switch {
		case m == "$$":
			return "$"
		case strings.HasPrefix(m, "${") && strings.HasSuffix(m, "}"):
			refers = true
			return os.Getenv(m[2 : len(m)-1])
		}
		if err == nil {
			err = fmt.Errorf("%q: a $ starts a reference ${NAME} to an environment variable (write $$ for a dollar sign)", s)
		}
		return m
	})
	return out, refers, err
}

// missingEnv names the environment variables raw refers to that are not
// set.
func missingEnv(raw string) []string {
	var missing []string
	for _, m := range envRef.FindAllStringSubmatch(raw, -1) {
		if m[1] == "" {
			continue
		}
		if _, ok := os.LookupEnv(m[1]); !ok && !slices.Contains(missing, "$"+m[1]) {
			missing = append(missing, "$"+m[1])
		}
	}
	return missing
}

// suggestKey proposes the key of fs closest to a misspelt one.
func suggestKey(key string, fs *flag.FlagSet) string {
	var names []string
	fs.VisitAll(func(fl *flag.Flag) {
		if !slices.Contains(configOnlyFlags, fl.Name) {
			names = append(names, fl.Name)
		}
	})
	if best := linedoc.Suggest(key, names); best != "" {
		return fmt.Sprintf(" (did you mean %s?)", best)
	}
	return ""
}

// locate adds where an error of a configured command lies in its
// configuration file: a check made after the file was read (--decay 2
// must be in (0, 1]) about a flag the file gave.
func (f *configFile) locate(err error) error {
	p, ok := f.problemOf(err)
	if !ok {
		return err
	}
	return usageError{fmt.Errorf("%w (%s: line %d: %s)", err, f.path, p.line, p.key)}
}

// problemOf is the error of a check as a problem at the line of the first
// flag it names that the file set.
func (f *configFile) problemOf(err error) (configProblem, bool) {
	if f == nil || !errors.As(err, new(usageError)) || errors.As(err, new(*configError)) {
		return configProblem{}, false
	}
	for _, m := range flagMention.FindAllStringSubmatch(err.Error(), -1) {
		for _, e := range f.entries {
			if e.key == m[1] && f.fromFile[e.key] {
				return configProblem{line: e.line, key: e.key, msg: err.Error()}, true
			}
		}
	}
	return configProblem{}, false
}

// flagMention finds a flag named in an error, --name.
var flagMention = regexp.MustCompile(`--([a-z][a-z0-9-]*)`)

// printConfig writes every key of fs with its effective value as YAML
// (but the defaults of the inapplicable flags, which tune parts not
// switched on); a value the file took from the environment is written as
// it was written, ${NAME}, so that no secret is shown.
func printConfig(w io.Writer, fs *flag.FlagSet, file *configFile, inapplicable map[string]bool) error {
	masked := map[string]string{}
	if file != nil {
		for _, e := range file.entries {
			if e.raw != "" && file.fromFile[e.key] {
				masked[e.key] = e.raw
			}
		}
	}
	doc := &yaml.Node{Kind: yaml.MappingNode}
	given := givenFlags(fs)
	fs.VisitAll(func(fl *flag.Flag) {
		if slices.Contains(configOnlyFlags, fl.Name) || !given[fl.Name] && inapplicable[fl.Name] {
			// A default that tunes a part not switched on would be
			// refused were it given: the file would not lint.
			return
		}
		value := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: fl.Value.String()}
		if raw, ok := masked[fl.Name]; ok {
			value.Value = raw
		} else {
			switch flagType(fl).(type) {
			case bool, int, int64, uint, uint64, float64:
				value.Tag = "" // written plain, as YAML reads it back
			}
		}
		doc.Content = append(doc.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: fl.Name}, value)
	})
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return err
	}
	return enc.Close()
}
