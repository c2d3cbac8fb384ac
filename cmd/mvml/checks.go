package main

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/mvml/mvml/model"
	"github.com/mvml/mvml/pipeline"
	"github.com/mvml/mvml/registry"
)

// checks collects every invalid setting a command finds before it does
// anything, so that one run reports them all: the command and lint, which
// runs the command's own checks, say the same things.
type checks struct {
	errs []error
}

// add notes err, if any.
func (c *checks) add(err error) {
	if err != nil {
		c.errs = append(c.errs, err)
	}
}

// failf notes a wrong setting (a usage error).
func (c *checks) failf(format string, args ...any) {
	c.errs = append(c.errs, usagef(format, args...))
}

// err is nil when every check passed, the one error found, or all of
// them as a *settingsError (a usage error when all of them are).
func (c *checks) err() error {
	switch len(c.errs) {
	case 0:
		return nil
	case 1:
		return c.errs[0]
	}
	e := &settingsError{errs: c.errs}
	for _, err := range c.errs {
		if !errors.As(err, new(usageError)) {
			return e
		}
	}
	return usageError{e}
}

// settingsError is every wrong setting of one command line or file, each
// reported on a line of its own.
type settingsError struct {
	errs []error
}

func (e *settingsError) Error() string {
	lines := make([]string, len(e.errs))
	for i, err := range e.errs {
		lines[i] = err.Error()
	}
	return strings.Join(lines, "\n")
}

func (e *settingsError) Unwrap() []error { return e.errs }

// splitErrors is the errors err reports one a line: those of a
// *settingsError, or err alone.
func splitErrors(err error) []error {
	var s *settingsError
	if errors.As(err, &s) {
		return s.errs
	}
	return []error{err}
}

// checkHTTPAddr checks the address of a command's HTTP server, given as
// --flag: empty (no server) or HOST:PORT.
func (c *checks) checkHTTPAddr(flag, addr string) {
	if addr == "" {
		return
	}
	_, port, err := net.SplitHostPort(addr)
	var addrErr *net.AddrError
	switch {
	case errors.As(err, &addrErr):
		err = errors.New(addrErr.Err)
	case err != nil:
	case port == "":
		err = errors.New("no port")
	default:
		if _, perr := strconv.ParseUint(port, 10, 16); perr != nil {
			if _, lerr := net.LookupPort("tcp", port); lerr != nil {
				err = fmt.Errorf("port %q is neither a number from 0 to 65535 nor a service name", port)
			}
		}
	}
	if err != nil {
		c.failf("--%s %q: %v: want HOST:PORT, such as :8080 or 127.0.0.1:8080 (empty: no HTTP server)", flag, addr, err)
	}
}

// checkGroup checks a consumer group's name, given as --flag.
func (c *checks) checkGroup(flag, group string) {
	if strings.TrimSpace(group) == "" {
		c.failf("--%s %q: a consumer group needs a name (its committed offsets say where a restart resumes)", flag, group)
	}
}

// checkNotNegative checks a count or duration that 0 switches off.
func checkNotNegative[T int | int64 | float64 | time.Duration](c *checks, flag string, v T) {
	if v < 0 {
		c.failf("--%s %v must not be negative", flag, v)
	}
}

// checkOutputDir checks a directory a command writes its outputs into,
// given as --flag: not a model store, which only its store writes.
func (c *checks) checkOutputDir(flag, dir, modelDirFlag, modelDir string) {
	if dir == "" {
		return
	}
	switch {
	case modelDir != "" && pipeline.SamePath(dir, modelDir):
		c.failf("--%s %s is --%s, the model store: write the outputs elsewhere", flag, dir, modelDirFlag)
	case registry.IsStore(dir):
		c.failf("--%s %s is a model store, which only its store writes: write the outputs elsewhere", flag, dir)
	}
}

// checkTune notes every problem of a --tune grid that the model it will
// tune is not needed to see (model.CheckTuneGrid), each naming --tune, so
// that lint puts it on the line of the file's tune key.
func (c *checks) checkTune(tune gridFlag) {
	for _, p := range model.CheckTuneGrid(tune) {
		c.failf("--tune %v", p)
	}
}
