package redlocktest

import "errors"

// dockerBackend runs nodes in Docker containers when no redis-server binary
// is installed.
type dockerBackend struct{}

func newDockerBackend() (*dockerBackend, error) { return nil, errors.New("not supported yet") }

func (d *dockerBackend) start(nd *node) error { return errors.New("docker: not supported yet") }
func (d *dockerBackend) kill(nd *node) error  { return errors.New("docker: not supported yet") }
func (d *dockerBackend) pause(nd *node, stop bool) error {
	return errors.New("docker: not supported yet")
}
func (d *dockerBackend) close() error { return nil }
