package kube

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// LeaseConfig is the guard against two live sidecars of one instance: a
// coordination.k8s.io Lease named for the instance in the runner's
// namespace, which Runner.Start takes and the runner renews while it
// lives. Without it (Config.Lease nil) nothing guards the instance in the
// cluster (gatekeeper run, which removes nothing).
type LeaseConfig struct {
	// Holder names this sidecar in the Lease (its Pod's name and UID, or
	// its host and pid); a random suffix makes it unique per process.
	Holder string
	// Duration is how long a Lease stands without renewal before another
	// sidecar may take it; 0 means DefaultLeaseDuration. Renew is how
	// often the holder renews it; 0 means a third of Duration.
	Duration, Renew time.Duration
}

// DefaultLeaseDuration is how long a crashed sidecar's Lease keeps its
// successor waiting.
const DefaultLeaseDuration = 15 * time.Second

// ErrLeaseHeld is wrapped by Start's error when a live sidecar holds the
// instance's Lease; ErrLeaseLost by a run's error once another sidecar
// took it from this one.
var (
	ErrLeaseHeld = errors.New("the instance's lease is held by a live sidecar")
	ErrLeaseLost = errors.New("this sidecar lost its instance's lease")
)

// LeaseName is the name of instance's Lease: a DNS subdomain, so an
// instance name with capitals or underscores gets a hash of its exact
// spelling, that two instances never share one.
func LeaseName(instance string) string {
	name := "gatekeeper-instance-" + strings.ToLower(strings.ReplaceAll(instance, "_", "-"))
	name = strings.TrimRight(strings.ReplaceAll(name, ".-", "-"), "-.")
	if name != "gatekeeper-instance-"+instance {
		sum := sha256.Sum256([]byte(instance))
		name += "-" + hex.EncodeToString(sum[:4])
	}
	return name
}

// instanceLease holds the instance's Lease for the runner: taken by take,
// renewed by a goroutine it owns until release.
type instanceLease struct {
	r        *platform
	name     string
	holder   string
	duration time.Duration
	renew    time.Duration

	mu      sync.Mutex
	held    *coordinationv1.Lease // the record as last written; nil before take or after release
	renewed time.Time             // when the last renewal succeeded
	lost    error                 // set for good when another holder took the Lease

	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

func newInstanceLease(r *platform, c LeaseConfig) *instanceLease {
	if c.Duration <= 0 {
		c.Duration = DefaultLeaseDuration
	}
	if c.Renew <= 0 || c.Renew >= c.Duration {
		c.Renew = c.Duration / 3
	}
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	holder := c.Holder
	if holder == "" {
		holder = "gatekeeper"
	}
	return &instanceLease{r: r, name: LeaseName(r.cfg.Instance), holder: holder + "-" + hex.EncodeToString(suffix),
		duration: c.Duration, renew: c.Renew, stop: make(chan struct{}), done: make(chan struct{})}
}

func (l *instanceLease) leases() interface {
	Get(context.Context, string, metav1.GetOptions) (*coordinationv1.Lease, error)
	Create(context.Context, *coordinationv1.Lease, metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(context.Context, *coordinationv1.Lease, metav1.UpdateOptions) (*coordinationv1.Lease, error)
	Delete(context.Context, string, metav1.DeleteOptions) error
} {
	return l.r.cs.CoordinationV1().Leases(l.r.cfg.Namespace)
}

// take takes the Lease, or returns why not. A Lease nobody holds (none,
// or released) is taken at once. A held one is watched: when its holder
// renews it within its duration the holder is alive, and take refuses
// (ErrLeaseHeld, naming the holder); when the duration passes without a
// renewal (measured on this process's clock, from when it first saw the
// record, so clocks need not agree) the holder is gone, and take takes it
// over. A conflict with a sidecar starting at the same time is decided by
// the API server's resourceVersion: one update wins, the other sees the
// winner renew.
func (l *instanceLease) take(ctx context.Context) error {
	var seen *coordinationv1.Lease
	var seenAt time.Time
	tick := time.NewTicker(l.renew / 2)
	defer tick.Stop()
	for {
		cur, err := l.leases().Get(ctx, l.name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			created, err := l.leases().Create(ctx, l.record(nil), metav1.CreateOptions{})
			if err == nil {
				return l.taken(created, "created")
			}
			if !apierrors.IsAlreadyExists(err) {
				return apiErr("create lease "+l.name, err)
			}
			continue // another took it meanwhile: look at it
		case err != nil:
			return apiErr("get lease "+l.name, err)
		}
		holder := holderOf(cur)
		switch {
		case holder == "":
			if err := l.update(ctx, cur, "released"); !apierrors.IsConflict(err) {
				return err
			}
		case seen == nil:
			seen, seenAt = cur, time.Now()
			l.r.log.Info("the instance's lease is held; waiting to see whether its holder renews it", "lease", l.name, "holder", holder, "for", l.durationOf(cur))
		case cur.ResourceVersion != seen.ResourceVersion:
			return fmt.Errorf("instance %q: %w: %s renews lease %s/%s (every %s at most); give this sidecar another name with --instance NAME (in a StatefulSet, each Pod's name is its own), or stop that one first",
				l.r.cfg.Instance, ErrLeaseHeld, holder, l.r.cfg.Namespace, l.name, l.durationOf(cur))
		case time.Since(seenAt) > l.durationOf(cur):
			err := l.update(ctx, cur, "taken over from "+holder+", which stopped renewing it")
			if !apierrors.IsConflict(err) {
				return err
			}
			seen = nil // someone else wrote it: look again
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("take lease %s: %w: %w", l.name, runner.ErrUnavailable, ctx.Err())
		}
	}
}

// update writes this process as cur's holder; a conflict is returned as
// is, for take to look again.
func (l *instanceLease) update(ctx context.Context, cur *coordinationv1.Lease, how string) error {
	next, err := l.leases().Update(ctx, l.record(cur), metav1.UpdateOptions{})
	if err != nil {
		if apierrors.IsConflict(err) {
			return err
		}
		return apiErr("update lease "+l.name, err)
	}
	return l.taken(next, how)
}

// taken records the Lease as held and starts renewing it.
func (l *instanceLease) taken(lease *coordinationv1.Lease, how string) error {
	l.mu.Lock()
	l.held, l.renewed = lease, time.Now()
	l.mu.Unlock()
	l.r.log.Info("took the instance's lease", "lease", l.name, "holder", l.holder, "how", how)
	go l.keep()
	return nil
}

// record is the Lease this process writes: cur (or a new one) with this
// process as holder and a renewal now.
func (l *instanceLease) record(cur *coordinationv1.Lease) *coordinationv1.Lease {
	now := metav1.NewMicroTime(time.Now())
	secs := int32((l.duration + time.Second - 1) / time.Second)
	out := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: l.name, Namespace: l.r.cfg.Namespace,
		Labels: map[string]string{runner.LabelInstance: l.r.cfg.Instance}}}
	if cur != nil {
		out = cur.DeepCopy()
	}
	transitions := int32(0)
	if out.Spec.LeaseTransitions != nil {
		transitions = *out.Spec.LeaseTransitions
	}
	if holderOf(out) != l.holder {
		transitions++
		out.Spec.AcquireTime = &now
	}
	out.Spec.HolderIdentity, out.Spec.LeaseDurationSeconds = &l.holder, &secs
	out.Spec.RenewTime, out.Spec.LeaseTransitions = &now, &transitions
	return out
}

