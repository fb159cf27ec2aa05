package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The modules' directories, seen from valkey/internal/gen.
const (
	rueidisDir = "../../../rueidis"
	valkeyDir  = "../.."
)

// TestGeneratedFilesAreFresh regenerates valkey/ from rueidis/ into a
// temporary directory and fails when a generated file of valkey/ differs,
// is missing, or has no source any more: run go generate in valkey/.
func TestGeneratedFilesAreFresh(t *testing.T) {
	if _, err := os.Stat(rueidisDir); err != nil {
		t.Skipf("the rueidis module is not beside this one (%v): not a checkout of the repository", err)
	}
	files, err := generate(rueidisDir)
	require.NoError(t, err)
	fresh := t.TempDir()
	require.NoError(t, write(fresh, files))

	want, err := generated(fresh)
	require.NoError(t, err)
	have, err := generated(valkeyDir)
	require.NoError(t, err)
	require.ElementsMatch(t, want, have, "valkey/'s generated files are not rueidis/'s: run go generate in valkey/")
	for _, name := range want {
		w, err := os.ReadFile(filepath.Join(fresh, name))
		require.NoError(t, err)
		h, err := os.ReadFile(filepath.Join(valkeyDir, name))
		require.NoError(t, err)
		if line, want, have, ok := firstDiff(string(w), string(h)); ok {
			t.Errorf("valkey/%s is stale: run go generate in valkey/\nline %d: gen writes %q\n         the file has %q", name, line, want, have)
		}
	}
}

// firstDiff returns the first line (from 1) where want and have differ,
// and that line of each ("" past the end); ok is false when they are equal.
func firstDiff(want, have string) (line int, w, h string, ok bool) {
	ws, hs := strings.Split(want, "\n"), strings.Split(have, "\n")
	for i := range max(len(ws), len(hs)) {
		w, h = "", ""
		if i < len(ws) {
			w = ws[i]
		}
		if i < len(hs) {
			h = hs[i]
		}
		if w != h {
			return i + 1, w, h, true
		}
	}
	return 0, "", "", false
}

// TestRewrite shows each rule of the rewrite on one small file.
func TestRewrite(t *testing.T) {
	src := `package rueidis

import rueidislib "github.com/redis/rueidis"

// f asks rueidis (rueidislib, github.com/redis/rueidis) for a RedisResult.
func f(r rueidislib.RedisResult) error {
	if _, ok := rueidislib.IsRedisErr(r.NonRedisError()); ok {
		return errors.New("redlock/rueidis: no")
	}
	return nil
}
`
	want := header + `package valkey

import valkeylib "github.com/valkey-io/valkey-go"

// f asks valkey-go (valkeylib, github.com/valkey-io/valkey-go) for a RedisResult.
func f(r valkeylib.ValkeyResult) error {
	if _, ok := valkeylib.IsValkeyErr(r.NonValkeyError()); ok {
		return errors.New("redlock/valkey: no")
	}
	return nil
}
`
	got, err := rewrite("f.go", []byte(src))
	require.NoError(t, err)
	assert.Equal(t, want, string(got))
}

// TestRewriteRefusesLeftovers: an identifier gen has no rename for fails
// the generation instead of leaving "rueidis" in valkey/.
func TestRewriteRefusesLeftovers(t *testing.T) {
	_, err := rewrite("f.go", []byte("package rueidis\n\nvar rueidisOnly = 1\n"))
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "f.go:3"), err.Error())
}
