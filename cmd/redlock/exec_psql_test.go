//go:build unix

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/redlock-go/redlock/internal/pgtest"
	"github.com/redlock-go/redlock/redlocktest"
	"github.com/stretchr/testify/require"
)

// pg is the PostgreSQL server of the tests that need one, started by the
// first of them.
var pg pgtest.Shared

func stopTestServers() error { return pg.Stop() }

// TestExecFencingPsqlRecipe runs the psql recipe of exec's help (and of the
// README) on a real PostgreSQL server: under redlock exec --fencing it
// writes, twice, each time with a larger token; run by hand with the first
// hold's token, as a holder that paused past its lease would, it is
// refused, fails, and writes nothing.
func TestExecFencingPsqlRecipe(t *testing.T) {
	srv := pg.Get(t)
	psql := func(sql string) string {
		t.Helper()
		out, err := exec.Command(srv.Psql(), srv.URL(""), "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-c", sql).CombinedOutput()
		require.NoError(t, err, "%s", out)
		return strings.TrimSpace(string(out))
	}
	psql("CREATE TABLE redlock_fence (resource text PRIMARY KEY, mark bigint NOT NULL)")
	psql("CREATE TABLE reports (name text PRIMARY KEY, body text NOT NULL)")
	script := filepath.Join(t.TempDir(), "write.sh")
	require.NoError(t, os.WriteFile(script, []byte(psqlRecipe), 0o755))
	t.Setenv("DATABASE_URL", srv.URL(""))
	t.Setenv("PATH", srv.Bin+string(os.PathListSeparator)+os.Getenv("PATH"))

	c := redlocktest.Start(t, 3)
	var tokens []int64
	for range 2 {
		code, out, stderr := startCLI(t, "exec", "--nodes", strings.Join(c.URLs(), ","), "--name", "nightly-report", "--fencing",
			"--", "sh", "-c", script+" && echo token=$REDLOCK_TOKEN").wait(t)
		require.Equal(t, 0, code, "stdout: %s\nstderr: %s", out, stderr)
		tok, ok := envOf(out, "token")
		require.True(t, ok, "out: %s", out)
		token, err := strconv.ParseInt(tok, 10, 64)
		require.NoError(t, err)
		tokens = append(tokens, token)
		require.Equal(t, "by "+tok, psql("SELECT body FROM reports WHERE name = 'nightly'"))
		require.Equal(t, tok, psql("SELECT mark FROM redlock_fence WHERE resource = 'nightly-report'"))
	}
	require.Greater(t, tokens[1], tokens[0])

	stale := exec.Command("sh", script)
	stale.Env = append(os.Environ(), "REDLOCK_NAME=nightly-report", "REDLOCK_TOKEN="+strconv.FormatInt(tokens[0], 10))
	out, err := stale.CombinedOutput()
	require.Error(t, err, "the stale holder's script fails: %s", out)
	require.Contains(t, string(out), "token "+strconv.FormatInt(tokens[0], 10)+" is stale: refused")
	require.Equal(t, "by "+strconv.FormatInt(tokens[1], 10), psql("SELECT body FROM reports WHERE name = 'nightly'"), "the stale write did not land")

	_, help, _ := startCLI(t, "exec", "-h").wait(t)
	require.True(t, strings.Contains(help+"\n", psqlRecipe), "exec -h shows the recipe")
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	require.True(t, strings.Contains(string(readme), "```sh\n"+psqlRecipe+"```"), "the README shows the recipe in a sh block")
}
