package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/gate/bundle"
	"github.com/gatekeeper-ai/gatekeeper/gate/decisionlog"
)

// bundleOptions are serve's --bundle flags (docs/BUNDLES.md).
type bundleOptions struct {
	url, tokenFile, keyFile, keyID, cacheDir string
	poll                                     time.Duration
	allowRollback                            bool
}

func bundleFlags(fs *flag.FlagSet) *bundleOptions {
	o := &bundleOptions{}
	fs.StringVar(&o.url, "bundle", "", "take the policy from the OPA bundle at this http(s) URL instead of --policy and --rego-dir (docs/BUNDLES.md)")
	fs.DurationVar(&o.poll, "bundle-poll", time.Minute, "time between bundle downloads (whole seconds; a 304 costs nothing; long polling where the server supports it)")
	fs.StringVar(&o.tokenFile, "bundle-token-file", "", "file holding a bearer token for the bundle service")
	fs.StringVar(&o.keyFile, "bundle-verification-key", "", "PEM public key (RSA or ECDSA) every bundle must be signed with; unsigned bundles, other keys and signatures without a key id are refused")
	fs.StringVar(&o.keyID, "bundle-key-id", "", "the key id (JWT kid) the signature must name (required with --bundle-verification-key)")
	fs.BoolVar(&o.allowRollback, "bundle-allow-rollback", false, "accept a bundle whose gatekeeper.serial is not above the running one's")
	fs.StringVar(&o.cacheDir, "bundle-cache", "", "directory keeping the last good bundle, used at start while the bundle service is down (default <state-dir>/bundle)")
	return o
}

// openPolicy opens the engine on the policy file, or with --bundle on
// the bundle, whose manager it returns too.
func openPolicy(ctx context.Context, eo *engineOptions, bo *bundleOptions, fs *flag.FlagSet, stateDir string, log *slog.Logger) (*gate.Engine, *bundle.Manager, error) {
	if bo.url == "" {
		eng, err := eo.open(ctx, log)
		return eng, nil, err
	}
	return bo.open(ctx, eo, fs, stateDir, log)
}

// policyName is where serve's policy comes from, for its start-up line.
func policyName(eo *engineOptions, bo *bundleOptions) string {
	if bo.url != "" {
		return "bundle " + bo.url
	}
	return eo.in.PolicyFile
}

// runBundles downloads bundles until ctx ends.
func runBundles(ctx context.Context, m *bundle.Manager, log *slog.Logger) {
	if err := m.Run(ctx); err != nil {
		log.Error("policy bundle downloads stopped; the running policy stays", "err", err)
	}
}

