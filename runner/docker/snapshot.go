package docker

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

// A run that asks for a snapshot (wantsSnapshot) gets /workspace back on
// standard output after the end mark: a tar stream (GNU tar's, padded with
// zero blocks to its record size), then the snapshot mark
// "\x1egatekeeper-snap <tag> <code>\x1e", code being tar's exit status in
// three digits (see launcher). The receiver reads the tar to its end
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

// snapshotSink is standard output past the end mark: it passes at most max
// bytes on to a pipe and then fails it, and ends it, with an error, when
// the stream ends (the receiver, having read the snapshot mark, no longer
// reads). Writes come from one goroutine (the output copy) and never fail,
// so that the stream keeps draining.
type snapshotSink struct {
	pw   *io.PipeWriter
	max  int64
	left int64
	done bool
}

func newSnapshotSink(pw *io.PipeWriter, max int64) *snapshotSink {
	return &snapshotSink{pw: pw, max: max, left: max}
}

func (k *snapshotSink) Write(p []byte) (int, error) {
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
func (k *snapshotSink) finish() {
	if !k.done {
		k.fail(errors.New("the sandbox ended before its snapshot of " + workspaceDir + " was complete"))
	}
}

func (k *snapshotSink) fail(err error) {
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

// snapshot receives one run's snapshot: a goroutine reads the sink's pipe
// with workspace.Receive into a file of the workspace's TempDir (or the
// system's, for a run without a Workspace).
type snapshot struct {
	sink *snapshotSink
	done chan struct{} // closed when the receiver returned
	file *os.File      // nil when it could not be made
	rec  workspace.Received
	err  error // why the snapshot is not usable
	kept bool  // the file was handed to the Workspace
}

// startSnapshot starts the receiver of spec's snapshot in a goroutine of
// wg. before returns the files the run started with.
func startSnapshot(spec runner.Spec, p *plan, before func() workspace.Manifest, wg *sync.WaitGroup) *snapshot {
	pr, pw := io.Pipe()
	sb := spec.Sandbox
	max := workspace.MaxStreamBytes(sb.WorkspaceBytes) + maxSnapPadding + int64(len(snapMarkPrefix)+len(p.tag)+5)
	sn := &snapshot{sink: newSnapshotSink(pw, max), done: make(chan struct{})}
	dir := os.TempDir()
	if spec.Workspace != nil {
		dir = spec.Workspace.TempDir()
	}
	f, err := os.CreateTemp(dir, "snapshot-*.tar")
	if err != nil {
		sn.err = fmt.Errorf("no room for it: %w", err)
	}
	sn.file = f
	outputs, _ := workspace.CleanOutputs(spec.Outputs) // checked by plan
	want := workspace.Want{Paths: outputs, Before: before, MaxFiles: sb.MaxFiles, MaxBytes: sb.MaxFilesBytes}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(sn.done)
		// Closing the pipe ends the sink's writes at once, whatever is
		// left of the stream.
		defer pr.CloseWithError(io.ErrClosedPipe)
		if f == nil {
			return
		}
		br := bufio.NewReaderSize(pr, 64<<10)
		rec, err := workspace.Receive(br, f, sb.WorkspaceBytes, want)
		if err == nil {
			err = readSnapMark(br, p.tag)
		}
		sn.rec, sn.err = rec, err
	}()
	return sn
}

// close removes the snapshot's file unless the Workspace took it. Call it
// once the receiver returned.
func (sn *snapshot) close() {
	if sn == nil || sn.file == nil {
		return
	}
	_ = sn.file.Close()
	if !sn.kept {
		_ = os.Remove(sn.file.Name())
	}
}
