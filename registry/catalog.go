package registry

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/mvml/mvml/kafkaconn"
)

// The keys of the model topic.
const (
	// keyCurrent holds the Pointer to the current model.
	keyCurrent = "current"
	// modelPrefix+VERSION holds a version's Manifest, and its model file
	// is the blob of that key (chunks modelPrefix+VERSION+"/chunk/"+i).
	modelPrefix = "model/"
	// checkpointPrefix+LINEAGE holds a checkpointManifest, which names the
	// blob holding the checkpoint (checkpointPrefix+LINEAGE+"/"+ID).
	checkpointPrefix = "checkpoint/"
)

func modelKey(version string) string      { return modelPrefix + version }
func checkpointKey(lineage string) string { return checkpointPrefix + lineage }

// checkpointManifest is the value of a checkpoint's key: where its bytes
// are, and their checksum.
type checkpointManifest struct {
	Lineage string    `json:"lineage"`
	Blob    string    `json:"blob"`
	SHA256  string    `json:"sha256"`
	Bytes   int64     `json:"bytes"`
	Chunks  int       `json:"chunks"`
	At      time.Time `json:"at"`
	By      Publisher `json:"by"`
}

// chunkRef is where a chunk is in the topic, and what its headers say of
// its blob.
type chunkRef struct {
	offset int64
	sha    string
	count  int
}

// catalog is what a reader knows of the model topic up to an offset: the
// manifests, the current pointer, the checkpoints, and where the chunks
// of every blob are, without their bytes, which are read again by offset
// when a blob is needed. Messages come in offset order and a later one
// replaces an earlier of its key, as compaction does.
type catalog struct {
	manifests map[string]Manifest
	// published is the offset of each version's first manifest: the
	// order of publication.
	published   map[string]int64
	checkpoints map[string]checkpointManifest
	chunks      map[string]map[int]chunkRef
	current     *Pointer
	// currentAt is the offset of the current pointer's message.
	currentAt int64
}

func newCatalog() *catalog {
	return &catalog{manifests: map[string]Manifest{}, published: map[string]int64{}, checkpoints: map[string]checkpointManifest{}, chunks: map[string]map[int]chunkRef{}}
}

// apply takes one message of the topic into the catalog. A message that
// cannot be read (a damaged header or value, a key of no meaning here) is
// logged and left out: it cannot stop a reader.
func (c *catalog) apply(msg kafkaconn.Message, logger *slog.Logger) {
	key := string(msg.Key)
	if msg.Value == nil { // a tombstone: the key is deleted
		c.remove(key)
		return
	}
	chunk, err := kafkaconn.ParseChunk(msg.Key, msg.Headers)
	switch {
	case err == nil:
		refs := c.chunks[chunk.Blob]
		if refs == nil {
			refs = map[int]chunkRef{}
			c.chunks[chunk.Blob] = refs
		}
		refs[chunk.Index] = chunkRef{offset: msg.Offset, sha: chunk.SHA256, count: chunk.Count}
		return
	case !errors.Is(err, kafkaconn.ErrNotChunk):
		logger.Warn("model topic: a chunk with damaged headers is left out", "offset", msg.Offset, "err", err)
		return
	}
	switch err := c.applyValue(key, msg); {
	case errors.Is(err, errUnknownKey):
		logger.Debug("model topic: a message of no meaning to mvml is left out", "offset", msg.Offset, "key", key)
	case err != nil:
		logger.Warn("model topic: a message that cannot be read is left out", "offset", msg.Offset, "key", key, "err", err)
	}
}

var errUnknownKey = errors.New("unknown key")

// applyValue reads the value of a manifest, checkpoint or pointer message.
func (c *catalog) applyValue(key string, msg kafkaconn.Message) error {
	switch {
	case key == keyCurrent:
		var p Pointer
		if err := decodeJSON(msg.Value, &p); err != nil {
			return err
		}
		if err := checkSum(p.Version, p.SHA256); err != nil {
			return err
		}
		c.current, c.currentAt = &p, msg.Offset
	case strings.HasPrefix(key, modelPrefix) && !strings.Contains(key[len(modelPrefix):], "/"):
		var m Manifest
		if err := decodeJSON(msg.Value, &m); err != nil {
			return err
		}
		if err := checkBlob(m.Version, m.SHA256, m.Bytes, m.Chunks); err != nil {
			return err
		}
		if modelKey(m.Version) != key {
			return fmt.Errorf("the manifest of version %s under another version's key", m.Version)
		}
		c.manifests[m.Version] = m
		if _, ok := c.published[m.Version]; !ok {
			c.published[m.Version] = msg.Offset
		}
	case strings.HasPrefix(key, checkpointPrefix) && !strings.Contains(key[len(checkpointPrefix):], "/"):
		var cp checkpointManifest
		if err := decodeJSON(msg.Value, &cp); err != nil {
			return err
		}
		if err := checkBlob(cp.Lineage, cp.SHA256, cp.Bytes, cp.Chunks); err != nil {
			return err
		}
		if checkpointKey(cp.Lineage) != key || !strings.HasPrefix(cp.Blob, key+"/") {
			return fmt.Errorf("the checkpoint of lineage %s in blob %s under key %s", cp.Lineage, cp.Blob, key)
		}
		c.checkpoints[cp.Lineage] = cp
	default:
		return errUnknownKey
	}
	return nil
}

