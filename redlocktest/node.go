package redlocktest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gomodule/redigo/redis"
)

// errPortInUse means a node could not bind its port.
var errPortInUse = errors.New("port in use")

// node is one redis-server of a Cluster and, with WithProxy, its proxy.
type node struct {
	c       *Cluster
	index   int
	shard   int    // with WithShards: which shard of member index it is
	replica int    // with WithReplicas: 0 for a shard's first primary, j ≥ 1 for its j-th replica (as launched)
	busPort int    // with WithShards: its cluster bus port; 0 otherwise
	port    int    // the redis-server's port; fixed once Launch returns
	dir     string // working directory
	proxy   *proxy // nil without WithProxy; fixed once Launch returns

	mu        sync.Mutex    // protects the fields below and serialises start/kill
	cmd       *exec.Cmd     // the current or last process; nil before the first start or with docker
	exited    chan struct{} // closed when cmd has been reaped
	container string        // docker container id, when docker runs the node
	pending   chan struct{} // closed to cancel a pending RestartAfter; nil when none
}

func (nd *node) addr() string { return hostPort(nd.port) }

// launch starts the node for the first time, on another port when its port
// is taken, and then its proxy.
func (nd *node) launch() error {
	nd.dir = filepath.Join(nd.c.dir, "node"+strconv.Itoa(nd.index))
	if nd.busPort != 0 {
		nd.dir += "-" + strconv.Itoa(nd.shard)
	}
	if nd.replica > 0 {
		nd.dir += "r" + strconv.Itoa(nd.replica)
	}
	if err := os.Mkdir(nd.dir, 0o700); err != nil {
		return fmt.Errorf("redlocktest: %w", err)
	}
	nd.mu.Lock()
	defer nd.mu.Unlock()
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if err = nd.startLocked(); !errors.Is(err, errPortInUse) {
			break
		}
		ports, perr := freePorts(1)
		if perr != nil {
			return perr
		}
		nd.port = ports[0]
	}
	if err != nil {
		return err
	}
	if nd.c.cfg.proxy {
		if nd.proxy, err = newProxy(nd.addr); err != nil {
			return err
		}
	}
	return nil
}

// startLocked starts the redis-server on nd.port and waits until it answers.
// nd.mu must be held and the node must not be running.
func (nd *node) startLocked() error {
	if nd.c.isClosed() {
		return errClosed
	}
	if nd.c.docker != nil {
		return nd.c.docker.start(nd)
	}
	args := []string{
		"--port", strconv.Itoa(nd.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--protected-mode", "no",
		"--daemonize", "no",
		"--dir", nd.dir,
		"--loglevel", "warning",
	}
	args = append(args, nd.clusterArgs()...)
	args = append(args, nd.c.cfg.redisArgs...)
	logPath := filepath.Join(nd.dir, "redis.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("redlocktest: %w", err)
	}
	cmd := exec.Command(nd.c.bin, args...)
	cmd.Dir = nd.dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = sysProcAttr()
	err = cmd.Start()
	logFile.Close() // the child has its own descriptor
	if err != nil {
		return fmt.Errorf("redlocktest: start %s: %w", nd.c.bin, err)
	}
	exited := make(chan struct{})
	nd.c.wg.Add(1)
	go func() { // the reaper: no zombies
		defer nd.c.wg.Done()
		cmd.Wait()
		close(exited)
	}()
	nd.cmd, nd.exited = cmd, exited

	err = waitReady(nd.addr(), cmd.Process.Pid, exited, nd.c.closing)
	if err == nil {
		return nil
	}
	cmd.Process.Kill()
	<-exited
	out, _ := os.ReadFile(logPath)
	if bytes.Contains(out, []byte("Address already in use")) {
		err = errPortInUse
	}
	if errors.Is(err, errClosed) {
		return err
	}
	msg := strings.TrimSpace(string(out))
	if len(msg) > 2000 {
		msg = "..." + msg[len(msg)-2000:]
	}
	nd.c.cfg.logf("redlocktest: %s (port %d) failed to start: %v\n%s", nd, nd.port, err, msg)
	return fmt.Errorf("redlocktest: %s: redis-server on port %d: %w (output: %q)", nd, nd.port, err, msg)
}

// waitReady polls addr until the redis-server with the given pid answers,
// the process exits, the cluster closes or readyTimeout passes. pid 0 skips
// the identity check (docker).
func waitReady(addr string, pid int, exited, closing <-chan struct{}) error {
	deadline := time.Now().Add(readyTimeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		got, err := serverPID(addr)
		switch {
		case err == nil && (pid == 0 || got == pid):
			return nil
		case err == nil:
			return fmt.Errorf("%w: another redis-server (pid %d) answers on %s", errPortInUse, got, addr)
		}
		last = err
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer on %s within %v: %v", addr, readyTimeout, last)
		}
		select {
		case <-exited:
			return fmt.Errorf("redis-server exited before answering on %s", addr)
		case <-closing:
			return errClosed
		case <-tick.C:
		}
	}
}

