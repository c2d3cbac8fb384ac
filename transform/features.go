package transform

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/schemas"
)

// Config sets how Fit builds the feature maps.
type Config struct {
	// Landmarks is p: a fraction of the training rows in (0, 1] or a count
	// above 1 (see LandmarkCount).
	Landmarks float64
	// Seed fixes the landmark and σ samples: the same seed and data give
	// bit-identical maps, and a larger p only adds rows to the landmarks
	// the same seed draws for a smaller p.
	Seed uint64
	// RelTol is the relative eigenvalue tolerance; 0 means DefaultRelTol.
	RelTol float64
	// SigmaSample bounds the rows of a σ estimate; 0 means DefaultSigmaSample.
	SigmaSample int
	// Standardize, when set, lists per view whether its features are
	// standardized (training mean and σ) before the kernel.
	Standardize []bool
	// ViewNames, when set, name the views in errors.
	ViewNames []string
}

// Features is the block-Nyström feature map of all views, on one set of
// landmark rows shared by every view.
type Features struct {
	Views []*ViewMap
	// LandmarkRows are the training rows used as landmarks, increasing.
	LandmarkRows []int
}

// Fit resolves each view's kernel on its training rows (views[l] is n×d_l,
// the same n for all), draws the landmark rows once and builds every view's
// map on them. kernels[l] may be nil (RBF, σ = mean distance); a nil
// kernels means nil for all.
func Fit(views []*mat.Dense, kernels []*schemas.KernelSpec, cfg Config) (*Features, error) {
	return FitContext(context.Background(), views, kernels, cfg)
}

// FitContext is Fit returning ctx's error (wrapped) as soon as ctx ends
// while it works, even in the middle of a view's eigendecomposition, which
// reads no context: that one is left to finish on its own goroutine and
// its result dropped (see newViewMapContext). A ctx done before the call
// is the caller's to act on: the features are built as Fit builds them.
func FitContext(ctx context.Context, views []*mat.Dense, kernels []*schemas.KernelSpec, cfg Config) (*Features, error) {
	if ctx.Err() != nil {
		ctx = context.WithoutCancel(ctx)
	}
	if len(views) == 0 {
		return nil, errors.New("fit features: no views")
	}
	if kernels != nil && len(kernels) != len(views) {
		return nil, fmt.Errorf("fit features: %d kernel specs for %d views", len(kernels), len(views))
	}
	if cfg.ViewNames != nil && len(cfg.ViewNames) != len(views) {
		return nil, fmt.Errorf("fit features: %d view names for %d views", len(cfg.ViewNames), len(views))
	}
	n, _ := views[0].Dims()
	for l, v := range views {
		if r, _ := v.Dims(); r != n {
			return nil, fmt.Errorf("fit features: %s has %d rows, %s has %d", cfg.viewName(l), r, cfg.viewName(0), n)
		}
	}
	p, err := LandmarkCount(n, cfg.Landmarks)
	if err != nil {
		return nil, fmt.Errorf("fit features: %w", err)
	}
	f := &Features{
		Views:        make([]*ViewMap, len(views)),
		LandmarkRows: drawRows(n, p, cfg.Seed, landmarkStream),
	}
	if cfg.Standardize != nil && len(cfg.Standardize) != len(views) {
		return nil, fmt.Errorf("fit features: %d standardize flags for %d views", len(cfg.Standardize), len(views))
	}
	for l, v := range views {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("fit features: %w", err)
		}
		var spec *schemas.KernelSpec
		if kernels != nil {
			spec = kernels[l]
		}
		var std *Standardizer
		if cfg.Standardize != nil && cfg.Standardize[l] {
			std = FitStandardizer(v)
			v = std.Apply(v)
		}
		k, err := ResolveKernel(spec, v, cfg.SigmaSample, cfg.Seed)
		if err != nil {
			return nil, fmt.Errorf("fit features: %s: %w", cfg.viewName(l), err)
		}
		if err := landmarksOverflow(cfg.viewName(l), k, v, f.LandmarkRows); err != nil {
			return nil, fmt.Errorf("fit features: %w", err)
		}
		f.Views[l], err = newViewMapContext(ctx, k, gatherRows(v, f.LandmarkRows), cfg.RelTol)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("fit features: %s, %v on %d landmarks: %w", cfg.viewName(l), k, p, ctx.Err())
		}
		if err != nil {
			return nil, fmt.Errorf("fit features: %s, %v on %d landmarks: %w", cfg.viewName(l), k, p, err)
		}
		f.Views[l].Standardize = std
	}
	return f, nil
}

// landmarksOverflow returns a *schemas.RowError for the first landmark row
// of the view x (rows) whose kernel with itself overflows, so that the
// kernel matrix of the landmarks would not be finite; Row is the row of x.
func landmarksOverflow(view string, k Kernel, x *mat.Dense, rows []int) error {
	_, d := x.Dims()
	for _, r := range rows {
		row := x.RawRowView(r)[:d]
		if !k.selfFinite(row) {
			return &schemas.RowError{Row: int64(r),
				Reason: fmt.Sprintf("%s: the %v kernel of this landmark row with itself overflows (values too large for it)", view, k)}
		}
	}
	return nil
}

func (c *Config) viewName(l int) string {
	if c.ViewNames != nil {
		return "view " + strconv.Quote(c.ViewNames[l])
	}
	return "view " + strconv.Itoa(l)
}

// Ranks returns r_l, the feature count of every view.
func (f *Features) Ranks() []int {
	r := make([]int, len(f.Views))
	for l, m := range f.Views {
		r[l] = m.Rank()
	}
	return r
}

// Transform sets dst[l] to the features U_l (n×r_l) of views[l] (n×d_l).
// A nil dst[l] is allocated, one of the right shape reused, any other
// emptied and resized (so it must not share its data). It panics when the
// numbers of views or the dimensions disagree.
func (f *Features) Transform(dst []*mat.Dense, views []*mat.Dense) {
	f.transform(dst, views, defaultWorkers())
}

func (f *Features) transform(dst []*mat.Dense, views []*mat.Dense, workers int) {
	if len(dst) != len(f.Views) || len(views) != len(f.Views) {
		panic(fmt.Sprintf("transform: %d destinations and %d views for %d view maps", len(dst), len(views), len(f.Views)))
	}
	for l, m := range f.Views {
		n, _ := views[l].Dims()
		r := m.Rank()
		switch {
		case dst[l] == nil:
			dst[l] = mat.NewDense(n, r, nil)
		case dst[l].IsEmpty():
		default:
			if dn, dr := dst[l].Dims(); dn != n || dr != r {
				dst[l].Reset()
			}
		}
		m.project(dst[l], views[l], workers)
	}
}
