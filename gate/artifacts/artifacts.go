// Package artifacts keeps a record of every sandboxed run on disk, beside
// the audit log: the code (as --store-code says), the digests of the files
// it was given, and its result, one JSON file per run named by its time and
// the SHA-256 of its content. The run's audit line names the file and its
// digest (audit.Record.Artifact), so a record can be checked against the
// hash-chained log. `gatekeeper runs list` and `gatekeeper runs show` read
// them back.
package artifacts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
	"github.com/gatekeeper-ai/gatekeeper/internal/digest"
)

// StoreCode says when a run's code is kept in its artifact; its digest
// always is.
type StoreCode string

// The --store-code values.
const (
	Never   StoreCode = "never"
	OnError StoreCode = "on_error" // the run did not exit 0 by itself
	Always  StoreCode = "always"
)

// ParseStoreCode reads a --store-code value.
func ParseStoreCode(s string) (StoreCode, error) {
	switch c := StoreCode(s); c {
	case Never, OnError, Always:
		return c, nil
	}
	return "", fmt.Errorf("store-code %q: want never, on_error or always", s)
}

// Artifact is the record of one run.
type Artifact struct {
	RunID     string    `json:"run_id"`
	QueryID   string    `json:"query_id"`
	ToolUseID string    `json:"tool_use_id"`
	Client    string    `json:"client,omitempty"`
	Time      time.Time `json:"time"`
	// PolicyHash identifies the query's effective policy.
	PolicyHash string `json:"policy_hash,omitempty"`
	Language   string `json:"language"`
	CodeSHA256 string `json:"code_sha256"`
	// Code is the program text, when StoreCode kept it.
	Code string `json:"code,omitempty"`
	// Files are the files the run was given, by digest.
	Files []FileDigest `json:"files"`
	// Outputs are the paths the run named for its returned files.
	Outputs []string `json:"outputs,omitempty"`
	// Result is the run's report as the client got it, with the returned
	// files' content left out (their digests stay).
	Result wire.RunReport `json:"result"`
}

// FileDigest is a file by its path, size and SHA-256.
type FileDigest struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Digest is the SHA-256 of b, in hex.
func Digest(b []byte) string {
	return digest.SHA256(b)
}

// Run is what a run gives its artifact: the run frame's input and the
// report sent back.
type Run struct {
	RunID, QueryID, ToolUseID, Client, PolicyHash, Language, Code string
	Files                                                         map[string]string
	Outputs                                                       []string
	Report                                                        wire.RunReport
}

// New makes the artifact of run at time now, keeping its code as store says.
func New(run Run, now time.Time, store StoreCode) Artifact {
	a := Artifact{
		RunID: run.RunID, QueryID: run.QueryID, ToolUseID: run.ToolUseID, Client: run.Client,
		Time: now.UTC(), PolicyHash: run.PolicyHash, Language: run.Language,
		CodeSHA256: Digest([]byte(run.Code)), Files: []FileDigest{}, Outputs: run.Outputs, Result: run.Report,
	}
	failed := run.Report.Reason != "exited" || run.Report.ExitCode != 0
	if store == Always || store == OnError && failed {
		a.Code = run.Code
	}
	for p, content := range run.Files {
		a.Files = append(a.Files, FileDigest{Path: p, Size: int64(len(content)), SHA256: Digest([]byte(content))})
	}
	slices.SortFunc(a.Files, func(x, y FileDigest) int { return strings.Compare(x.Path, y.Path) })
	files := make([]wire.File, len(run.Report.Files))
	for i, f := range run.Report.Files {
		f.Text, f.Base64 = nil, nil
		if f.Omitted == "" {
			f.Omitted = "not kept in the artifact (see sha256)"
		}
		files[i] = f
	}
	a.Result.Files = files
	return a
}

// Dir writes and reads the artifacts of one directory.
type Dir struct {
	path string
}

// Open makes dir (mode 0700) if needed and returns it.
func Open(dir string) (*Dir, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("artifacts: %w", err)
	}
	return &Dir{path: dir}, nil
}

// Path returns the directory.
func (d *Dir) Path() string { return d.path }

// nameTime is the time part of an artifact's name; it sorts as time does.
const nameTime = "20060102T150405.000000000Z"

// Write writes a as one file (mode 0600) named
// "<time>-<first 16 hex digits of its SHA-256>.json" and returns the name
// and the whole digest. The content is indented JSON ending in a newline.
func (d *Dir) Write(a Artifact) (name, sum string, err error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(a); err != nil {
		return "", "", fmt.Errorf("artifact of %s: %w", a.RunID, err)
	}
	sum = Digest(buf.Bytes())
	name = a.Time.UTC().Format(nameTime) + "-" + sum[:16] + ".json"
	f, err := os.OpenFile(filepath.Join(d.path, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", "", fmt.Errorf("artifact of %s: %w", a.RunID, err)
	}
	if _, err := f.Write(buf.Bytes()); err != nil {
		f.Close()
		return "", "", fmt.Errorf("artifact of %s: %w", a.RunID, err)
	}
	if err := f.Close(); err != nil {
		return "", "", fmt.Errorf("artifact of %s: %w", a.RunID, err)
	}
	return name, sum, nil
}

// Entry is one artifact read back.
type Entry struct {
	// Name is its file name.
	Name string
	Artifact
	// Intact reports whether the content's SHA-256 starts with the digest
	// in its name.
	Intact bool
}

// ErrNotFound is returned by Find for a run without an artifact.
var ErrNotFound = errors.New("no artifact of that run")

// List reads every artifact of the directory, oldest first. A file that is
// not an artifact is an error naming it.
func (d *Dir) List() ([]Entry, error) {
	names, err := filepath.Glob(filepath.Join(d.path, "*.json"))
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	out := make([]Entry, 0, len(names))
	for _, p := range names {
		e, err := read(p)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// Find returns the artifact of the run whose id is runID (or starts with
// it, when one run's does).
func (d *Dir) Find(runID string) (Entry, error) {
	all, err := d.List()
	if err != nil {
		return Entry{}, err
	}
	var found []Entry
	for _, e := range all {
		if e.RunID == runID {
			return e, nil
		}
		if runID != "" && strings.HasPrefix(e.RunID, runID) {
			found = append(found, e)
		}
	}
	switch len(found) {
	case 0:
		return Entry{}, fmt.Errorf("%w: %s in %s", ErrNotFound, runID, d.path)
	case 1:
		return found[0], nil
	}
	return Entry{}, fmt.Errorf("%d runs start with %s; give more of the id", len(found), runID)
}

func read(path string) (Entry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Entry{}, fmt.Errorf("artifact: %w", err)
	}
	name := filepath.Base(path)
	e := Entry{Name: name}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e.Artifact); err != nil {
		return Entry{}, fmt.Errorf("artifact %s: %w", name, err)
	}
	stem := strings.TrimSuffix(name, ".json")
	i := strings.LastIndexByte(stem, '-')
	e.Intact = i >= 0 && strings.HasPrefix(Digest(data), stem[i+1:]) && len(stem)-i-1 == 16
	return e, nil
}
