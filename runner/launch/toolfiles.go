package launch

import (
	"archive/tar"
	"bytes"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"
	"time"
)

// toolPathRE is a wrapper file's path below ToolsDir: clean, relative,
// of plain names (Python packages, Node modules, .d.ts files).
var toolPathRE = regexp.MustCompile(`^[A-Za-z0-9_@+-][A-Za-z0-9._@+-]*(/[A-Za-z0-9_@+-][A-Za-z0-9._@+-]*)*$`)

// checkToolFiles returns a phrase for every problem with a run's wrapper
// files: a path that is not a clean relative one below ToolsDir (names
// start with no dot, so no "..", and none is the bridge's socket), a file
// that is also another's directory, or more bytes than /tmp holds.
func checkToolFiles(files map[string][]byte, tmpBytes int64) []string {
	var problems []string
	var total int64
	for p, b := range files {
		total += int64(len(b))
		switch {
		case !toolPathRE.MatchString(p) || path.Clean(p) != p:
			problems = append(problems, fmt.Sprintf("tool file %q is not a clean relative path of plain names", p))
		case p == path.Base(BridgeSocket):
			problems = append(problems, fmt.Sprintf("tool file %q is the bridge's socket", p))
		}
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if _, ok := files[d]; ok {
				problems = append(problems, fmt.Sprintf("tool file %q is below the file %q", p, d))
			}
		}
	}
	if total > tmpBytes {
		problems = append(problems, fmt.Sprintf("tool files take %d bytes, /tmp holds %d", total, tmpBytes))
	}
	sort.Strings(problems)
	return problems
}

// toolsTar is the tar of the wrapper files init unpacks into ToolsDir:
// files 0444, directories 0555, owned by the run's uid and gid.
func toolsTar(files map[string][]byte, uid, gid int) ([]byte, error) {
	if problems := checkToolFiles(files, 1<<62); len(problems) > 0 {
		return nil, fmt.Errorf("tool files: %s", strings.Join(problems, "; "))
	}
	dirs := map[string]bool{}
	names := make([]string, 0, len(files))
	for p := range files {
		names = append(names, p)
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	for d := range dirs {
		names = append(names, d)
	}
	sort.Strings(names) // a directory before what it holds
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime := time.Unix(0, 0)
	for _, n := range names {
		h := &tar.Header{Name: n, Uid: uid, Gid: gid, ModTime: mtime, Format: tar.FormatPAX}
		if dirs[n] {
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, n+"/", 0o555
		} else {
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o444, int64(len(files[n]))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("tool files: %w", err)
		}
		if !dirs[n] {
			if _, err := tw.Write(files[n]); err != nil {
				return nil, fmt.Errorf("tool files: %w", err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("tool files: %w", err)
	}
	return buf.Bytes(), nil
}