// open makes the bundle manager and the engine it feeds. With no usable
// bundle (none cached, or the cache refused) the engine denies every
// call saying why, until a download brings one.
func (o *bundleOptions) open(ctx context.Context, eo *engineOptions, fs *flag.FlagSet, stateDir string, log *slog.Logger) (*gate.Engine, *bundle.Manager, error) {
	if flagSet(fs, "rego-dir") || flagSet(fs, "policy") {
		return nil, nil, errors.New("--bundle takes the policy and the Rego modules from the bundle: drop --policy and --rego-dir")
	}
	var v *bundle.Verification
	switch {
	case o.keyFile != "":
		var err error
		if v, err = bundle.LoadVerification(o.keyFile, o.keyID); err != nil {
			return nil, nil, err
		}
	case o.keyID != "":
		return nil, nil, errors.New("--bundle-key-id needs --bundle-verification-key")
	default:
		log.Warn("policy bundles are not verified: without --bundle-verification-key anyone who can serve or alter the bundle sets the policy", "url", o.url)
	}
	cache := o.cacheDir
	if cache == "" {
		cache = filepath.Join(stateDir, "bundle")
	}
	m, err := bundle.New(bundle.Config{URL: o.url, Poll: o.poll, TokenFile: o.tokenFile, Verify: v, AllowRollback: o.allowRollback, CacheDir: cache, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	in := eo.in
	in.Logger, in.Source = log, m
	eng, err := gate.Open(ctx, in)
	if err != nil {
		return nil, nil, fmt.Errorf("policy bundle: %w", err)
	}
	m.Attach(eng)
	return eng, m, nil
}

// readiness is /readyz's answer under --bundle.
func bundleReadiness(m *bundle.Manager, eng *gate.Engine) func() (any, bool) {
	return func() (any, bool) {
		s := m.Status()
		return readyStatus{Status: s, PolicyRevision: eng.Revision()}, s.Ready
	}
}

// readyStatus is bundle.Status with the engine's revision and, with
// --decision-log, the shipper's backlog and state (null without).
type readyStatus struct {
	bundle.Status
	PolicyRevision     string              `json:"policy_revision"`
	DecisionLogBacklog *int64              `json:"decision_log_backlog"`
	DecisionLog        *decisionlog.Status `json:"decision_log,omitempty"`
}

func cmdBundleBuild(ctx context.Context, args []string, env envLookup, stdout, stderr io.Writer) error {
	fs := newFlags("bundle build", "bundle build --policy FILE [--rego-dir DIR] [--revision R] [--serial N] [--signing-key KEY --key-id ID] -o bundle.tar.gz", stderr)
	policyFile := fs.String("policy", "sandbox.policy.yaml", "policy file")
	regoDir := fs.String("rego-dir", "", "directory of the operator's .rego files (*_test.rego are left out)")
	revision := fs.String("revision", "", "manifest revision (default: the serial)")
	serial := fs.Int64("serial", 0, "gatekeeper.serial, which must grow with every bundle (default: the current Unix time)")
	expires := fs.String("expires", "", "gatekeeper.expires: an RFC 3339 time or a duration from now (e.g. 720h) after which sidecars deny every call until a newer bundle comes")
	signingKey := fs.String("signing-key", "", "PEM private key (RSA or ECDSA) to sign the bundle with")
	keyID := fs.String("key-id", "", "key id (JWT kid) of the signing key, which sidecars' --bundle-key-id names")
	out := fs.String("o", "bundle.tar.gz", "output file")
	if err := parse(fs, args, env); err != nil {
		return err
	}
	o := bundle.BuildOptions{File: *policyFile, Revision: *revision, Serial: *serial, KeyID: *keyID}
	if o.Serial == 0 {
		o.Serial = time.Now().Unix()
	}
	if o.Revision == "" {
		o.Revision = strconv.FormatInt(o.Serial, 10)
	}
	if *expires != "" {
		t, err := time.Parse(time.RFC3339, *expires)
		if err != nil {
			d, derr := time.ParseDuration(*expires)
			if derr != nil {
				return fmt.Errorf("--expires %q: want an RFC 3339 time or a duration", *expires)
			}
			t = time.Now().Add(d)
		}
		o.Expires = t
	}
	var err error
	if o.Policy, err = os.ReadFile(*policyFile); err != nil {
		return err
	}
	if *regoDir != "" {
		if o.Modules, err = bundle.ReadModules(*regoDir); err != nil {
			return err
		}
	}
	if *signingKey != "" {
		if *keyID == "" {
			return errors.New("--signing-key needs --key-id: sidecars refuse a signature without a key id")
		}
		if o.SigningKey, err = os.ReadFile(*signingKey); err != nil {
			return err
		}
	}
	var buf bytes.Buffer
	if err := bundle.Build(&buf, o); err != nil {
		return err
	}
	// Load what was built as a sidecar would (but for the signature: the
	// sidecar's public key is not here), so that a broken policy never ships.
	c, err := bundle.ReadUnverified(buf.Bytes())
	if err != nil {
		return err
	}
	if _, err := gate.New(ctx, gate.Config{Source: c, Logger: slog.New(slog.DiscardHandler)}); err != nil {
		return err
	}
	if err := os.WriteFile(*out, buf.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: revision %s, serial %d, %d Rego module(s), signed: %v\n", *out, o.Revision, o.Serial, len(o.Modules), o.SigningKey != nil)
	return nil
}
