package releasetest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	modzip "golang.org/x/mod/zip"

	"github.com/redlock-go/redlock/redlocktest"
)

// released are the directories of the modules a release tags, "." the root.
var released = []string{".", "goredis", "rueidis", "valkey", "redlockotel"}

// TestConsumerBuild is a user's build of the committed tree (HEAD of the
// checkout the test runs in; uncommitted changes are not in it): a clone
// released by .ci/release at a test version, the tagged modules served from
// a file:// module proxy; outside the repository, go get of each module
// alone in a fresh module, then a program that gets the root and every
// adapter at that version, builds, and takes the lock through each of them
// on real redis-servers. Third-party modules come from
// the machine's GOPROXY after the file:// one (and first from the local
// module cache's download directory); the checksum database is not asked
// about ours (GONOSUMDB).
func TestConsumerBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("clones, releases and builds the repository (seconds to minutes)")
	}
	for _, tool := range []string{"git", "go"} {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "TestConsumerBuild needs %s on PATH", tool)
	}
	work := t.TempDir()
	clone, version := releasedClone(t, work)

	proxy := filepath.Join(work, "proxy")
	for _, dir := range released {
		serveModule(t, proxy, clone, dir, version)
	}

	// Each module alone, in a module of its own, as the README says to get
	// it: the modules it requires (the root, for an adapter) come from its
	// go.mod, so a sibling required at a version never released fails here.
	env := consumerEnv(t, proxy, work)
	get := []string{"get"}
	for _, dir := range released {
		path := modulePath(t, filepath.Join(clone, dir))
		alone := filepath.Join(work, "get-"+filepath.Base(path))
		require.NoError(t, os.MkdirAll(alone, 0o755))
		run(t, alone, env, "go", "mod", "init", "example.com/consumer")
		run(t, alone, env, "go", "get", path+"@"+version)
		get = append(get, path+"@"+version)
	}

	consumer := filepath.Join(work, "consumer")
	require.NoError(t, os.MkdirAll(consumer, 0o755))
	program, err := os.ReadFile(filepath.Join("testdata", "consumer", "main.go.txt"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(consumer, "main.go"), program, 0o644))
	run(t, consumer, env, "go", "mod", "init", "example.com/consumer")
	run(t, consumer, env, "go", get...)
	run(t, consumer, env, "go", "build", "-o", "consumer", ".")

	nodes := redlocktest.Start(t, 3)
	out := run(t, consumer, env, filepath.Join(consumer, "consumer"), nodes.Addrs()...)
	t.Logf("the consumer's program, built from %s:\n%s", version, out)
	for _, way := range []string{"redlockotel", "goredis", "rueidis", "valkey"} {
		require.Contains(t, out, way+": locked and unlocked")
	}
}

// releasedClone clones the repository at HEAD into work/clone, adds a
// CHANGELOG section for a test version above the last release tag (the
// Unreleased entries move under it, as at a real release) and runs the
// release script there. It returns the clone's directory and the version.
func releasedClone(t *testing.T, work string) (clone, version string) {
	clone, version = cloneHead(t, work)
	writeChangelog(t, clone, version, func(text string) string { return atRelease(t, text, version) })
	t.Log(run(t, clone, nil, filepath.Join(clone, ".ci", "release"), version))
	return clone, version
}

// cloneHead clones the repository at HEAD (the committed tree) into
// work/clone and returns its directory and a test version above its last
// release tag.
func cloneHead(t *testing.T, work string) (clone, version string) {
	top := strings.TrimSpace(run(t, ".", nil, "git", "rev-parse", "--show-toplevel"))
	head := strings.TrimSpace(run(t, top, nil, "git", "rev-parse", "HEAD"))
	t.Logf("releasing a clone of HEAD %s (the committed tree)", head)
	clone = filepath.Join(work, "clone")
	run(t, work, nil, "git", "clone", "--quiet", "--no-local", "--no-checkout", top, clone)
	run(t, clone, nil, "git", "checkout", "--quiet", "--detach", head)
	run(t, clone, nil, "git", "config", "user.name", "releasetest")
	run(t, clone, nil, "git", "config", "user.email", "releasetest@example.com")
	return clone, testVersion(run(t, clone, nil, "git", "tag", "--list", "v*"))
}

// unreleased is the heading of CHANGELOG.md's Unreleased section.
const unreleased = "## [Unreleased]\n"

// versionSection is a CHANGELOG section of version with one entry.
func versionSection(version string) string {
	return fmt.Sprintf("## [%s] - %s\n\n### Added\n- Test release (releasetest).\n",
		strings.TrimPrefix(version, "v"), time.Now().UTC().Format("2006-01-02"))
}

// atRelease is the CHANGELOG text as it is at the release of version:
// the Unreleased entries moved under the version's heading.
func atRelease(t *testing.T, text, version string) string {
	require.Contains(t, text, unreleased, "CHANGELOG.md has no Unreleased section")
	return strings.Replace(text, unreleased, unreleased+"\n"+versionSection(version), 1)
}

