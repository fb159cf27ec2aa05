package main

import (
	"os"
	"os/exec"
	"strings"
)

// redisVersion asks the redis-server that redlocktest would run.
func redisVersion() string {
	bin := os.Getenv("REDIS_SERVER_BIN")
	if bin == "" {
		if p, err := exec.LookPath("redis-server"); err == nil {
			bin = p
		} else {
			bin = "/usr/bin/redis-server"
		}
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "unknown"
	}
	for _, f := range strings.Fields(string(out)) {
		if v, ok := strings.CutPrefix(f, "v="); ok {
			return v
		}
	}
	return strings.TrimSpace(string(out))
}

// gitDescribe names the library's commit, and says when the library's files
// had uncommitted changes during the run.
func gitDescribe(root string) string {
	out, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	s := strings.TrimSpace(string(out))
	st, err := exec.Command("git", "-C", root, "status", "--porcelain", "--", "*.go", "scripts", "go.mod", ":!bench", ":!*_test.go").Output()
	if err == nil && len(strings.TrimSpace(string(st))) > 0 {
		s += " with uncommitted library changes in the working tree"
	}
	return s
}
