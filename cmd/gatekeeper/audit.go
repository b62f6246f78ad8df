package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/gate/policy"
	"github.com/gatekeeper-ai/gatekeeper/internal/untrusted"
)

// auditOptions are serve's audit log flags.
type auditOptions struct {
	path         string
	sync         bool
	maxBytes     byteSizeFlag
	maxAge       time.Duration
	keep         int
	compress     bool
	head         string
	headInterval time.Duration
}

// auditFlags registers serve's audit log flags on fs.
func auditFlags(fs *flag.FlagSet) *auditOptions {
	o := &auditOptions{maxBytes: 100 << 20}
	fs.StringVar(&o.path, "audit-log", defaultAuditLog(), "audit log file (JSON lines, hash-chained); rotated files are kept next to it as FILE.<first seq>[.gz]")
	fs.BoolVar(&o.sync, "audit-sync", false, "fsync the audit log after every line")
	fs.Var(&o.maxBytes, "audit-max-bytes", "rotate the audit log before a line would take it past this size, e.g. 100m (0: never by size)")
	fs.DurationVar(&o.maxAge, "audit-max-age", 0, "rotate the audit log once its first line is this old, e.g. 24h (0: never by age)")
	fs.IntVar(&o.keep, "audit-keep", 0, "rotated audit files to keep; older ones are removed and the removal recorded in the log (0: keep all)")
	fs.BoolVar(&o.compress, "audit-compress", false, "gzip rotated audit files in the background")
	fs.StringVar(&o.head, "audit-head", "", "where to write checkpoints of the audit chain's head, to detect a log cut off at the end: a FILE (appended; not the audit log itself), stdout, stderr, syslog (local), or syslog://HOST:PORT (UDP) / syslog+tcp://HOST:PORT")
	fs.DurationVar(&o.headInterval, "audit-head-interval", 10*time.Second, "how often a moved head is checkpointed (also at start, rotation and shutdown)")
	return o
}

// open opens the audit log and its checkpoint destination; close closes
// both, the log first so that its last checkpoint is written.
func (o *auditOptions) open(stdout, stderr io.Writer, log *slog.Logger) (l *audit.Log, close func(), err error) {
	if o.keep < 0 {
		return nil, nil, fmt.Errorf("--audit-keep %d: want 0 or more", o.keep)
	}
	if o.maxAge < 0 || o.headInterval < 0 {
		return nil, nil, errors.New("--audit-max-age and --audit-head-interval cannot be negative")
	}
	opts := audit.Options{
		Sync: o.sync, MaxBytes: int64(o.maxBytes), MaxAge: o.maxAge, Keep: o.keep, Compress: o.compress,
		HeadInterval: o.headInterval, Logger: log,
	}
	closeHead := func() {}
	if o.head != "" {
		if inLog(o.head, o.path) {
			return nil, nil, fmt.Errorf("--audit-head %s: that is a file of the audit log %s; checkpoints must be kept elsewhere (written into the log they would break its chain)", o.head, o.path)
		}
		w, c, err := openHead(o.head, stdout, stderr)
		if err != nil {
			return nil, nil, fmt.Errorf("--audit-head %s: %w", o.head, err)
		}
		opts.Head, closeHead = w, c
	}
	// The default lies under ~/.local/state/gatekeeper, which nothing has
	// made on a first start.
	if err := os.MkdirAll(filepath.Dir(o.path), 0o700); err != nil {
		closeHead()
		return nil, nil, fmt.Errorf("audit log %s: %w", o.path, err)
	}
	l, err = audit.Open(o.path, opts)
	if err != nil {
		closeHead()
		return nil, nil, err
	}
	return l, func() {
		if err := l.Close(); err != nil {
			log.Error("closing the audit log", "err", err)
		}
		closeHead()
	}, nil
}

// inLog reports whether file is the audit log at path or one of its
// rotated files, by name or, when both exist, as the same file.
func inLog(file, path string) bool {
	f, err1 := filepath.Abs(file)
	p, err2 := filepath.Abs(path)
	if err1 == nil && err2 == nil && filepath.Dir(f) == filepath.Dir(p) &&
		(filepath.Base(f) == filepath.Base(p) || audit.FileAt(f).Seq > 0 && audit.FileAt(f).Log() == filepath.Base(p)) {
		return true
	}
	fi, err1 := os.Stat(file)
	pi, err2 := os.Stat(path)
	return err1 == nil && err2 == nil && os.SameFile(fi, pi)
}

