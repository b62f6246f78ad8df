package image

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strings"

	"github.com/docker/docker/pkg/jsonmessage"
	digest "github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/gatekeeper-ai/gatekeeper/runner/image/profile"
)

// Labels every profile image carries.
const (
	LabelProfile = "gatekeeper.profile"
	LabelRecipe  = "gatekeeper.recipe"
)

// manifestEntry is one image of a docker-save archive's manifest.json.
type manifestEntry struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// load streams p's image, made of layers (base first), into the engine as
// a docker-save archive. The engine stores each layer once, whichever
// image it came with, so the images of profiles that share layers share
// their storage.
func load(ctx context.Context, cli engine, p profile.Profile, layers []cachedLayer, log io.Writer) error {
	pr, pw := io.Pipe()
	written := make(chan error, 1)
	go func() {
		err := writeArchive(pw, p, layers)
		pw.CloseWithError(err)
		written <- err
	}()
	resp, err := cli.ImageLoad(ctx, pr)
	if err != nil {
		pr.CloseWithError(err)
		<-written
		return fmt.Errorf("image load: %w", err)
	}
	streamErr := jsonmessage.DisplayJSONMessagesStream(resp.Body, log, 0, false, nil)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	pr.CloseWithError(io.ErrClosedPipe) // the engine stopped reading: unblock the writer
	if err := <-written; err != nil && err != io.ErrClosedPipe {
		return fmt.Errorf("write the image archive: %w", err)
	}
	if streamErr != nil {
		return fmt.Errorf("image load: %w", streamErr)
	}
	return nil
}

// writeArchive writes the docker-save archive of p: each layer's tar
// (checked against the diff ID and size its cache recorded), the image
// config and manifest.json.
func writeArchive(w io.Writer, p profile.Profile, layers []cachedLayer) error {
	tw := tar.NewWriter(w)
	var paths []string
	var diffIDs []digest.Digest
	var history []ocispec.History
	for _, l := range layers {
		name := strings.TrimPrefix(l.meta.DiffID, "sha256:") + "/layer.tar"
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: l.meta.Size, ModTime: l.meta.BuiltAt}); err != nil {
			return err
		}
		h := sha256.New()
		cw := &countingWriter{w: io.MultiWriter(tw, h)}
		if err := writeLayer(cw, l.root()); err != nil {
			return fmt.Errorf("layer %s (%s): %w", l.meta.Profile, l.dir, err)
		}
		if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != l.meta.DiffID || cw.n != l.meta.Size {
			return fmt.Errorf("layer %s: %w (tar %s of %d bytes, recorded %s of %d); remove %s and build again", l.meta.Profile, errLayerChanged, got, cw.n, l.meta.DiffID, l.meta.Size, l.dir)
		}
		paths = append(paths, name)
		diffIDs = append(diffIDs, digest.Digest(l.meta.DiffID))
		built := l.meta.BuiltAt
		history = append(history, ocispec.History{Created: &built, CreatedBy: "gatekeeper image build: layer " + l.meta.Profile + " " + l.meta.Hash})
	}
	created := layers[len(layers)-1].meta.BuiltAt
	cfg := ocispec.Image{
		Created:  &created,
		Platform: ocispec.Platform{Architecture: runtime.GOARCH, OS: "linux"},
		Config: ocispec.ImageConfig{
			User:       profile.User,
			Env:        profile.Env,
			WorkingDir: profile.WorkDir,
			Labels:     map[string]string{LabelProfile: p.Name, LabelRecipe: p.Hash()},
		},
		RootFS:  ocispec.RootFS{Type: "layers", DiffIDs: diffIDs},
		History: history,
	}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	cfgName := digest.FromBytes(cfgJSON).Encoded() + ".json" // the config's name is its digest, as the image format names it
	manifest, err := json.Marshal([]manifestEntry{{Config: cfgName, RepoTags: []string{p.Tag()}, Layers: paths}})
	if err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{cfgName, cfgJSON}, {"manifest.json", manifest}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(f.data)), ModTime: created}); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	return tw.Close()
}
