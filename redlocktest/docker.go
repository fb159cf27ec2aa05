package redlocktest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"
)

// dockerImage is the image run when no redis-server binary is installed.
const dockerImage, dockerTag = "redis", "7"

// dockerBackend runs nodes as Docker containers, publishing the node's
// port on 127.0.0.1, when no redis-server binary is installed but a Docker
// engine answers. Kill is docker kill followed by removal of the container,
// so Restart can publish the same port again; Pause and Resume are docker
// pause and unpause.
type dockerBackend struct {
	pool *dockertest.Pool
}

// newDockerBackend connects to the Docker engine named by DOCKER_HOST (or
// the default socket) and checks that it answers.
func newDockerBackend() (*dockerBackend, error) {
	pool, err := dockertest.NewPool("")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := pool.Client.PingWithContext(ctx); err != nil {
		pool.Client.HTTPClient.CloseIdleConnections()
		return nil, err
	}
	return &dockerBackend{pool: pool}, nil
}

// start runs a container for nd on nd.port and waits until it answers.
// nd.mu is held.
func (d *dockerBackend) start(nd *node) error {
	cmd := append([]string{"redis-server",
		"--port", "6379",
		"--bind", "0.0.0.0",
		"--save", "",
		"--appendonly", "no",
		"--protected-mode", "no",
		"--daemonize", "no",
		"--loglevel", "warning",
	}, nd.c.cfg.redisArgs...)
	res, err := d.pool.RunWithOptions(&dockertest.RunOptions{
		Repository: dockerImage,
		Tag:        dockerTag,
		Cmd:        cmd,
		Labels:     map[string]string{"org.redlock-go.redlocktest": "1"},
		PortBindings: map[dc.Port][]dc.PortBinding{
			"6379/tcp": {{HostIP: "127.0.0.1", HostPort: strconv.Itoa(nd.port)}},
		},
	}, func(hc *dc.HostConfig) {
		hc.AutoRemove = true
		hc.RestartPolicy = dc.RestartPolicy{Name: "no"}
	})
	if err != nil {
		if msg := err.Error(); strings.Contains(msg, "already allocated") || strings.Contains(msg, "address already in use") {
			return fmt.Errorf("%w: %v", errPortInUse, err)
		}
		return fmt.Errorf("redlocktest: docker run %s:%s: %w", dockerImage, dockerTag, err)
	}
	nd.container = res.Container.ID
	never := make(chan struct{})
	if err := waitReady(nd.addr(), 0, never, nd.c.closing); err != nil {
		d.remove(nd)
		return fmt.Errorf("redlocktest: node %d: container %.12s: %w", nd.index, res.Container.ID, err)
	}
	return nil
}

// kill kills and removes nd's container. nd.mu is held.
func (d *dockerBackend) kill(nd *node) error {
	err := d.pool.Client.KillContainer(dc.KillContainerOptions{ID: nd.container, Signal: dc.SIGKILL})
	var nsc *dc.NoSuchContainer
	if errors.As(err, &nsc) {
		err = nil
	}
	return errors.Join(err, d.remove(nd))
}

// remove force-removes nd's container.
func (d *dockerBackend) remove(nd *node) error {
	id := nd.container
	nd.container = ""
	err := d.pool.Client.RemoveContainer(dc.RemoveContainerOptions{ID: id, Force: true, RemoveVolumes: true})
	var nsc *dc.NoSuchContainer
	if err != nil && !errors.As(err, &nsc) && !strings.Contains(err.Error(), "already in progress") {
		return fmt.Errorf("redlocktest: docker rm %.12s: %w", id, err)
	}
	return nil
}

// pause pauses (stop) or unpauses nd's container. nd.mu is held.
func (d *dockerBackend) pause(nd *node, stop bool) error {
	if stop {
		return d.pool.Client.PauseContainer(nd.container)
	}
	return d.pool.Client.UnpauseContainer(nd.container)
}

// close releases the connection to the engine.
func (d *dockerBackend) close() error {
	d.pool.Client.HTTPClient.CloseIdleConnections()
	return nil
}