// openHead opens the destination of head checkpoints named by spec.
func openHead(spec string, stdout, stderr io.Writer) (io.Writer, func(), error) {
	switch {
	case spec == "stdout":
		return stdout, func() {}, nil
	case spec == "stderr":
		return stderr, func() {}, nil
	case spec == "syslog":
		return dialSyslog("", "")
	case strings.HasPrefix(spec, "syslog:") || strings.HasPrefix(spec, "syslog+"):
		u, err := url.Parse(spec)
		if err != nil {
			return nil, nil, err
		}
		network, _ := strings.CutPrefix(u.Scheme, "syslog+")
		if u.Scheme == "syslog" {
			network = "udp"
		}
		addr := u.Host
		if network == "unix" || network == "unixgram" {
			addr = u.Path
		}
		if addr == "" {
			return nil, nil, errors.New("want syslog://HOST:PORT, syslog+tcp://HOST:PORT or syslog+unixgram:///PATH")
		}
		return dialSyslog(network, addr)
	}
	f, err := os.OpenFile(spec, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, err
	}
	return fsyncedFile{f}, func() { f.Close() }, nil
}

// fsyncedFile syncs each checkpoint to disk as it is written.
type fsyncedFile struct{ f *os.File }

func (w fsyncedFile) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	if err == nil {
		err = w.f.Sync()
	}
	return n, err
}

// byteSizeFlag is a flag holding a size with a binary unit ("100m").
type byteSizeFlag int64

func (b *byteSizeFlag) String() string { return policy.ByteSize(*b).String() }

func (b *byteSizeFlag) Set(s string) error {
	v, err := policy.ParseByteSize(s)
	*b = byteSizeFlag(v)
	return err
}

const auditVerifySynopsis = `audit verify [--head FILE] [--partial] PATH...

PATH is the active log file (its rotated files next to it are found by
name), a directory (every rotated log in it), or several files checked as
one chain in the order given. Exit status 1 means a problem was found.`

func cmdAuditVerify(args []string, env envLookup, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("audit verify", auditVerifySynopsis, stderr)
	headFile := fs.String("head", "", "file of head checkpoints (serve --audit-head) the log must reach and agree with; - reads stdin")
	partial := fs.Bool("partial", false, "accept a set that starts after seq 1 although no rotate line records its earlier files as pruned")
	if err := parse(fs, args, env); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return exitError(2)
	}
	var heads []audit.HeadAt
	if *headFile != "" {
		var err error
		if heads, err = readHeads(*headFile, stdin); err != nil {
			return err
		}
	}
	sets, err := auditSets(fs.Args())
	if err != nil {
		return err
	}
	broken := false
	for i, files := range sets {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		opts := audit.VerifyOptions{Partial: *partial}
		name := files[len(files)-1].Log()
		for _, h := range heads {
			if filepath.Base(h.Log) == name {
				opts.Heads = append(opts.Heads, h)
			}
		}
		rep, err := audit.VerifySet(files, opts)
		if err != nil && !errors.Is(err, audit.ErrBroken) && !errors.Is(err, audit.ErrCutOff) {
			return err // a file could not be read: no verdict
		}
		ok := printVerifyReport(stdout, rep)
		if *headFile != "" {
			ok = printHeadReport(stdout, rep, *headFile, name) && ok
		}
		broken = broken || !ok
	}
	if broken {
		return exitError(1)
	}
	return nil
}

// auditSets turns verify's arguments into the sets to check.
func auditSets(args []string) ([][]audit.File, error) {
	if len(args) == 1 {
		fi, err := os.Stat(args[0])
		switch {
		case err == nil && fi.IsDir():
			sets, err := audit.DirSets(args[0])
			if err == nil && len(sets) == 0 {
				err = fmt.Errorf("no audit log in %s (a log is known by its rotated files or its .lock file; name its file instead)", args[0])
			}
			return sets, err
		case err == nil && audit.FileAt(args[0]).Seq == 0:
			files, err := audit.Files(args[0])
			return [][]audit.File{files}, err
		case err != nil && !errors.Is(err, os.ErrNotExist):
			return nil, err
		case err != nil:
			files, err := audit.Files(args[0]) // the active file may be gone while its rotated files remain
			return [][]audit.File{files}, err
		}
	}
	files := make([]audit.File, len(args))
	for i, a := range args {
		files[i] = audit.FileAt(a)
	}
	return [][]audit.File{files}, nil
}

