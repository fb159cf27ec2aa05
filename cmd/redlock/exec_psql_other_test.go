//go:build !unix

package main

// stopTestServers: no PostgreSQL tests outside unix (internal/pgtest).
func stopTestServers() error { return nil }
