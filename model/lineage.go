package model

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/transform"
)

// lineageIdentity is what a model's sufficient statistics depend on besides
// the feature arrays: the views read, the kernels, the landmark rows and
// what the targets mean. The fitted heads and the fit's configuration are
// not in it: every refit of a model keeps its lineage.
type lineageIdentity struct {
	Fingerprint string             `json:"spec_fingerprint"`
	Kernels     []transform.Kernel `json:"kernels"`
	Landmarks   []int              `json:"landmark_rows"`
	Classes     []float64          `json:"classes"`
	TargetMean  float64            `json:"target_mean"`
	TargetScale float64            `json:"target_scale"`
	Outputs     int                `json:"outputs"`
}

// Lineage identifies the space m's sufficient statistics live in: a hash
// of the view spec's fingerprint, the feature maps (kernels, landmarks,
// projections, standardization) and the target encoding. Statistics
// gathered on two models merge exactly when, and only when, their lineages
// are equal: a refit (Accumulator.Refit) keeps the lineage of the model the
// statistics were gathered on, while a training run that draws new
// landmarks starts a new one.
func (m *Model) Lineage() string {
	id := lineageIdentity{
		Fingerprint: m.Spec.Fingerprint(), Landmarks: m.Features.LandmarkRows,
		Classes: m.Classes, TargetMean: m.TargetMean, TargetScale: m.TargetScale, Outputs: m.Outputs(),
	}
	for _, vm := range m.Features.Views {
		id.Kernels = append(id.Kernels, vm.Kernel)
	}
	js, err := json.Marshal(id)
	if err != nil {
		panic(fmt.Sprintf("model: lineage of %s: %v", m.Version, err)) // plain data always marshals
	}
	h := sha256.New()
	h.Write(js)
	var mats []mat.Matrix
	for _, vm := range m.Features.Views {
		mats = append(mats, vm.Landmarks, vm.Proj)
		if st := vm.Standardize; st != nil {
			mats = append(mats, mat.NewDense(1, len(st.Center), st.Center), mat.NewDense(1, len(st.Scale), st.Scale))
		}
	}
	if err := writeArrays(h, mats); err != nil {
		panic(err) // hash.Hash writes never fail
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}
