package model

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/mvml/mvml/internal/envelope"
	"github.com/mvml/mvml/schemas"
	"github.com/mvml/mvml/transform"
)

// The model file is one self-describing, checksummed file:
//
//	magic "MVMLMODL" | uint32 format version | uint32 header length |
//	header (JSON) | float64 arrays (little endian, in header order) |
//	SHA-256 of everything before it
//
// The header carries the view spec and its fingerprint, the training
// configuration, kernel parameters, classes, target scaling, per-head view
// weights and fit traces, and the shape of every array that follows
// (landmarks, W^{†1/2} projections and, for standardized views, centre and
// scale per view; Ã and g̃ per head). β is
// derived from them when the file is read.
//
// Format 2 differs from format 1 in what the header means, not in its
// layout: the version hashes everything that changes a prediction
// (identityHash), and every configuration field is the value used. In a
// format 1 file the version hashes the arrays only and a zero field meant
// its default; such files are still read (and written back as they were).
const (
	fileMagic = "MVMLMODL"
	// FormatVersion is the model file format this build writes; it reads
	// it and format 1.
	FormatVersion = 2
	format1       = 1
	// maxHeader bounds the header so that a corrupt length cannot make a
	// reader allocate gigabytes.
	maxHeader = 64 << 20
)

// modelEnvelope frames the model file.
var modelEnvelope = envelope.Format{Magic: fileMagic, Versioned: true, Header: true, MaxHeader: maxHeader,
	Version: func(v uint32) error {
		if v != FormatVersion && v != format1 {
			return fmt.Errorf("model file format version %d, this build reads versions %d and %d", v, format1, FormatVersion)
		}
		return nil
	}}

// ErrCorruptModel reports a model file that is damaged or not a model.
var ErrCorruptModel = errors.New("corrupt model file")

type fileHeader struct {
	Version     string             `json:"version"`
	Spec        *schemas.ViewSpec  `json:"spec"`
	Fingerprint string             `json:"spec_fingerprint"`
	Config      TrainConfig        `json:"config"`
	Classes     []float64          `json:"classes,omitempty"`
	TargetMean  float64            `json:"target_mean,omitempty"`
	TargetScale float64            `json:"target_scale,omitempty"`
	Kernels     []transform.Kernel `json:"kernels"`
	Landmarks   []int              `json:"landmark_rows"`
	Heads       []headHeader       `json:"heads"`
	Meta        Meta               `json:"meta"`
	Arrays      []arrayShape       `json:"arrays"`
}

type headHeader struct {
	W         []float64 `json:"w"`
	Intercept []float64 `json:"intercept"`
	Trace     Trace     `json:"trace"`
}

type arrayShape struct {
	Name string `json:"name"`
	Rows int    `json:"rows"`
	Cols int    `json:"cols"`
}

// arrays lists the matrices stored after the header, in order.
func (m *Model) arrays() ([]arrayShape, []mat.Matrix) {
	var shapes []arrayShape
	var mats []mat.Matrix
	add := func(name string, a mat.Matrix) {
		r, c := a.Dims()
		shapes = append(shapes, arrayShape{Name: name, Rows: r, Cols: c})
		mats = append(mats, a)
	}
	for l, vm := range m.Features.Views {
		add(fmt.Sprintf("landmarks/%d", l), vm.Landmarks)
		add(fmt.Sprintf("proj/%d", l), vm.Proj)
		if st := vm.Standardize; st != nil {
			add(fmt.Sprintf("center/%d", l), mat.NewDense(1, len(st.Center), st.Center))
			add(fmt.Sprintf("scale/%d", l), mat.NewDense(1, len(st.Scale), st.Scale))
		}
	}
	for h, hd := range m.Heads {
		add(fmt.Sprintf("A/%d", h), hd.A)
		add(fmt.Sprintf("G/%d", h), hd.G)
	}
	return shapes, mats
}

