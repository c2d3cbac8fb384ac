package envelope

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
)

var formats = map[string]Format{
	"versioned with header": {Magic: "MVMLTEST", Versioned: true, Header: true, MaxHeader: 64},
	"versioned":             {Magic: "MVMLTEST", Versioned: true, MinBody: 4},
	"header":                {Magic: "MVMLTEST", Header: true},
}

// The layout is magic | version | header length | header | body | SHA-256
// of what precedes it, each part only where the format has it, whether
// written at once (Begin, Seal) or streamed (NewWriter).
func TestLayout(t *testing.T) {
	tests := []struct {
		name string
		want string // hex before the checksum
	}{
		{"versioned with header", hex.EncodeToString([]byte("MVMLTEST")) + "07000000" + "02000000" + "6869" + "626f6479"},
		{"versioned", hex.EncodeToString([]byte("MVMLTEST")) + "07000000" + "626f6479"},
		{"header", hex.EncodeToString([]byte("MVMLTEST")) + "02000000" + "6869" + "626f6479"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := formats[tt.name]
			header := []byte("hi")
			if !f.Header {
				header = nil
			}
			got := Seal(append(f.Begin(nil, 7, header, 4), "body"...))
			want, _ := hex.DecodeString(tt.want)
			sum := sha256.Sum256(want)
			want = append(want, sum[:]...)
			if !bytes.Equal(got, want) {
				t.Fatalf("bytes\n%x\nwant\n%x", got, want)
			}
			var streamed bytes.Buffer
			w, err := f.NewWriter(&streamed, 7, header)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprint(w, "bo")
			fmt.Fprint(w, "dy")
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(streamed.Bytes(), want) {
				t.Fatalf("streamed bytes\n%x\nwant\n%x", streamed.Bytes(), want)
			}
			fr, err := f.Open(got)
			if err != nil {
				t.Fatal(err)
			}
			wantVersion := uint32(7)
			if !f.Versioned {
				wantVersion = 0
			}
			if fr.Version != wantVersion || string(fr.Header) != string(header) || string(fr.Body) != "body" {
				t.Errorf("opened %+v", fr)
			}
		})
	}
}

// refusalCase is a versioned format with a header, errLater the error
// of its versions past 7, good a binary of it (version 7, header "hi",
// body "body") and patched a copy of good with bytes b written at at.
func refusalCase() (f Format, good []byte, patched func(at int, b ...byte) []byte, errLater error) {
	errLater = errors.New("format 9 is later")
	f = Format{Magic: "MVMLTEST", Versioned: true, Header: true, MaxHeader: 64, MinBody: 1,
		Version: func(v uint32) error {
			if v > 7 {
				return errLater
			}
			return nil
		}}
	good = Seal(append(f.Begin(nil, 7, []byte("hi"), 4), "body"...))
	patched = func(at int, b ...byte) []byte {
		d := bytes.Clone(good)
		copy(d[at:], b)
		return d
	}
	return f, good, patched, errLater
}

// Open names what is wrong, in order: magic and size, version, checksum,
// header length.
func TestOpenRefuses(t *testing.T) {
	f, good, patched, errLater := refusalCase()
	resealed := func(d []byte) []byte { return Seal(d[:len(d)-SumSize]) }
	tests := []struct {
		name string
		data []byte
		want error
		text string
	}{
		{"empty", nil, ErrNotFramed, ""},
		{"other magic", patched(0, 'X'), ErrNotFramed, ""},
		{"no body", Seal(f.Begin(nil, 7, nil, 0)), ErrNotFramed, ""},
		{"later version, checksum not checked", patched(8, 9), errLater, ""},
		{"flipped byte", patched(20, 'x'), ErrChecksum, ""},
		{"truncated", good[:len(good)-1], ErrChecksum, ""},
		{"header beyond the data", resealed(patched(12, 0x30)), ErrHeaderLength, "header of 48 bytes in a binary of 54"},
		{"header beyond the bound", resealed(patched(12, 0, 1)), ErrHeaderLength, "header of 256 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.Open(tt.data)
			if !errors.Is(err, tt.want) || !strings.Contains(fmt.Sprint(err), tt.text) {
				t.Errorf("error %v, want %v with %q", err, tt.want, tt.text)
			}
		})
	}
}

// OpenCovered refuses all that Open refuses but a checksum that does not
// match, which it does not compute: a byte flipped after the checksum was
// made is read as it is, for the caller's outer checksum to have caught.
func TestOpenCovered(t *testing.T) {
	f, good, patched, errLater := refusalCase()
	tests := []struct {
		name string
		data []byte
		want error
		body string
	}{
		{"intact", good, nil, "body"},
		{"empty", nil, ErrNotFramed, ""},
		{"other magic", patched(0, 'X'), ErrNotFramed, ""},
		{"no body", Seal(f.Begin(nil, 7, nil, 0)), ErrNotFramed, ""},
		{"later version", patched(8, 9), errLater, ""},
		{"header beyond the data", patched(12, 0x30), ErrHeaderLength, ""},
		{"header beyond the bound", patched(12, 0, 1), ErrHeaderLength, ""},
		{"flipped body byte, checksum not computed", patched(18, 'x'), nil, "xody"},
		{"flipped checksum byte, not computed", patched(len(good)-1, good[len(good)-1]^1), nil, "body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fr, err := f.OpenCovered(tt.data)
			if !errors.Is(err, tt.want) || string(fr.Body) != tt.body {
				t.Errorf("body %q, error %v; want %q, %v", fr.Body, err, tt.body, tt.want)
			}
			if _, err := f.Open(tt.data); tt.want == nil && tt.body != "body" && !errors.Is(err, ErrChecksum) {
				t.Errorf("Open: %v, want %v", err, ErrChecksum)
			}
		})
	}
}

// No input makes Open or OpenCovered panic or return a frame outside its
// data; what Open opens, OpenCovered opens alike, and Begin and Seal
// write back byte for byte.
func FuzzOpen(f *testing.F) {
	for _, fm := range formats {
		f.Add(Seal(append(fm.Begin(nil, 3, []byte("{}"), 4), "body"...)))
	}
	f.Add([]byte("MVMLTEST"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, fm := range formats {
			fr, err := fm.Open(data)
			covered, errCovered := fm.OpenCovered(data)
			if err == nil && (errCovered != nil || !bytes.Equal(covered.Header, fr.Header) || !bytes.Equal(covered.Body, fr.Body) || covered.Version != fr.Version) {
				t.Fatalf("Open %+v, OpenCovered %+v, %v: want the same frame", fr, covered, errCovered)
			}
			if err != nil {
				continue
			}
			back := Seal(append(fm.Begin(nil, fr.Version, fr.Header, len(fr.Body)), fr.Body...))
			if !bytes.Equal(back, data) {
				t.Fatalf("opened %x as %+v, which writes %x", data, fr, back)
			}
		}
	})
}
