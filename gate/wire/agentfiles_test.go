package wire

import (
	"encoding/base64"
	"testing"
)

func TestMatchesToAgent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		path    string
		toAgent []string
		want    bool
	}{
		{"the same path matches", "report.csv", []string{"report.csv"}, true},
		{"a leading ./ is ignored", "report.csv", []string{"./report.csv"}, true},
		{"a leading /workspace/ is ignored", "out/a.png", []string{"/workspace/out/a.png"}, true},
		{"a directory matches the files under it", "out/sub/a.png", []string{"out"}, true},
		{"a directory with a slash matches too", "out/a.png", []string{"out/"}, true},
		{"a directory does not match a sibling that shares its prefix", "outside.txt", []string{"out"}, false},
		{"a pattern matches within one directory", "charts/a.png", []string{"charts/*.png"}, true},
		{"a pattern does not cross a slash", "charts/x/a.png", []string{"charts/*.png"}, false},
		{"dot names every file", "any/thing.txt", []string{"."}, true},
		{"another name does not match", "notes.txt", []string{"report.csv", "*.png"}, false},
		{"no entries match nothing", "report.csv", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := MatchesToAgent(tc.path, tc.toAgent); got != tc.want {
				t.Errorf("MatchesToAgent(%q, %q) = %v, want %v", tc.path, tc.toAgent, got, tc.want)
			}
		})
	}
}

func TestKeepForAgentMarksTheNamedFilesAndMovesTheirTextToBase64(t *testing.T) {
	t.Parallel()
	text, other := "id,name\n1,a\n", "abc"
	bin := "AP8="
	r := RunReport{Files: []File{
		{Path: "notes.txt", Size: 3, SHA256: "n", Text: &other},
		{Path: "report.csv", Size: int64(len(text)), SHA256: "r", Text: &text},
		{Path: "out/a.bin", Size: 2, SHA256: "b", Base64: &bin},
	}}
	kept := r.KeepForAgent([]string{"report.csv", "out"})
	if len(kept) != 2 || kept[0].Path != "report.csv" || kept[1].Path != "out/a.bin" || !kept[0].ToAgent || !kept[1].ToAgent {
		t.Fatalf("kept %+v; want report.csv and out/a.bin, marked", kept)
	}
	if f := r.Files[0]; f.ToAgent || f.Text == nil || *f.Text != "abc" {
		t.Errorf("notes.txt %+v: want it untouched", f)
	}
	csv := r.Files[1]
	if !csv.ToAgent || csv.Text != nil || csv.Base64 == nil {
		t.Fatalf("report.csv %+v: want it marked, its content in base64 only", csv)
	}
	if got, err := base64.StdEncoding.DecodeString(*csv.Base64); err != nil || string(got) != text {
		t.Errorf("report.csv base64 decodes to %q (%v), want %q", got, err, text)
	}
	if f := r.Files[2]; !f.ToAgent || f.Base64 != &bin {
		t.Errorf("out/a.bin %+v: want it marked, its base64 kept", f)
	}
	if kept := (&RunReport{Files: []File{}}).KeepForAgent(nil); kept != nil {
		t.Errorf("no to_agent kept %v", kept)
	}
}