// Encode writes the model file.
func (m *Model) Encode(w io.Writer) error {
	shapes, mats := m.arrays()
	cfg := m.Config
	if m.legacyFormat1 && cfg.Fit.MaxIter == 0 {
		cfg.Fit.MaxIter = -1 // format 1 read 0 as the default; −1 ran no iteration
	}
	hdr := fileHeader{
		Version: m.Version, Spec: m.Spec, Fingerprint: m.Spec.Fingerprint(), Config: cfg,
		Classes: m.Classes, TargetMean: m.TargetMean, TargetScale: m.TargetScale,
		Landmarks: m.Features.LandmarkRows, Meta: m.Meta, Arrays: shapes,
	}
	for _, vm := range m.Features.Views {
		hdr.Kernels = append(hdr.Kernels, vm.Kernel)
	}
	for _, h := range m.Heads {
		hdr.Heads = append(hdr.Heads, headHeader{W: h.W, Intercept: h.Intercept, Trace: h.Trace})
	}
	js, err := json.Marshal(hdr)
	if err != nil {
		return fmt.Errorf("encode model header: %w", err)
	}
	out, err := modelEnvelope.NewWriter(w, m.format(), js)
	if err != nil {
		return fmt.Errorf("write model: %w", err)
	}
	if err := writeArrays(out, mats); err != nil {
		return fmt.Errorf("write model: %w", err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("write model: %w", err)
	}
	return nil
}

func writeArrays(w io.Writer, mats []mat.Matrix) error {
	var buf []byte
	for _, a := range mats {
		r, c := a.Dims()
		buf = buf[:0]
		for i := 0; i < r; i++ {
			for j := 0; j < c; j++ {
				buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(a.At(i, j)))
			}
		}
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	return nil
}

// format is the file format m is written in: the one it was read from,
// so that a format 1 model keeps the version its file gave it.
func (m *Model) format() uint32 {
	if m.legacyFormat1 {
		return format1
	}
	return FormatVersion
}

// modelIdentity is what the version of a format 2 model hashes besides the
// arrays: everything else that changes a prediction (what the outputs
// mean, the kernels, the view weights and intercepts, the views read) and
// the configuration the model was fitted with.
type modelIdentity struct {
	Fingerprint string             `json:"spec_fingerprint"`
	Config      TrainConfig        `json:"config"`
	Classes     []float64          `json:"classes"`
	TargetMean  float64            `json:"target_mean"`
	TargetScale float64            `json:"target_scale"`
	Kernels     []transform.Kernel `json:"kernels"`
	Landmarks   []int              `json:"landmark_rows"`
	W           [][]float64        `json:"w"`
	Intercepts  [][]float64        `json:"intercepts"`
}

// identityHash is the version of a format 2 model: a hash of its
// modelIdentity and its arrays, so that two models share a version only
// when they score alike. The training run's description (Meta: rows,
// time) is left out, so an identical refit of identical data has the same
// version.
func (m *Model) identityHash() (string, error) {
	id := modelIdentity{
		Fingerprint: m.Spec.Fingerprint(), Config: m.Config, Classes: m.Classes,
		TargetMean: m.TargetMean, TargetScale: m.TargetScale, Landmarks: m.Features.LandmarkRows,
	}
	for _, vm := range m.Features.Views {
		id.Kernels = append(id.Kernels, vm.Kernel)
	}
	for _, h := range m.Heads {
		id.W = append(id.W, h.W)
		id.Intercepts = append(id.Intercepts, h.Intercept)
	}
	js, err := json.Marshal(id)
	if err != nil {
		return "", fmt.Errorf("model identity: %w", err)
	}
	h := sha256.New()
	h.Write(js)
	_, mats := m.arrays()
	if err := writeArrays(h, mats); err != nil {
		return "", err // hash.Hash writes never fail
	}
	return hex.EncodeToString(h.Sum(nil)[:6]), nil
}

// arraysHash is the version of a format 1 model: a hash of its arrays.
func (m *Model) arraysHash() string {
	_, mats := m.arrays()
	h := sha256.New()
	if err := writeArrays(h, mats); err != nil {
		panic(err) // hash.Hash writes never fail
	}
	return hex.EncodeToString(h.Sum(nil)[:6])
}

// Decode reads a model file, verifying its checksum, format version and
// internal consistency; a damaged, truncated or incompatible file is an
// error wrapping ErrCorruptModel (or naming the version).
func Decode(r io.Reader) (*Model, error) {
	data, err := io.ReadAll(io.LimitReader(r, 8<<30))
	if err != nil {
		return nil, fmt.Errorf("read model: %w", err)
	}
	fr, err := modelEnvelope.Open(data)
	switch {
	case errors.Is(err, envelope.ErrNotFramed):
		return nil, fmt.Errorf("%w: not an mvml model (bad magic or too short)", ErrCorruptModel)
	case errors.Is(err, envelope.ErrChecksum), errors.Is(err, envelope.ErrHeaderLength):
		return nil, fmt.Errorf("%w: %v", ErrCorruptModel, err)
	case err != nil:
		return nil, err
	}
	var hdr fileHeader
	if err := json.Unmarshal(fr.Header, &hdr); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrCorruptModel, err)
	}
	m, err := fromHeader(&hdr, fr.Body, fr.Version)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorruptModel, err)
	}
	return m, nil
}

