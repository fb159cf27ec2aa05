package releasetest

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReleaseRefusesAnUnwrittenChangelog: make release (.ci/release)
// refuses, before it tags or commits anything, a CHANGELOG whose
// [Unreleased] section still has entries (they must move under the
// version's heading first), and one with the section of a version whose
// tag does not exist (the CHANGELOG would say it was released).
func TestReleaseRefusesAnUnwrittenChangelog(t *testing.T) {
	clone, version := cloneHead(t, t.TempDir())
	earlier := "## Earlier work (before this changelog)\n"
	for _, tc := range []struct {
		name string
		edit func(string) string
		want string
	}{
		{"entries left under Unreleased", func(text string) string {
			require.Contains(t, text, earlier)
			return strings.Replace(text, earlier, versionSection(version)+"\n"+earlier, 1)
		}, `CHANGELOG.md's [Unreleased] section has entries: move them under "## [` + strings.TrimPrefix(version, "v") + `] - YYYY-MM-DD" first`},
		{"a version never tagged", func(text string) string {
			text = atRelease(t, text, version)
			return strings.Replace(text, earlier, "## [0.0.1] - 2020-01-02\n\n### Added\n- Never tagged.\n\n"+earlier, 1)
		}, "CHANGELOG.md has a section [0.0.1] but no tag v0.0.1 exists"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			head := run(t, clone, nil, "git", "rev-parse", "HEAD")
			writeChangelog(t, clone, version, tc.edit)
			cmd := exec.Command(filepath.Join(clone, ".ci", "release"), version)
			cmd.Dir = clone
			out, err := cmd.CombinedOutput()
			require.Error(t, err, "the release must be refused:\n%s", out)
			require.Contains(t, string(out), "release: "+tc.want)
			require.Empty(t, strings.TrimSpace(run(t, clone, nil, "git", "tag", "--list")), "no tag made")
			run(t, clone, nil, "git", "reset", "--quiet", "--hard", strings.TrimSpace(head))
		})
	}
	// Written down as at a release, it is accepted (TestConsumerBuild goes
	// on to build from it).
	writeChangelog(t, clone, version, func(text string) string { return atRelease(t, text, version) })
	t.Log(run(t, clone, nil, filepath.Join(clone, ".ci", "release"), version))
	require.Contains(t, run(t, clone, nil, "git", "tag", "--list"), version)
}
