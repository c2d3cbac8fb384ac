//go:build unix

package refit

import "syscall"

// cpuSeconds is the CPU time the process has used, user and system: on a
// shared machine a fairer measure of work than the wall clock, and the
// measure of work when a fit runs its folds on several CPUs.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