func holderOf(l *coordinationv1.Lease) string {
	if l == nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func (l *instanceLease) durationOf(lease *coordinationv1.Lease) time.Duration {
	if lease.Spec.LeaseDurationSeconds == nil || *lease.Spec.LeaseDurationSeconds <= 0 {
		return l.duration
	}
	return time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second
}

// keep renews the Lease every renew period until release or until
// another holder took it.
func (l *instanceLease) keep() {
	defer close(l.done)
	tick := time.NewTicker(l.renew)
	defer tick.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-tick.C:
		}
		if l.renewOnce() {
			return
		}
	}
}

// renewOnce renews the Lease once and reports whether it is lost for good.
func (l *instanceLease) renewOnce() (lost bool) {
	ctx, cancel := context.WithTimeout(context.Background(), l.renew)
	defer cancel()
	l.mu.Lock()
	held := l.held
	l.mu.Unlock()
	next, err := l.leases().Update(ctx, l.record(held), metav1.UpdateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		// Written by someone else (or deleted): is it still ours?
		cur, gerr := l.leases().Get(ctx, l.name, metav1.GetOptions{})
		switch {
		case gerr == nil && holderOf(cur) == l.holder:
			next, err = l.leases().Update(ctx, l.record(cur), metav1.UpdateOptions{})
		case gerr == nil || apierrors.IsNotFound(gerr):
			return l.lose(holderOf(cur))
		default:
			err = gerr
		}
	}
	if err != nil {
		l.r.log.Warn("renew the instance's lease", "lease", l.name, "err", err)
		return false
	}
	l.mu.Lock()
	l.held, l.renewed = next, time.Now()
	l.mu.Unlock()
	return false
}

// lose marks the Lease lost for good to holder.
func (l *instanceLease) lose(holder string) bool {
	if holder == "" {
		holder = "nobody (it was deleted)"
	}
	err := fmt.Errorf("%w to %s: another sidecar of instance %q took lease %s/%s, and owns the instance's sandboxes now; this one makes no more sandboxes (restart it, under its own --instance)",
		ErrLeaseLost, holder, l.r.cfg.Instance, l.r.cfg.Namespace, l.name)
	l.mu.Lock()
	l.lost, l.held = err, nil
	l.mu.Unlock()
	l.r.log.Error("lost the instance's lease: runs are refused", "lease", l.name, "holder", holder)
	return true
}

// check returns nil while this process may make sandboxes: it holds the
// Lease and renewed it within its duration (less one renew period, so
// that nobody can have taken it over meanwhile). Otherwise why not,
// wrapping runner.ErrUnavailable.
func (l *instanceLease) check() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.lost != nil:
		return fmt.Errorf("%w: %w", runner.ErrUnavailable, l.lost)
	case l.held == nil:
		return fmt.Errorf("instance %q does not hold its lease %s (not started, or stopped): %w", l.r.cfg.Instance, l.name, runner.ErrUnavailable)
	case time.Since(l.renewed) > l.duration-l.renew:
		return fmt.Errorf("instance %q could not renew its lease %s for %s: another sidecar may take it over, so no sandbox is made until a renewal succeeds: %w",
			l.r.cfg.Instance, l.name, time.Since(l.renewed).Round(time.Second), runner.ErrUnavailable)
	}
	return nil
}

// release stops the renewals and deletes the Lease if this process still
// holds it, so that a successor starts at once. A second call does
// nothing.
func (l *instanceLease) release() {
	l.mu.Lock()
	started := l.held != nil || l.lost != nil
	l.mu.Unlock()
	if !started {
		return // never taken
	}
	l.stopOnce.Do(func() { close(l.stop) })
	<-l.done
	l.mu.Lock()
	held := l.held
	l.held = nil
	l.mu.Unlock()
	if held == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	uid, rv := types.UID(held.UID), held.ResourceVersion
	err := l.leases().Delete(ctx, l.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		l.r.log.Warn("release the instance's lease; the next sidecar of the instance waits for it to expire", "lease", l.name, "err", err)
	}
}
