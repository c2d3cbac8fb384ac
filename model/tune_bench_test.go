package model

import (
	"context"
	"testing"
)

// BenchmarkTune compares a refit tuning 5 λ values over 5 folds with an
// untuned refit of the same statistics, at the uWave training set's
// shape (896 rows × 3 × 315, p = 12%: D = 3·107 = 321, 8 classes). The
// statistics are gathered once, outside the timing. In modes identity
// and cov both refits are cold; in mode learned (one-vs-all, 10
// iterations) both are warm-started from the model the statistics were
// gathered on, as the refitter does, and the cold refit and tuning are
// reported beside them. cpu-ms/op is the process's CPU time per operation (all
// goroutines): on a shared machine steadier than the wall clock, and the
// measure of work when Tune fits folds on several CPUs.
func BenchmarkTune(b *testing.B) {
	cands, err := Candidates(map[string][]float64{"lambda": {1e-4, 1e-3, 1e-2, 1e-1, 1}})
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []Mode{ModeIdentity, ModeCov, ModeLearned} {
		b.Run(string(mode), func(b *testing.B) {
			base, acc, cfg := uwaveFolds(b, mode)
			var warm *Model
			if mode == ModeLearned {
				warm = base
			}
			refit := func(warm *Model) func(b *testing.B) {
				return func(b *testing.B) {
					cpu := cpuSeconds()
					for range b.N {
						if _, err := acc.refit(context.Background(), cfg.Fit, warm); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric((cpuSeconds()-cpu)*1e3/float64(b.N), "cpu-ms/op")
				}
			}
			b.Run("refit", refit(warm))
			if mode == ModeLearned {
				b.Run("refit-cold", refit(nil))
			}
			tune := func(warm *Model) func(b *testing.B) {
				return func(b *testing.B) {
					cpu := cpuSeconds()
					for range b.N {
						if _, _, err := acc.Tune(context.Background(), cfg.Fit, cands, warm); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric((cpuSeconds()-cpu)*1e3/float64(b.N), "cpu-ms/op")
				}
			}
			b.Run("tune-5x5", tune(warm))
			if mode == ModeLearned {
				b.Run("tune-5x5-cold", tune(nil))
			}
		})
	}
}
