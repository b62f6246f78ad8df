package docker

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/workspace"
)

// A run that asks for a snapshot (wantsSnapshot) gets /workspace back on
// standard output after the end mark: a tar in base64, then the snapshot
// mark "\x1egatekeeper-snap <tag> <code>\x1e", code being tar's exit status
// in three digits (see launcher). Base64 has no \x1e, so the first \x1e
// after the end mark starts the snapshot mark. The program has ended (and
// every other process with it) before the end mark, so nothing else
// writes there; a program that forges the marks (knowing the tag) can
// only spoil or forge its own workspace's snapshot, which is bounded and
// checked like any other.

const snapMarkPrefix = "\x1egatekeeper-snap "

// snapshotSink is standard output past the end mark: it passes the base64
// text on to a pipe, at most max bytes of it, and closes the pipe at the
// snapshot mark (with an error unless tar exited 0), or with an error when
// the stream is too long, malformed, or ends without the mark. Writes come
// from one goroutine (the output copy) and never fail, so that the stream
// keeps draining.
type snapshotSink struct {
	lead []byte // snapMarkPrefix + tag + " "
	pw   *io.PipeWriter
	max  int64
	left int64
	mark []byte // the snapshot mark as it arrives; nil before its first byte
	done bool
}

func newSnapshotSink(tag string, pw *io.PipeWriter, max int64) *snapshotSink {
	return &snapshotSink{lead: []byte(snapMarkPrefix + tag + " "), pw: pw, max: max, left: max}
}

func (k *snapshotSink) Write(p []byte) (int, error) {
	if k.done {
		return len(p), nil
	}
	if k.mark == nil {
		body := p
		i := bytes.IndexByte(p, '\x1e')
		if i >= 0 {
			body = p[:i]
		}
		if int64(len(body)) > k.left {
			k.fail(fmt.Errorf("the snapshot is over %d bytes of base64", k.max))
			return len(p), nil
		}
		k.left -= int64(len(body))
		if len(body) > 0 {
			if _, err := k.pw.Write(body); err != nil {
				k.done = true // the receiver stopped reading; it knows why
				return len(p), nil
			}
		}
		if i < 0 {
			return len(p), nil
		}
		k.mark = append([]byte{}, p[i:]...)
	} else {
		k.mark = append(k.mark, p...)
	}
	whole := len(k.lead) + 4
	if len(k.mark) < whole {
		if !bytes.HasPrefix(k.lead, k.mark[:min(len(k.mark), len(k.lead))]) {
			k.fail(errors.New("the snapshot's end is malformed"))
		}
		return len(p), nil
	}
	code, ok := parseCode(k.mark[len(k.lead):whole])
	switch {
	case !bytes.HasPrefix(k.mark, k.lead) || !ok:
		k.fail(errors.New("the snapshot's end is malformed"))
	case code != 0:
		k.fail(fmt.Errorf("tar exited %d while making it", code))
	default:
		_ = k.pw.Close()
		k.done = true
	}
	return len(p), nil
}

// finish ends the stream once the output ended: without the snapshot
// mark, the snapshot is incomplete.
func (k *snapshotSink) finish() {
	if !k.done {
		k.fail(errors.New("the sandbox ended before its snapshot of " + workspaceDir + " was complete"))
	}
}

func (k *snapshotSink) fail(err error) {
	_ = k.pw.CloseWithError(err)
	k.done = true
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
	max := (workspace.MaxStreamBytes(sb.WorkspaceBytes) + 2) / 3 * 4
	sn := &snapshot{sink: newSnapshotSink(p.tag, pw, max), done: make(chan struct{})}
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
		if f == nil {
			_, _ = io.Copy(io.Discard, pr)
			return
		}
		rec, err := workspace.Receive(base64.NewDecoder(base64.StdEncoding, pr), f, sb.WorkspaceBytes, want)
		_ = pr.CloseWithError(io.ErrClosedPipe)
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
