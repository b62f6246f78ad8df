package launch

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/workspace"
)

// A run that asks for a snapshot (WantsSnapshot) gets /workspace back on
// standard output after the end mark: a tar stream (GNU tar's, padded with
// zero blocks to its record size), then the snapshot mark
// "\x1egatekeeper-snap <tag> <code>\x1e", code being tar's exit status in
// three digits (see Command). The receiver reads the tar to its end
// blocks, which it knows from the tar's own structure whatever the files
// hold, then the zero padding and the mark. The program has ended (and
// every other process with it) before the end mark, so nothing else
// writes there; a program that forges the marks (knowing the tag) can only
// spoil or forge its own workspace's snapshot, which is bounded and
// checked like any other.

const snapMarkPrefix = "\x1egatekeeper-snap "

// maxSnapPadding bounds the zero bytes between the tar's end and the
// snapshot mark: GNU tar pads its output to a record of 20 blocks.
const maxSnapPadding = 20 * 512

// SnapshotSink is standard output past the end mark: it passes at most max
// bytes on to a pipe and then fails it, and ends it, with an error, when
// the stream ends (the receiver, having read the snapshot mark, no longer
// reads). Writes come from one goroutine (the output copy) and never fail,
// so that the stream keeps draining.
type SnapshotSink struct {
	pw   *io.PipeWriter
	max  int64
	left int64
	done bool
}

func newSnapshotSink(pw *io.PipeWriter, max int64) *SnapshotSink {
	return &SnapshotSink{pw: pw, max: max, left: max}
}

func (k *SnapshotSink) Write(p []byte) (int, error) {
	if k.done {
		return len(p), nil
	}
	if int64(len(p)) > k.left {
		k.fail(fmt.Errorf("the snapshot is over %d bytes", k.max))
		return len(p), nil
	}
	k.left -= int64(len(p))
	if _, err := k.pw.Write(p); err != nil {
		k.done = true // the receiver stopped reading; it knows why
	}
	return len(p), nil
}

// finish ends the stream once the output ended: a receiver still reading
// has an incomplete snapshot.
func (k *SnapshotSink) finish() {
	if !k.done {
		k.fail(errors.New("the sandbox ended before its snapshot of " + WorkspaceDir + " was complete"))
	}
}

func (k *SnapshotSink) fail(err error) {
	_ = k.pw.CloseWithError(err)
	k.done = true
}

// readSnapMark reads what follows a snapshot's tar: zero padding, then the
// snapshot mark with tag, whose code must be 0.
func readSnapMark(r *bufio.Reader, tag string) error {
	for n := 0; ; n++ {
		c, err := r.ReadByte()
		if err != nil {
			return fmt.Errorf("the snapshot's end: %w", err)
		}
		if c == '\x1e' {
			break
		}
		if c != 0 || n >= maxSnapPadding {
			return errors.New("the snapshot's end is malformed")
		}
	}
	lead := snapMarkPrefix[1:] + tag + " "
	rest := make([]byte, len(lead)+4)
	if _, err := io.ReadFull(r, rest); err != nil {
		return fmt.Errorf("the snapshot's end: %w", err)
	}
	code, ok := parseCode(rest[len(lead):])
	switch {
	case string(rest[:len(lead)]) != lead || !ok:
		return errors.New("the snapshot's end is malformed")
	case code != 0:
		return fmt.Errorf("tar exited %d while making it", code)
	}
	return nil
}

// Snapshot receives one run's snapshot: a goroutine reads the sink's pipe
// with workspace.Receive into a file of the workspace's TempDir (or the
// system's, for a run without a Workspace). Its fields may be read once
// Done is closed.
type Snapshot struct {
	// Sink is where standard output past the end mark goes (EndMarks.Stream).
	Sink *SnapshotSink
	// Done is closed when the receiver returned.
	Done chan struct{}
	file *os.File // nil when it could not be made
	rec  workspace.Received
	// Err says why the snapshot is not usable.
	Err  error
	kept bool // the file was handed to the Workspace
}

