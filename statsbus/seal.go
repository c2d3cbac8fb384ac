package statsbus

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// A delta and a checkpoint are each one self-checking binary:
//
//	magic (8 bytes) | uint32 header length | header (JSON) |
//	statistics (model.Accumulator.MarshalBinary) | SHA-256 of everything before it
//
// so that their header is read without the statistics, and no damaged or
// truncated byte passes.

// seal frames header and payload under magic.
func seal(magic string, header, payload []byte) []byte {
	out := make([]byte, 0, len(magic)+4+len(header)+len(payload)+sha256.Size)
	out = append(out, magic...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(header)))
	out = append(out, header...)
	out = append(out, payload...)
	sum := sha256.Sum256(out)
	return append(out, sum[:]...)
}

// unseal checks data sealed under magic and returns its header and
// payload (which share data's memory); what names the kind of binary in
// its errors.
func unseal(magic, what string, data []byte) (header, payload []byte, err error) {
	pre := len(magic) + 4
	if len(data) < pre+sha256.Size || string(data[:len(magic)]) != magic {
		return nil, nil, fmt.Errorf("not a %s (bad magic or %d bytes, too short)", what, len(data))
	}
	body, trailer := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if sum := sha256.Sum256(body); !bytes.Equal(sum[:], trailer) {
		return nil, nil, fmt.Errorf("checksum mismatch (truncated or modified)")
	}
	hlen := binary.LittleEndian.Uint32(data[len(magic):])
	if uint64(hlen) > uint64(len(body)-pre) {
		return nil, nil, fmt.Errorf("header of %d bytes in a %s of %d", hlen, what, len(data))
	}
	return body[pre : pre+int(hlen)], body[pre+int(hlen):], nil
}
