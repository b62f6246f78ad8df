package bundle

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

var errNoCache = errors.New("no cached bundle")

const (
	cacheFile = "bundle.tar.gz"
	etagFile  = "bundle.etag"
)

// readCache returns the cached bundle and its ETag. The directory must be
// the sidecar user's own and open to no one else, as the instance lock's
// is: a bundle planted there would still need a valid signature, but an
// unsigned set-up has only the directory's mode to protect it.
func readCache(dir string) (raw []byte, etag string, err error) {
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", errNoCache
	}
	if err != nil {
		return nil, "", err
	}
	if !fi.IsDir() || fi.Mode().Perm()&0o077 != 0 {
		return nil, "", fmt.Errorf("%s: want a directory of mode 0700, have %s", dir, fi.Mode())
	}
	raw, err = os.ReadFile(filepath.Join(dir, cacheFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", errNoCache
	}
	if err != nil {
		return nil, "", err
	}
	if len(raw) > MaxBytes {
		return nil, "", fmt.Errorf("%s: over %d bytes", cacheFile, MaxBytes)
	}
	e, _ := os.ReadFile(filepath.Join(dir, etagFile))
	return raw, string(e), nil
}

// writeCache replaces the cached bundle atomically (a temporary file
// renamed over it), creating dir with mode 0700.
func writeCache(dir string, raw []byte, etag string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	for name, data := range map[string][]byte{cacheFile: raw, etagFile: []byte(etag)} {
		f, err := os.CreateTemp(dir, name+".*")
		if err != nil {
			return err
		}
		_, err = f.Write(data)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(f.Name(), filepath.Join(dir, name)) // CreateTemp made it 0600
		}
		if err != nil {
			os.Remove(f.Name())
			return err
		}
	}
	return nil
}