// serverPID asks the redis-server at addr for its process id.
func serverPID(addr string) (int, error) {
	conn, err := redis.Dial("tcp", addr,
		redis.DialConnectTimeout(200*time.Millisecond),
		redis.DialReadTimeout(time.Second),
		redis.DialWriteTimeout(time.Second))
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	info, err := redis.String(conn.Do("INFO", "server"))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("no process_id in INFO server")
}

// runningLocked reports whether the node's server is up (maybe paused).
func (nd *node) runningLocked() bool {
	if nd.c.docker != nil {
		return nd.container != ""
	}
	if nd.cmd == nil {
		return false
	}
	select {
	case <-nd.exited:
		return false
	default:
		return true
	}
}

func (nd *node) running() bool {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.runningLocked()
}

func (nd *node) pid() int {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if !nd.runningLocked() || nd.cmd == nil {
		return 0
	}
	return nd.cmd.Process.Pid
}

// cancelPendingLocked cancels a pending RestartAfter.
func (nd *node) cancelPendingLocked() {
	if nd.pending != nil {
		close(nd.pending)
		nd.pending = nil
	}
}

// killLocked kills the server if it runs and waits until it is gone.
func (nd *node) killLocked() error {
	nd.cancelPendingLocked()
	if !nd.runningLocked() {
		return nil
	}
	if nd.c.docker != nil {
		return nd.c.docker.kill(nd)
	}
	if err := nd.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("redlocktest: kill %s: %w", nd, err)
	}
	<-nd.exited
	return nil
}

func (nd *node) killCmd() error {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.killLocked()
}

func (nd *node) pause() error { return nd.signal("pause", true) }

func (nd *node) resume() error { return nd.signal("resume", false) }

// signal pauses (SIGSTOP, docker pause) or resumes (SIGCONT, docker unpause) the server.
func (nd *node) signal(what string, stop bool) error {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if !nd.runningLocked() {
		return fmt.Errorf("redlocktest: %s %s: not running", what, nd)
	}
	var err error
	if nd.c.docker != nil {
		err = nd.c.docker.pause(nd, stop)
	} else {
		err = signalProcess(nd.cmd.Process, stop)
	}
	if err != nil {
		return fmt.Errorf("redlocktest: %s %s: %w", what, nd, err)
	}
	return nil
}

// restart kills the server if it runs and starts it again on the same port.
func (nd *node) restart() error {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.restartLocked()
}

func (nd *node) restartLocked() error {
	if err := nd.killLocked(); err != nil {
		return err
	}
	// The port is ours again at once (redis-server binds with SO_REUSEADDR);
	// retry briefly in case another process grabbed it meanwhile.
	var err error
	for attempt := 0; attempt < 10; attempt++ {
		if err = nd.startLocked(); !errors.Is(err, errPortInUse) {
			if err == nil && nd.busPort != 0 {
				err = nd.waitClusterOK(0)
			}
			return err
		}
		select {
		case <-nd.c.closing:
			return errClosed
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("redlocktest: restart %s: port %d stays taken: %w", nd, nd.port, err)
}

// restartAfter kills the server now and starts it again after d, in a
// goroutine owned by the cluster.
func (nd *node) restartAfter(d time.Duration) {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.c.isClosed() {
		return
	}
	if err := nd.killLocked(); err != nil { // also cancels an earlier pending restart
		nd.c.cfg.logf("redlocktest: RestartAfter: %v", err)
	}
	cancel := make(chan struct{})
	nd.pending = cancel
	nd.c.wg.Add(1)
	go func() {
		defer nd.c.wg.Done()
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-cancel:
			return
		case <-nd.c.closing:
			return
		}
		nd.mu.Lock()
		defer nd.mu.Unlock()
		select {
		case <-cancel: // Kill, Restart or another RestartAfter came first
			return
		default:
		}
		nd.pending = nil
		if err := nd.restartLocked(); err != nil && !errors.Is(err, errClosed) {
			nd.c.cfg.logf("redlocktest: delayed restart of %s: %v", nd, err)
		}
	}()
}

// close stops the node and its proxy for good.
func (nd *node) close() error {
	if nd == nil {
		return nil
	}
	nd.mu.Lock()
	err := nd.killLocked()
	nd.mu.Unlock()
	if nd.proxy != nil {
		nd.proxy.close()
	}
	return err
}
