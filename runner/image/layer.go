package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner/image/profile"
)

// layerMeta is the layer.json of a cached layer: what loading it needs to
// know before streaming it, and how long it took.
type layerMeta struct {
	Profile string    `json:"profile"`
	Hash    string    `json:"hash"`
	DiffID  string    `json:"diff_id"` // sha256:<hex> of the layer tar
	Size    int64     `json:"size"`    // bytes of the layer tar
	BuiltAt time.Time `json:"built_at"`
	Seconds float64   `json:"build_seconds"`
}

// cachedLayer is a layer in the state directory: layers/<profile>-<hash>
// holding root (its files, in overlayfs's form) and layer.json.
type cachedLayer struct {
	dir  string
	meta layerMeta
}

func (c cachedLayer) root() string { return filepath.Join(c.dir, "root") }

// ensureLayer returns p's layer from the cache in layersDir, building it
// over below (the layers under it, base first) when it is not there. A
// layer is built in <dir>.partial and renamed into place when complete, so
// an interrupted build is started over, never used.
func ensureLayer(ctx context.Context, layersDir string, p profile.Profile, below []cachedLayer, b builder, log io.Writer) (cachedLayer, Layer, error) {
	c := cachedLayer{dir: filepath.Join(layersDir, p.Name+"-"+p.Hash())}
	if data, err := os.ReadFile(filepath.Join(c.dir, "layer.json")); err == nil {
		if err := json.Unmarshal(data, &c.meta); err == nil && c.meta.DiffID != "" && c.meta.Hash == p.Hash() {
			return c, Layer{Profile: p.Name, Cached: true, Bytes: c.meta.Size}, nil
		}
	}
	begin := time.Now()
	partial := c.dir + ".partial"
	for _, d := range []string{partial, c.dir} {
		if err := os.RemoveAll(d); err != nil {
			return c, Layer{}, fmt.Errorf("clear %s: %w", d, err)
		}
	}
	if err := os.MkdirAll(partial, 0o755); err != nil {
		return c, Layer{}, err
	}
	root := filepath.Join(partial, "root")
	fmt.Fprintf(log, "== layer %s (%s)\n", p.Name, p.Hash())
	if len(below) == 0 {
		if err := b.Base(ctx, root, p, log); err != nil {
			return c, Layer{}, err
		}
	} else {
		var lowers []string
		for _, l := range below {
			lowers = append(lowers, l.root())
		}
		slices.Reverse(lowers)
		scratch := filepath.Join(partial, "scratch")
		if err := b.Layer(ctx, lowers, root, scratch, p, log); err != nil {
			return c, Layer{}, err
		}
		if err := os.RemoveAll(scratch); err != nil {
			return c, Layer{}, err
		}
	}
	diffID, size, err := digestLayer(root)
	if err != nil {
		return c, Layer{}, fmt.Errorf("tar of layer %s: %w", p.Name, err)
	}
	c.meta = layerMeta{Profile: p.Name, Hash: p.Hash(), DiffID: diffID, Size: size, BuiltAt: time.Now().UTC().Truncate(time.Second), Seconds: time.Since(begin).Seconds()}
	data, err := json.MarshalIndent(c.meta, "", "  ")
	if err != nil {
		return c, Layer{}, err
	}
	if err := os.WriteFile(filepath.Join(partial, "layer.json"), append(data, '\n'), 0o644); err != nil {
		return c, Layer{}, err
	}
	if err := os.Rename(partial, c.dir); err != nil {
		return c, Layer{}, err
	}
	took := time.Since(begin)
	return c, Layer{Profile: p.Name, Duration: took, Bytes: size}, nil
}

// digestLayer returns the diff ID (sha256:<hex>) and size of root's layer tar.
func digestLayer(root string) (string, int64, error) {
	h := sha256.New()
	cw := &countingWriter{w: h}
	if err := writeLayer(cw, root); err != nil {
		return "", 0, err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), cw.n, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// checkPathForOverlay refuses a path overlayfs's mount options cannot carry.
func checkPathForOverlay(p string) error {
	if strings.ContainsAny(p, ":,") {
		return fmt.Errorf("path %q holds ':' or ',', which overlayfs's options cannot carry; choose another state directory", p)
	}
	return nil
}
