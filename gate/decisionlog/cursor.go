package decisionlog

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Cursor is the last line the shipper is done with: acknowledged by the
// receiver, or dropped and announced. Seq 0 is before the first line.
type Cursor struct {
	Seq  int64  `json:"seq"`
	Hash string `json:"hash"`
}

// loadCursor reads the cursor file; a missing file is the zero Cursor.
func loadCursor(path string) (Cursor, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Cursor{}, nil
	}
	if err != nil {
		return Cursor{}, fmt.Errorf("decision log cursor: %w", err)
	}
	var c Cursor
	if err := json.Unmarshal(b, &c); err != nil || c.Seq < 0 || (c.Seq > 0 && len(c.Hash) != 64) {
		return Cursor{}, fmt.Errorf("decision log cursor %s: not a cursor (%q); remove it to ship the whole log again", path, b)
	}
	return c, nil
}

// saveCursor writes c to path, mode 0600, through a synced temporary file
// renamed over it, so that a crash leaves the old cursor or the new one.
func saveCursor(path string, c Cursor) error {
	b, _ := json.Marshal(c)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("decision log cursor: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("decision log cursor: %w", err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