// StartSnapshot starts the receiver of spec's snapshot, whose mark carries
// tag, in a goroutine of wg. before returns the files the run started
// with.
func StartSnapshot(spec runner.Spec, tag string, before func() workspace.Manifest, wg *sync.WaitGroup) *Snapshot {
	pr, pw := io.Pipe()
	sb := spec.Sandbox
	max := workspace.MaxStreamBytes(sb.WorkspaceBytes) + maxSnapPadding + int64(len(snapMarkPrefix)+len(tag)+5)
	sn := &Snapshot{Sink: newSnapshotSink(pw, max), Done: make(chan struct{})}
	dir := os.TempDir()
	if spec.Workspace != nil {
		dir = spec.Workspace.TempDir()
	}
	f, err := os.CreateTemp(dir, "snapshot-*.tar")
	if err != nil {
		sn.Err = fmt.Errorf("no room for it: %w", err)
	}
	sn.file = f
	outputs, _ := workspace.CleanOutputs(spec.Outputs) // checked by Check
	want := workspace.Want{Paths: outputs, Before: before, MaxFiles: sb.MaxFiles, MaxBytes: sb.MaxFilesBytes}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(sn.Done)
		// Closing the pipe ends the sink's writes at once, whatever is
		// left of the stream.
		defer pr.CloseWithError(io.ErrClosedPipe)
		if f == nil {
			return
		}
		br := bufio.NewReaderSize(pr, 64<<10)
		rec, err := workspace.Receive(br, f, sb.WorkspaceBytes, want)
		if err == nil {
			err = readSnapMark(br, tag)
		}
		sn.rec, sn.Err = rec, err
	}()
	return sn
}

// Close removes the snapshot's file unless the Workspace took it. Call it
// once the receiver returned; a nil Snapshot is fine.
func (sn *Snapshot) Close() {
	if sn == nil || sn.file == nil {
		return
	}
	_ = sn.file.Close()
	if !sn.kept {
		_ = os.Remove(sn.file.Name())
	}
}

// Ending is how a run that asked for a snapshot ended, as its backend saw
// it.
type Ending struct {
	// Ended: the program's end marks arrived.
	Ended bool
	// Late: the snapshot did not arrive within SnapshotGrace.
	Late bool
	// InputErr is why the input could not be sent whole, if it could not.
	InputErr error
}

// Take hands a run's received snapshot to its Workspace and its files to
// res, or says in res why the workspace was not saved: only a run whose
// program ended by itself (its end marks arrived), whose input was sent
// whole and whose snapshot arrived in time and was accepted replaces the
// saved workspace; any other keeps it as it was before the run. It
// returns why the workspace was not saved ("" when it was, or when the
// run has no Workspace and its files were returned). Call it once Done
// is closed and res.Reason is set.
func (sn *Snapshot) Take(res *runner.Result, spec runner.Spec, e Ending) (why string) {
	switch {
	case res.Reason == runner.TimedOut:
		why = "the run timed out"
	case res.Reason == runner.Cancelled:
		why = "the run was cancelled"
	case e.InputErr != nil:
		why = "its input could not be sent whole (" + e.InputErr.Error() + ")"
	case !e.Ended:
		why = "the sandbox ended before the program's end (did it kill the launcher, or fail to unpack its files?)"
	case e.Late:
		why = fmt.Sprintf("its snapshot did not arrive within %s", SnapshotGrace)
	case sn.Err != nil:
		why = "its snapshot was not accepted: " + sn.Err.Error()
	}
	if why == "" {
		res.Files, res.FilesOmitted = sn.rec.Files, sn.rec.Omitted
		if spec.Workspace == nil {
			return ""
		}
		if err := spec.Workspace.Replace(sn.file.Name(), sn.rec.Bytes); err != nil {
			why = "it could not be stored: " + err.Error()
		} else {
			sn.kept = true
			res.Workspace = runner.WorkspaceSaved
			return ""
		}
	}
	if spec.Workspace == nil {
		return why
	}
	res.Workspace = runner.WorkspaceNotSaved
	res.WorkspaceNote = why + ", so " + WorkspaceDir + " was not saved: the next run starts from it as it was before this run"
	return why
}
