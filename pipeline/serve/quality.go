package serve

import (
	"math"
	"slices"
)

// DefaultQualityWindow is LateLabels.QualityWindow's default: the joined
// labels of a model version its prequential quality is measured on.
const DefaultQualityWindow = 1000

// qualityVersions is how many model versions the prequential quality is
// kept for: those that last had a label joined.
const qualityVersions = 8

// VersionQuality is the prequential quality of one model version: how
// well the predictions it served did against the labels that came later.
type VersionQuality struct {
	Version string `json:"version"`
	// Labels counts the labels joined with a prediction of this version;
	// Window, the last of them the quality is measured on.
	Labels int64 `json:"labels"`
	Window int   `json:"window"`
	// Accuracy (classification) is the share of the window's predictions
	// that were the label; NMSE (regression) is the window's squared error
	// over the squared deviation of its labels from their mean (NaN while
	// the labels do not vary). The other is absent.
	Accuracy *float64 `json:"accuracy,omitempty"`
	NMSE     *float64 `json:"nmse,omitempty"`
}

// quality measures the prequential quality of every model version served:
// each joined label scores the prediction that was served for its record,
// over a window of the last labels per version. Not safe for concurrent
// use.
type quality struct {
	window         int
	classification bool
	versions       map[string]*versionWindow
	// recent are the versions, the one that last had a label first.
	recent []string
}

// versionWindow is a ring of the last predictions of a version and their
// labels.
type versionWindow struct {
	total       int64
	next        int
	preds, labs []float64
}

func newQuality(window int, classification bool) *quality {
	return &quality{window: window, classification: classification, versions: map[string]*versionWindow{}}
}

// add scores prediction pred of version against label y.
func (q *quality) add(version string, pred, y float64) {
	w := q.versions[version]
	if w == nil {
		if len(q.recent) == qualityVersions {
			delete(q.versions, q.recent[len(q.recent)-1])
			q.recent = q.recent[:len(q.recent)-1]
		}
		w = &versionWindow{}
		q.versions[version] = w
	}
	if i := slices.Index(q.recent, version); i != 0 {
		if i > 0 {
			q.recent = slices.Delete(q.recent, i, i+1)
		}
		q.recent = slices.Insert(q.recent, 0, version)
	}
	w.total++
	if len(w.preds) < q.window {
		w.preds, w.labs = append(w.preds, pred), append(w.labs, y)
		return
	}
	w.preds[w.next], w.labs[w.next] = pred, y
	w.next = (w.next + 1) % q.window
}

// snapshot returns the quality of the versions, the one that last had a
// label first.
func (q *quality) snapshot() []VersionQuality {
	out := make([]VersionQuality, 0, len(q.recent))
	for _, v := range q.recent {
		w := q.versions[v]
		vq := VersionQuality{Version: v, Labels: w.total, Window: len(w.preds)}
		if q.classification {
			hits := 0
			for i, p := range w.preds {
				if p == w.labs[i] {
					hits++
				}
			}
			acc := float64(hits) / float64(len(w.preds))
			vq.Accuracy = &acc
		} else {
			nmse := normalisedMSE(w.preds, w.labs)
			vq.NMSE = &nmse
		}
		out = append(out, vq)
	}
	return out
}

// normalisedMSE is Σ(p−y)² / Σ(y−ȳ)², NaN when the labels do not vary.
func normalisedMSE(preds, labs []float64) float64 {
	mean := 0.0
	for _, y := range labs {
		mean += y
	}
	mean /= float64(len(labs))
	var se, dev float64
	for i, y := range labs {
		se += (preds[i] - y) * (preds[i] - y)
		dev += (y - mean) * (y - mean)
	}
	if dev == 0 {
		return math.NaN()
	}
	return se / dev
}