// remove deletes what key held.
func (c *catalog) remove(key string) {
	switch {
	case key == keyCurrent:
		c.current = nil
	case strings.HasPrefix(key, modelPrefix) && !strings.Contains(key[len(modelPrefix):], "/"):
		delete(c.manifests, key[len(modelPrefix):])
		delete(c.published, key[len(modelPrefix):])
	case strings.HasPrefix(key, checkpointPrefix) && !strings.Contains(key[len(checkpointPrefix):], "/"):
		delete(c.checkpoints, key[len(checkpointPrefix):])
	default:
		// The last "/chunk/": a blob's key may hold one.
		at := strings.LastIndex(key, "/chunk/")
		if at < 0 {
			return
		}
		blob := key[:at]
		if i, err := strconv.Atoi(key[at+len("/chunk/"):]); err == nil {
			delete(c.chunks[blob], i)
			if len(c.chunks[blob]) == 0 {
				delete(c.chunks, blob)
			}
		}
	}
}

// blobOffsets returns the offsets of the chunks of blob with checksum sha,
// in chunk order, or an error wrapping ErrUnusable that names the chunks
// missing.
func (c *catalog) blobOffsets(blob, sha string, count int) ([]int64, error) {
	refs := c.chunks[blob]
	offsets := make([]int64, count)
	var missing []int
	other := ""
	for i := range offsets {
		ref, ok := refs[i]
		if !ok || ref.sha != sha || ref.count != count {
			missing = append(missing, i)
			if ok && ref.sha != sha {
				other = ref.sha
			}
			continue
		}
		offsets[i] = ref.offset
	}
	if len(missing) == 0 {
		return offsets, nil
	}
	err := fmt.Errorf("%w: %s: %s", ErrUnusable, blob, missingChunks(missing, count))
	if other != "" {
		err = fmt.Errorf("%w (the topic holds chunks of SHA-256 %s, not %s)", err, other, sha)
	}
	return nil, err
}

// missingChunks says which chunks of count are missing, the first few of
// a long list.
func missingChunks(missing []int, count int) string {
	if len(missing) == 1 {
		return fmt.Sprintf("chunk %d of %d is missing", missing[0], count)
	}
	const shown = 8
	parts := make([]string, 0, min(len(missing), shown))
	for _, x := range missing[:min(len(missing), shown)] {
		parts = append(parts, strconv.Itoa(x))
	}
	s := strings.Join(parts, ", ")
	if len(missing) > shown {
		s += fmt.Sprintf(" and %d more", len(missing)-shown)
	}
	return fmt.Sprintf("chunks %s of %d are missing", s, count)
}

// decodeJSON decodes a manifest or pointer. Fields it does not know are
// ignored, so that a later release may add some; the checks of what it
// reads refuse a message of another kind.
func decodeJSON(data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("JSON: %w", err)
	}
	return nil
}

// checkSum refuses a name without a valid SHA-256.
func checkSum(name, sha string) error {
	if name == "" {
		return errors.New("no version or lineage")
	}
	if b, err := hex.DecodeString(sha); err != nil || len(b) != 32 || strings.ToLower(sha) != sha {
		return fmt.Errorf("%s: sha256 %q: want 64 lowercase hex digits", name, sha)
	}
	return nil
}

// checkBlob refuses a blob description that cannot describe a blob.
func checkBlob(name, sha string, bytes int64, chunks int) error {
	if err := checkSum(name, sha); err != nil {
		return err
	}
	if bytes < 0 || bytes > kafkaconn.MaxBlobBytes || chunks < 1 || int64(chunks) > max(1, bytes) {
		return fmt.Errorf("%s: %d bytes in %d chunks", name, bytes, chunks)
	}
	return nil
}