func readHeads(path string, stdin io.Reader) ([]audit.HeadAt, error) {
	if path == "-" {
		return audit.ReadHeads(stdin, "-")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return audit.ReadHeads(f, path)
}

// printVerifyReport prints one line per file, its problems under it, and a
// summary; it reports whether the set verified.
func printVerifyReport(w io.Writer, rep audit.SetReport) bool {
	byFile := map[string][]*audit.BreakError{}
	for _, p := range rep.Problems {
		var be *audit.BreakError
		if errors.As(p, &be) {
			byFile[be.File] = append(byFile[be.File], be)
		}
	}
	for _, f := range rep.Files {
		status := "ok"
		if f.Problems > 0 {
			status = "BROKEN"
		}
		fmt.Fprintf(w, "%s: %s, %s", f.File.Path, status, plural(f.Lines, "line"))
		if f.FirstSeq > 0 {
			fmt.Fprintf(w, ", %s", seqRange(f.FirstSeq, f.LastSeq))
		}
		fmt.Fprintln(w)
		n := min(f.Problems, len(byFile[f.File.Path]))
		for _, be := range byFile[f.File.Path][:n] {
			at := fmt.Sprintf("line %d", be.Line)
			if be.Seq > 0 {
				at += fmt.Sprintf(" (seq %d)", be.Seq)
			}
			fmt.Fprintf(w, "  %s: %s\n", at, untrusted.Terminal(be.Reason))
		}
		byFile[f.File.Path] = byFile[f.File.Path][n:]
	}
	var chain int
	for _, p := range rep.Problems {
		if errors.Is(p, audit.ErrBroken) {
			chain++
		}
	}
	if rep.MoreProblems > 0 {
		fmt.Fprintf(w, "  … and %d more problems\n", rep.MoreProblems)
	}
	if chain > 0 || rep.MoreProblems > 0 {
		fmt.Fprintf(w, "broken: %s in %s, %s read\n", plural(chain+rep.MoreProblems, "problem"), plural(len(rep.Files), "file"), plural(rep.Lines, "line"))
		return false
	}
	fmt.Fprintf(w, "ok: %s, %s", plural(len(rep.Files), "file"), plural(rep.Lines, "line"))
	if rep.LastSeq > 0 {
		fmt.Fprintf(w, ", %s", seqRange(rep.FirstSeq, rep.LastSeq))
	}
	fmt.Fprint(w, ", chain intact")
	switch {
	case rep.PrunedAt != nil:
		fmt.Fprintf(w, "; it starts after %s, removed by retention (recorded at %s line %d)", rep.StartsAfter, rep.PrunedAt.Path, rep.PrunedAt.Line)
	case rep.StartsAfter != "":
		fmt.Fprintf(w, "; it starts after %s, not checked (--partial)", rep.StartsAfter)
	}
	fmt.Fprintln(w)
	return true
}

// printHeadReport prints what the checkpoints showed; it reports whether
// they agree with the log.
func printHeadReport(w io.Writer, rep audit.SetReport, source, name string) bool {
	ok := true
	for _, p := range rep.Problems {
		var he *audit.HeadError
		if errors.As(p, &he) {
			fmt.Fprintf(w, "head: CUT OFF: %s line %d: %s\n", he.Head.Source, he.Head.Line, he.Reason)
			ok = false
		}
	}
	h := rep.Heads
	switch {
	case h.Newest != nil:
		verb := "match"
		if h.Checked == 1 {
			verb = "matches"
		}
		fmt.Fprintf(w, "head: %s of %s %s; the newest, seq %d of %s, is %s line %d",
			plural(h.Checked, "checkpoint"), source, verb, h.Newest.Seq, h.Newest.Time.Format(time.RFC3339Nano), h.NewestAt.Path, h.NewestAt.Line)
		if h.Unchecked > 0 {
			fmt.Fprintf(w, "; %s from before the set's first line (or of an empty log) not checked", plural(h.Unchecked, "checkpoint"))
		}
		fmt.Fprintln(w)
	case ok:
		fmt.Fprintf(w, "head: FAILED: %s has no checkpoint of %s that this set can be checked against\n", source, name)
		ok = false
	}
	return ok
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func seqRange(a, b int64) string {
	if a == b {
		return fmt.Sprintf("seq %d", a)
	}
	return fmt.Sprintf("seq %d-%d", a, b)
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
