package redlocktest

import "errors"

type proxy struct{}

func newProxy(c *Cluster, target func() string) (*proxy, error) {
	return nil, errors.New("redlocktest: WithProxy: not supported yet")
}
func (p *proxy) addr() string { return "" }
func (p *proxy) close()       {}
