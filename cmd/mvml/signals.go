package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// runProcess is the program as a process of its own: run, with the first
// SIGINT or SIGTERM cancelling the command (which then stops at its next
// check, leaving its outputs as they were) and the second ending the
// process at once through exit, with the status a shell gives a process
// killed by that signal (130 for SIGINT, 143 for SIGTERM).
func runProcess(args []string, stdout, stderr io.Writer, exit func(code int)) int {
	a := newApp(stdout, stderr)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM) // Ctrl-C, and an orchestrator's stop
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { a.watchSignals(sigs, done, cancel, exit) })
	defer func() {
		signal.Stop(sigs)
		close(done)
		wg.Wait()
		cancel()
	}()
	return a.run(ctx, args)
}

// watchSignals cancels at the first signal of sigs and calls exit at the
// second, logging each, until done is closed.
func (a *app) watchSignals(sigs <-chan os.Signal, done <-chan struct{}, cancel func(), exit func(code int)) {
	select {
	case <-done:
		return
	case sig := <-sigs:
		a.logger().Warn("interrupted: stopping (a second signal exits at once)", "signal", sig.String())
		cancel()
	}
	select {
	case <-done:
	case sig := <-sigs:
		a.logger().Warn("interrupted again: exiting at once", "signal", sig.String())
		exit(signalStatus(sig))
	}
}

// signalStatus is the exit status of a process ended by sig, as a shell
// reports it: 128 plus the signal's number.
func signalStatus(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return exitError
}

// logger is the app's logger, safe to call while a command runs (the
// command may change it once it has read --log-format).
func (a *app) logger() *slog.Logger {
	a.logMu.Lock()
	defer a.logMu.Unlock()
	return a.log
}