func fromHeader(hdr *fileHeader, payload []byte, format uint32) (*Model, error) {
	if hdr.Spec == nil {
		return nil, errors.New("no view spec")
	}
	if err := hdr.Spec.Validate(); err != nil {
		return nil, fmt.Errorf("view spec: %w", err)
	}
	if fp := hdr.Spec.Fingerprint(); fp != hdr.Fingerprint {
		return nil, fmt.Errorf("view spec fingerprint %s, header says %s", fp, hdr.Fingerprint)
	}
	v := len(hdr.Spec.Views)
	if len(hdr.Kernels) != v || len(hdr.Heads) == 0 {
		return nil, fmt.Errorf("%d views, %d kernels and %d heads do not fit together", v, len(hdr.Kernels), len(hdr.Heads))
	}
	var total int
	for _, a := range hdr.Arrays {
		if a.Rows < 0 || a.Cols < 0 || a.Rows > 1<<20 || a.Cols > 1<<20 {
			return nil, fmt.Errorf("array %s has shape %d×%d", a.Name, a.Rows, a.Cols)
		}
		total += a.Rows * a.Cols
	}
	if total*8 != len(payload) {
		return nil, fmt.Errorf("arrays need %d bytes, the file has %d", total*8, len(payload))
	}
	mats := make(map[string]*mat.Dense, len(hdr.Arrays))
	for _, a := range hdr.Arrays {
		vals := make([]float64, a.Rows*a.Cols)
		for j := range vals {
			vals[j] = math.Float64frombits(binary.LittleEndian.Uint64(payload[8*j:]))
			if math.IsNaN(vals[j]) || math.IsInf(vals[j], 0) {
				return nil, fmt.Errorf("array %s holds %v", a.Name, vals[j])
			}
		}
		payload = payload[8*len(vals):]
		if a.Rows == 0 || a.Cols == 0 {
			return nil, fmt.Errorf("array %s is empty", a.Name)
		}
		if _, dup := mats[a.Name]; dup {
			return nil, fmt.Errorf("array %s appears twice", a.Name)
		}
		mats[a.Name] = mat.NewDense(a.Rows, a.Cols, vals)
	}
	array := func(format string, i int) (*mat.Dense, error) {
		name := fmt.Sprintf(format, i)
		a, ok := mats[name]
		if !ok {
			return nil, fmt.Errorf("array %s is missing", name)
		}
		return a, nil
	}
	feats := &transform.Features{LandmarkRows: hdr.Landmarks, Views: make([]*transform.ViewMap, v)}
	dims := hdr.Spec.Dims()
	used := 0
	for l := 0; l < v; l++ {
		lm, err := array("landmarks/%d", l)
		if err != nil {
			return nil, err
		}
		proj, err := array("proj/%d", l)
		if err != nil {
			return nil, err
		}
		used += 2
		if _, d := lm.Dims(); d != dims[l] {
			return nil, fmt.Errorf("view %s: landmarks have %d columns, the spec says %d", hdr.Spec.Views[l].Name, d, dims[l])
		}
		vm, err := transform.RestoreViewMap(hdr.Kernels[l], lm, proj)
		if err != nil {
			return nil, fmt.Errorf("view %s: %w", hdr.Spec.Views[l].Name, err)
		}
		if center, ok := mats[fmt.Sprintf("center/%d", l)]; ok {
			scale, err := array("scale/%d", l)
			if err != nil {
				return nil, err
			}
			if _, c := center.Dims(); c != dims[l] {
				return nil, fmt.Errorf("view %s: standardization of %d features, the spec says %d", hdr.Spec.Views[l].Name, c, dims[l])
			}
			if _, c := scale.Dims(); c != dims[l] {
				return nil, fmt.Errorf("view %s: standardization of %d features, the spec says %d", hdr.Spec.Views[l].Name, c, dims[l])
			}
			vm.Standardize = &transform.Standardizer{Center: center.RawRowView(0), Scale: scale.RawRowView(0)}
			used += 2
		}
		feats.Views[l] = vm
	}
	m := &Model{
		Version: hdr.Version, Spec: hdr.Spec, Config: hdr.Config, Features: feats,
		Classes: hdr.Classes, TargetMean: hdr.TargetMean, TargetScale: hdr.TargetScale, Meta: hdr.Meta,
	}
	if m.Classes == nil && !(m.TargetScale > 0) {
		return nil, fmt.Errorf("regression model with target scale %v", m.TargetScale)
	}
	d := sum(feats.Ranks())
	width := 0
	for h, hh := range hdr.Heads {
		a, err := array("A/%d", h)
		if err != nil {
			return nil, err
		}
		g, err := array("G/%d", h)
		if err != nil {
			return nil, err
		}
		used += 2
		if r, c := a.Dims(); r != d || c != d {
			return nil, fmt.Errorf("head %d: Ã is %d×%d, want %d×%d", h, r, c, d, d)
		}
		gr, gc := g.Dims()
		if gr != d {
			return nil, fmt.Errorf("head %d: g̃ has %d rows, want %d", h, gr, d)
		}
		if len(hh.W) != v {
			return nil, fmt.Errorf("head %d: %d view weights for %d views", h, len(hh.W), v)
		}
		if len(hh.Intercept) != gc {
			return nil, fmt.Errorf("head %d: %d intercepts for %d outputs", h, len(hh.Intercept), gc)
		}
		sym := mat.NewSymDense(d, nil)
		for i := 0; i < d; i++ {
			for j := i; j < d; j++ {
				if a.At(i, j) != a.At(j, i) {
					return nil, fmt.Errorf("head %d: Ã is not symmetric", h)
				}
				sym.SetSym(i, j, a.At(i, j))
			}
		}
		m.Heads = append(m.Heads, &Head{Solution: Solution{A: sym, G: g, W: hh.W, Intercept: hh.Intercept, Trace: hh.Trace}})
		width += gc
	}
	if used != len(mats) {
		return nil, fmt.Errorf("%d arrays, %d of them used", len(mats), used)
	}
	if width != m.Outputs() {
		return nil, fmt.Errorf("heads give %d outputs, the classes need %d", width, m.Outputs())
	}
	m.prepare()
	var want string
	var err error
	if format == format1 {
		m.legacyFormat1 = true
		m.Config = format1Config(m.Config)
		want = m.arraysHash()
	} else if want, err = m.identityHash(); err != nil {
		return nil, err
	}
	if want != m.Version {
		return nil, fmt.Errorf("the content hashes to version %s, the header says %s", want, m.Version)
	}
	return m, nil
}

// format1Config reads the configuration of a format 1 file, in which a
// zero field meant its default, as the explicit configuration it was
// trained with, so that a refit of the model uses the same values.
func format1Config(c TrainConfig) TrainConfig {
	f := &c.Fit
	if f.Lambda == 0 {
		f.Lambda = DefaultLambda
	}
	if f.Eta == 0 {
		f.Eta = DefaultEta
	}
	if f.Mu != nil && *f.Mu == 0 {
		f.Mu = nil
	}
	if f.Mode == "" {
		f.Mode = DefaultMode
	}
	switch {
	case f.MaxIter == 0:
		f.MaxIter = DefaultMaxIter
	case f.MaxIter < 0:
		f.MaxIter = 0
	}
	if f.Tol == 0 {
		f.Tol = DefaultTol
	}
	if f.MaxCondGrowth == 0 {
		f.MaxCondGrowth = DefaultMaxCondGrowth
	}
	if c.Landmarks == 0 {
		c.Landmarks = DefaultLandmarks
	}
	if c.Multiclass == "" {
		c.Multiclass = DefaultMulticlass
	}
	return c
}
