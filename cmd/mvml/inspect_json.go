package main

import (
	"encoding/json"
	"io"

	"github.com/mvml/mvml/model"
)

// modelDoc is the description of a model that `inspect --format json`
// writes, for a CI job or a registry's user interface: what the text
// output shows, as one JSON document.
type modelDoc struct {
	Version string    `json:"version"`
	Task    string    `json:"task"`
	Classes []float64 `json:"classes,omitempty"`
	// TargetMean and TargetScale map a regression's outputs back from the
	// standardised target.
	TargetMean  float64           `json:"target_mean,omitempty"`
	TargetScale float64           `json:"target_scale,omitempty"`
	Training    model.Meta        `json:"training"`
	Config      model.TrainConfig `json:"config"`
	// Mu is the first trial step of the Ã update the fit used (the
	// configuration's, or its default from eta).
	Mu    float64   `json:"mu"`
	Views []viewDoc `json:"views"`
	Heads []headDoc `json:"heads"`
}

type viewDoc struct {
	Name      string     `json:"name"`
	Dim       int        `json:"dim"`
	Landmarks int        `json:"landmarks"`
	Rank      int        `json:"rank"`
	Kernel    kernelDoc  `json:"kernel"`
	Standard  *standards `json:"standardize,omitempty"`
}

type kernelDoc struct {
	Type   string  `json:"type"`
	Gamma  float64 `json:"gamma,omitempty"`
	Degree int     `json:"degree,omitempty"`
	Coef0  float64 `json:"coef0,omitempty"`
}

// standards are the centre of a standardized view's features and the
// factor that scales them, 1/σ.
type standards struct {
	Center   []float64 `json:"center"`
	InvScale []float64 `json:"inv_scale"`
}

type headDoc struct {
	Name string `json:"name"`
	// Class is the class a one-vs-rest head predicts against the rest.
	Class     *float64  `json:"class,omitempty"`
	W         []float64 `json:"w"`
	Intercept []float64 `json:"intercept"`
	// BlockNorms[l][k] is ‖Ã_lk‖_F, the weight of view pair (l, k) in the
	// metric, in the order of Views.
	BlockNorms [][]float64 `json:"block_norms"`
	Trace      model.Trace `json:"trace"`
}

// describeModel is m's description.
func describeModel(m *model.Model) modelDoc {
	doc := modelDoc{Version: m.Version, Task: string(m.Spec.Task), Classes: m.Classes, Training: m.Meta, Config: m.Config,
		Mu: m.Config.Fit.StepMu()}
	if m.Classes == nil {
		doc.TargetMean, doc.TargetScale = m.TargetMean, m.TargetScale
	}
	for l, vm := range m.Features.Views {
		p, d := vm.Landmarks.Dims()
		v := viewDoc{Name: m.Spec.Views[l].Name, Dim: d, Landmarks: p, Rank: vm.Rank(),
			Kernel: kernelDoc{Type: vm.Kernel.Type, Gamma: vm.Kernel.Gamma, Degree: vm.Kernel.Degree, Coef0: vm.Kernel.Coef0}}
		if s := vm.Standardize; s != nil {
			v.Standard = &standards{Center: s.Center, InvScale: s.Scale}
		}
		doc.Views = append(doc.Views, v)
	}
	for h, hd := range m.Heads {
		norms := m.BlockNorms(h)
		rows, _ := norms.Dims()
		head := headDoc{Name: headName(m, h), W: hd.W, Intercept: hd.Intercept, Trace: hd.Trace, BlockNorms: make([][]float64, rows)}
		for l := range rows {
			head.BlockNorms[l] = norms.RawRowView(l)
		}
		if len(m.Heads) > 1 && len(m.Heads) == len(m.Classes) {
			head.Class = &m.Classes[h]
		}
		doc.Heads = append(doc.Heads, head)
	}
	return doc
}

func writeModelJSON(w io.Writer, m *model.Model) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(describeModel(m))
}
