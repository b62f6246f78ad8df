package launch

import (
	"sort"
	"strings"
	"time"
)

// Where the launcher writes the egress proxy's CA in a sandbox whose
// traffic the proxy intercepts (see Egress).
const (
	EgressDir = TmpDir + "/.gatekeeper"
	// CAFile holds the proxy's CA certificate alone.
	CAFile = EgressDir + "/ca.pem"
	// CABundleFile holds the image's trust store
	// (/etc/ssl/certs/ca-certificates.crt, when present) and then the CA.
	CABundleFile = EgressDir + "/ca-bundle.pem"
)

// Egress is what a sandbox whose traffic the egress proxy intercepts
// needs before its program starts: the proxy's CA, which the launcher
// writes to CAFile and CABundleFile, and the sentinels that live in
// files, which it writes there (mode 0400, owned by the sandbox's user,
// parent directories made). It writes them once the workspace is
// unpacked (so that a saved workspace cannot bring back another
// sandbox's sentinel), in a session at its first run only. A failure to
// write them ends the run before its program starts (exit 125).
type Egress struct {
	// CA is the proxy's CA certificate, PEM.
	CA []byte
	// Files are sentinel files: absolute path (below TmpDir or
	// WorkspaceDir, no newline) → sentinel.
	Files map[string]string
}

// Env is the program's variables that make the usual clients trust the
// proxy's CA: the bundle for OpenSSL, Python requests, curl, pip, git
// and npm, the CA alone for Node (which adds it to its own store).
func (e *Egress) Env() []string {
	return []string{
		"SSL_CERT_FILE=" + CABundleFile,
		"REQUESTS_CA_BUNDLE=" + CABundleFile,
		"CURL_CA_BUNDLE=" + CABundleFile,
		"PIP_CERT=" + CABundleFile,
		"GIT_SSL_CAINFO=" + CABundleFile,
		"npm_config_cafile=" + CABundleFile,
		"NODE_EXTRA_CA_CERTS=" + CAFile,
	}
}

// systemCAFile is the image's trust store (Debian's and Alpine's path).
const systemCAFile = "/etc/ssl/certs/ca-certificates.crt"

// egressWrite is the launcher's part that writes Egress's files: with
// $eca the CA, $efiles the path and sentinel lines, $edir the directory
// of the CA files and $esys the image's trust store. It exits with 125
// when it cannot write one.
const egressWrite = `ewrite() {
  mkdir -p -m 0755 "$edir" && printf '%s' "$eca" >"$edir/ca.pem" || return 1
  { if [ -r "$esys" ]; then cat "$esys" && echo; fi; printf '%s' "$eca"; } >"$edir/ca-bundle.pem" || return 1
  while [ $# -ge 2 ]; do
    mkdir -p "${1%/*}" && rm -f "$1" && (umask 0377 && printf '%s' "$2" >"$1") || return 1
    shift 2
  done
}
oifs=$IFS
IFS='
'
set -f
ewrite $efiles || { echo "gatekeeper: cannot write the egress proxy's files" >&2; exit 125; }
set +f
IFS=$oifs`

// options are the launcher's: "--egress <CA PEM> <files>", files being
// path and sentinel lines, in path order.
func (e *Egress) options() []string {
	if e == nil {
		return nil
	}
	paths := make([]string, 0, len(e.Files))
	for p := range e.Files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var files strings.Builder
	for _, p := range paths {
		files.WriteString(p + "\n" + e.Files[p] + "\n")
	}
	return []string{"--egress", string(e.CA), files.String()}
}

// EgressCommand is Command for a sandbox whose traffic the egress proxy
// intercepts: its launcher writes e's files before the program starts.
func EgressCommand(life, wait time.Duration, env []string, e *Egress) []string {
	return command(life, wait, "0", e.options(), env)
}
