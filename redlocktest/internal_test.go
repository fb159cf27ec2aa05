package redlocktest

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNotFound(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	t.Setenv("REDIS_SERVER_BIN", "")
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(dir, "no-docker.sock"))
	old := searchPaths
	searchPaths = []string{filepath.Join(dir, "redis-server")}
	t.Cleanup(func() { searchPaths = old })

	_, err := Launch(1)
	require.ErrorIs(t, err, errNotFound)
	require.ErrorContains(t, err, "apt-get install redis-server")
	require.ErrorContains(t, err, "brew install redis")
	require.ErrorContains(t, err, "REDIS_SERVER_BIN")
}

func TestFindBinaryFromEnv(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("REDIS_SERVER_BIN", "/usr/bin/redis-server")
	bin, err := findBinary("")
	if err != nil {
		t.Skipf("no /usr/bin/redis-server: %v", err)
	}
	require.Equal(t, "/usr/bin/redis-server", bin)
}

func TestPortClashDetected(t *testing.T) {
	c1, err := Launch(1)
	require.NoError(t, err)
	defer c1.Close()
	c2, err := Launch(1)
	require.NoError(t, err)
	defer c2.Close()

	nd := c2.nodes[0]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	require.NoError(t, nd.killLocked())
	nd.port = c1.nodes[0].port // taken by c1's server
	err = nd.startLocked()
	require.ErrorIs(t, err, errPortInUse)
	require.False(t, nd.runningLocked())
}
