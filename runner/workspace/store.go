package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/gatekeeper-ai/gatekeeper/internal/digest"
)

// ErrRemoved is returned by a Workspace that was removed (its query
// closed) for a snapshot that arrives after.
var ErrRemoved = errors.New("the workspace was removed")

// Store keeps the workspaces of one sidecar instance on the sidecar's
// disk: a directory of Dir per workspace (mode 0700), holding at most one
// saved snapshot and the snapshots of runs in progress. Nothing of a
// workspace stays in memory but its file's name and size. A Store is safe
// for concurrent use.
type Store struct {
	dir string

	mu     sync.Mutex
	spaces map[string]*Workspace
}

// OpenStore makes dir (and its parents, mode 0700) and returns a Store
// keeping its workspaces there. dir must belong to one sidecar instance:
// Cleanup removes everything in it.
func OpenStore(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("workspace store: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("workspace store: %w", err)
	}
	return &Store{dir: dir, spaces: map[string]*Workspace{}}, nil
}

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

// Cleanup removes every workspace in the store's directory, including
// those a sidecar killed before it could remove them, and returns how many
// it removed. Call it when the sidecar starts, before any query opens.
func (s *Store) Cleanup() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return 0, fmt.Errorf("workspace store: %w", err)
	}
	var errs []error
	n := 0
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(s.dir, e.Name())); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	clear(s.spaces)
	return n, errors.Join(errs...)
}

// Workspace returns the workspace of key (a query id), making it, empty,
// the first time.
func (s *Store) Workspace(key string) (*Workspace, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w, ok := s.spaces[key]; ok {
		return w, nil
	}
	dir := filepath.Join(s.dir, digest.SHA256([]byte(key))[:24])
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("workspace store: %w", err)
	}
	w := &Workspace{dir: dir, turn: make(chan struct{}, 1)}
	s.spaces[key] = w
	return w, nil
}

// Remove deletes the workspace of key, if there is one: its saved
// snapshot now, and a snapshot a run in progress hands it later.
func (s *Store) Remove(key string) error {
	s.mu.Lock()
	w, ok := s.spaces[key]
	delete(s.spaces, key)
	s.mu.Unlock()
	if !ok {
		return nil
	}
	return w.remove()
}

// Len returns how many workspaces the store holds.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.spaces)
}

// Workspace is one query's saved /workspace; it implements
// runner.Workspace. Runs of it take turns (Lock).
type Workspace struct {
	dir  string
	turn chan struct{} // holds a token while a run has the workspace

	mu      sync.Mutex
	saved   string // the saved snapshot's file; "" when empty
	bytes   int64
	removed bool
}

// Lock waits until no other run has the workspace, or ctx ends, and
// returns the function that lets the next run have it.
func (w *Workspace) Lock(ctx context.Context) (unlock func(), err error) {
	select {
	case w.turn <- struct{}{}:
		return func() { <-w.turn }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Saved opens the saved snapshot; a nil reader means the workspace is
// empty.
func (w *Workspace) Saved() (io.ReadCloser, int64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.removed {
		return nil, 0, ErrRemoved
	}
	if w.saved == "" {
		return nil, 0, nil
	}
	f, err := os.Open(w.saved)
	if err != nil {
		return nil, 0, fmt.Errorf("open the saved workspace: %w", err)
	}
	return f, w.bytes, nil
}

// Replace makes the snapshot in file path the saved one and deletes the
// one it replaces (a reader of it keeps reading it). path must be in
// TempDir; it is removed on error.
func (w *Workspace) Replace(path string, bytes int64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.removed {
		_ = os.Remove(path)
		return ErrRemoved
	}
	if filepath.Dir(path) != w.dir {
		_ = os.Remove(path)
		return fmt.Errorf("snapshot %s is not in the workspace's directory %s", path, w.dir)
	}
	old := w.saved
	w.saved, w.bytes = path, bytes
	if old != "" {
		_ = os.Remove(old)
	}
	return nil
}

// TempDir is the workspace's directory, where a run writes its snapshot.
func (w *Workspace) TempDir() string { return w.dir }

func (w *Workspace) remove() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.removed, w.saved = true, ""
	if err := os.RemoveAll(w.dir); err != nil {
		return fmt.Errorf("remove workspace: %w", err)
	}
	return nil
}