// writeChangelog rewrites the clone's CHANGELOG.md with edit and commits
// it.
func writeChangelog(t *testing.T, clone, version string, edit func(string) string) {
	changelog := filepath.Join(clone, "CHANGELOG.md")
	text, err := os.ReadFile(changelog)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(changelog, []byte(edit(string(text))), 0o644))
	run(t, clone, nil, "git", "commit", "--quiet", "-am", "CHANGELOG: "+version)
}

// testVersion is a pre-release of the patch after the highest release tag
// among tags (one per line), or v0.1.0-consumertest when there is none: a
// version above every release, which the clone's tags cannot hold already.
func testVersion(tags string) string {
	last := ""
	for _, tag := range strings.Fields(tags) {
		if semver.IsValid(tag) && semver.Prerelease(tag) == "" && semver.Build(tag) == "" &&
			(last == "" || semver.Compare(tag, last) > 0) {
			last = tag
		}
	}
	if last == "" {
		return "v0.1.0-consumertest"
	}
	var major, minor, patch int
	fmt.Sscanf(last, "v%d.%d.%d", &major, &minor, &patch)
	return fmt.Sprintf("v%d.%d.%d-consumertest", major, minor, patch+1)
}

// serveModule writes the module in clone/dir, at its tag for version, into
// the module proxy directory proxy (the GOPROXY protocol's files: @v/list,
// .info, .mod, .zip), its zip made from the tag as the go command makes it
// from a repository.
func serveModule(t *testing.T, proxy, clone, dir, version string) {
	tag, subdir := version, ""
	if dir != "." {
		tag, subdir = dir+"/"+version, dir
	}
	path := modulePath(t, filepath.Join(clone, dir))
	escaped, err := module.EscapePath(path)
	require.NoError(t, err)
	at := filepath.Join(proxy, filepath.FromSlash(escaped), "@v")
	require.NoError(t, os.MkdirAll(at, 0o755))

	zip, err := os.Create(filepath.Join(at, version+".zip"))
	require.NoError(t, err)
	defer zip.Close()
	require.NoError(t, modzip.CreateFromVCS(zip, module.Version{Path: path, Version: version}, clone, tag, subdir))
	require.NoError(t, zip.Close())

	gomod := run(t, clone, nil, "git", "show", tag+":"+filepath.ToSlash(filepath.Join(subdir, "go.mod")))
	require.NoError(t, os.WriteFile(filepath.Join(at, version+".mod"), []byte(gomod), 0o644))
	when := strings.TrimSpace(run(t, clone, nil, "git", "log", "-1", "--format=%cI", tag))
	info, err := json.Marshal(struct{ Version, Time string }{version, when})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(at, version+".info"), info, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(at, "list"), []byte(version+"\n"), 0o644))
}

// consumerEnv is a user's environment outside the repository: no
// workspace, a module cache of its own (so that no earlier run's zip of the
// same test version is used), our modules from the proxy directory first.
// Builds are -trimpath, as a release build often is: a package's build
// cache key then names its module and version instead of its directory,
// which is new in every run's module cache, so the third-party modules
// (go-redis, rueidis, valkey-go, OpenTelemetry) come from the build cache
// after the first run instead of being compiled again each time; ours are
// compiled from what the proxy served, their contents being in the key.
func consumerEnv(t *testing.T, proxy, work string) []string {
	goproxy := strings.TrimSpace(run(t, work, nil, "go", "env", "GOPROXY"))
	modcache := strings.TrimSpace(run(t, work, nil, "go", "env", "GOMODCACHE"))
	goflags := strings.TrimSpace(run(t, work, nil, "go", "env", "GOFLAGS"))
	return []string{
		"GOWORK=off",
		"GOFLAGS=" + strings.TrimSpace(goflags+" -mod=mod -modcacherw -trimpath"),
		"GOMODCACHE=" + filepath.Join(work, "modcache"),
		"GOPROXY=file://" + filepath.ToSlash(proxy) + ",file://" + filepath.ToSlash(filepath.Join(modcache, "cache", "download")) + "," + goproxy,
		"GONOSUMDB=github.com/redlock-go/*",
		"GONOPROXY=",
		"GOPRIVATE=",
	}
}

// modulePath is the module path in dir/go.mod.
func modulePath(t *testing.T, dir string) string {
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	require.NoError(t, err)
	for _, line := range strings.Split(string(gomod), "\n") {
		if rest, ok := strings.CutPrefix(line, "module "); ok {
			return strings.TrimSpace(rest)
		}
	}
	t.Fatalf("%s/go.mod has no module line", dir)
	return ""
}

// run runs name with args in dir, the environment being the test's without
// GOWORK (the clone has its own go.work) and then env, and returns its standard
// output; a failure fails the test with everything the command printed.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOWORK=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	require.NoError(t, err, "%s %s (in %s):\n%s%s", name, strings.Join(args, " "), dir, stdout.String(), stderr.String())
	return stdout.String()
}
