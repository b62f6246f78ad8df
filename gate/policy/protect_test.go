package policy_test

import (
	"os"
	"strings"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/gate/policy"
	"github.com/gatekeeper-ai/gatekeeper/internal/pathglob"
)

// TestTheDocsListTheBuiltinWriteProtectList pins docs/SANDBOX.md's table
// of built-in write-protect groups to BuiltinWriteProtect: each group's
// row says whether it can be lifted and lists every glob.
func TestTheDocsListTheBuiltinWriteProtectList(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/SANDBOX.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(string(doc), "\n") {
		if name, ok := strings.CutPrefix(line, "| `"); ok {
			if name, _, ok := strings.Cut(name, "` |"); ok {
				rows[name] = line
			}
		}
	}
	var liftable []string
	for _, g := range policy.BuiltinWriteProtect() {
		row, ok := rows[g.Name]
		if !ok {
			t.Errorf("docs/SANDBOX.md has no row for the write-protect group %s", g.Name)
			continue
		}
		lift := "| no |"
		if g.Liftable {
			lift = "| yes"
			liftable = append(liftable, "`"+g.Name+"`")
		}
		if !strings.Contains(row, lift) {
			t.Errorf("docs/SANDBOX.md row of %s does not say %q", g.Name, lift)
		}
		for _, glob := range g.Globs {
			if !strings.Contains(row, "`"+glob+"`") {
				t.Errorf("docs/SANDBOX.md row of %s does not list %s", g.Name, glob)
			}
		}
	}
	if row := rows["sandbox.fs.write_protect_allow"]; !strings.Contains(row, strings.Join(liftable[:len(liftable)-1], ", ")) {
		t.Errorf("docs/SANDBOX.md's sandbox.fs.write_protect_allow row does not name the liftable groups %v", liftable)
	}
}

func TestBuiltinWriteProtectIsWellFormed(t *testing.T) {
	t.Parallel()
	names := map[string]policy.ProtectGroup{}
	for _, g := range policy.BuiltinWriteProtect() {
		if _, dup := names[g.Name]; dup {
			t.Errorf("group %s is declared twice", g.Name)
		}
		names[g.Name] = g
		if _, err := pathglob.Compile(g.Globs); err != nil {
			t.Errorf("group %s: %v", g.Name, err)
		}
		if g.Why == "" || strings.HasSuffix(g.Why, ".") {
			t.Errorf("group %s: why %q must be a clause without a final period (the denial puts it in a sentence)", g.Name, g.Why)
		}
	}
	for _, g := range names {
		if g.Within == "" {
			continue
		}
		outer, ok := names[g.Within]
		if !ok || !outer.Liftable || !g.Liftable {
			t.Errorf("group %s lies within %q, which must be a liftable group, and be liftable itself", g.Name, g.Within)
			continue
		}
		// Every glob of the inner group is covered by the outer one.
		set, err := pathglob.Compile(outer.Globs)
		if err != nil {
			t.Fatal(err)
		}
		for _, glob := range g.Globs {
			sample := "/w/" + strings.NewReplacer("**/", "", "*", "x").Replace(glob)
			var covered bool
			for a := sample; a != "/" && !covered; a = a[:strings.LastIndexByte(a, '/')] {
				covered = len(set.Matching(a)) > 0
				if strings.LastIndexByte(a, '/') == 0 {
					break
				}
			}
			if !covered {
				t.Errorf("%s's glob %s (%s) is not covered by %s", g.Name, glob, sample, g.Within)
			}
		}
	}
}
