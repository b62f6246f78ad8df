package wire_test

import (
	"strings"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
)

// TestSandboxDescriptionForNamesTheImagesLanguages: the run tool's
// description names the languages given, in the protocol's order, and
// every language (SandboxDescription itself) when none or none known is
// given.
func TestSandboxDescriptionForNamesTheImagesLanguages(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		languages []string
		want      string // the description's language sentence
	}{
		{name: "every language is the pinned description", languages: []string{"node", "sh", "python"}, want: `language: "python", "sh" or "node". `},
		{name: "an image without node", languages: []string{"python", "sh"}, want: `language: "python" or "sh". `},
		{name: "one language", languages: []string{"sh"}, want: `language: "sh". `},
		{name: "unknown languages: all of them", languages: nil, want: `language: "python", "sh" or "node". `},
		{name: "no known language: all of them", languages: []string{"ruby"}, want: `language: "python", "sh" or "node". `},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := wire.SandboxDescriptionFor(tc.languages)
			if !strings.Contains(got, tc.want) || strings.Count(got, "language: ") != 1 {
				t.Errorf("description has not %q once:\n%s", tc.want, got)
			}
			if all := strings.Contains(tc.want, `"node"`) && strings.Contains(tc.want, `"sh"`) && strings.Contains(tc.want, `"python"`); all != (got == wire.SandboxDescription) {
				t.Errorf("description for %v is SandboxDescription: %v, want %v", tc.languages, !all, all)
			}
		})
	}
}
