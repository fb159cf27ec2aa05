//go:build unix

// Package pgtest runs a real PostgreSQL server for tests, as redlocktest
// runs redis-server: initdb into a temporary directory, postgres on a free
// port of 127.0.0.1 (its unix socket in the same directory), as an
// unprivileged user when the tests run as root (PostgreSQL refuses to run
// as root), stopped by its PID. A test binary shares one server (Shared);
// its TestMain stops it.
//
// The binaries are found in $REDLOCK_PG_BIN (a directory), on $PATH, or in
// /usr/lib/postgresql/*/bin (Debian's packages; the newest). When none is
// there the test fails and says what to install (.ci/ensure-postgres
// installs it for make test): it never skips.
package pgtest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BinEnv names the environment variable that may point at the directory of
// PostgreSQL's binaries (initdb, postgres, psql).
const BinEnv = "REDLOCK_PG_BIN"

// Server is a running PostgreSQL server: user postgres, trusted without a
// password from 127.0.0.1, database postgres.
type Server struct {
	Bin  string // the directory of initdb, postgres and psql
	Port int    // on 127.0.0.1

	dir  string // the temporary directory: data, socket, log
	cmd  *exec.Cmd
	log  *syncBuffer   // postgres's output
	done chan struct{} // closed when postgres has exited and been reaped
}

// URL returns the server's connection URL for database db ("" for
// postgres), as pgx and psql take it.
func (s *Server) URL(db string) string {
	if db == "" {
		db = "postgres"
	}
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.Port, db)
}

// Psql returns the path of the psql next to the server's binaries.
func (s *Server) Psql() string { return filepath.Join(s.Bin, "psql") }

// FindBin returns the directory of initdb and postgres, or an error that
// says what to install.
func FindBin() (string, error) {
	has := func(dir string) bool {
		for _, b := range []string{"initdb", "postgres"} {
			if st, err := os.Stat(filepath.Join(dir, b)); err != nil || st.IsDir() {
				return false
			}
		}
		return true
	}
	if dir := os.Getenv(BinEnv); dir != "" {
		if has(dir) {
			return dir, nil
		}
		return "", fmt.Errorf("pgtest: $%s=%s has no initdb and postgres", BinEnv, dir)
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if resolved, err := filepath.EvalSymlinks(p); err == nil && has(filepath.Dir(resolved)) {
			return filepath.Dir(resolved), nil
		}
		if has(filepath.Dir(p)) {
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) })
	for _, d := range dirs {
		if has(d) {
			return d, nil
		}
	}
	return "", errors.New("pgtest: PostgreSQL's initdb and postgres were not found on $PATH, in $" + BinEnv +
		" or /usr/lib/postgresql/*/bin: install PostgreSQL (Debian/Ubuntu: apt-get install postgresql; macOS: brew install postgresql; " +
		"make test does it when run as root on Debian: .ci/ensure-postgres), or set " + BinEnv + " to the directory of its binaries")
}

// version is the major version in /usr/lib/postgresql/VERSION/bin, 0 when
// it is not a number.
func version(dir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return v
}

// Start runs initdb and starts postgres, and returns once it accepts
// connections. The caller stops it with Stop.
func Start() (*Server, error) {
	bin, err := FindBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "redlock-pg-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	s := &Server{Bin: bin, dir: dir}
	if err := s.start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func (s *Server) start() error {
	cred, err := s.own()
	if err != nil {
		return err
	}
	data := filepath.Join(s.dir, "data")
	var out bytes.Buffer
	initdb := s.command(cred, "initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
	initdb.Stdout, initdb.Stderr = &out, &out
	if err := initdb.Run(); err != nil {
		return fmt.Errorf("pgtest: initdb: %v\n%s", err, out.String())
	}
	for attempt := 0; ; attempt++ {
		err := s.run(cred, data)
		if err == nil || attempt == 4 || !strings.Contains(s.log.String(), "could not bind") {
			return err
		}
	}
}

// own makes the directory the unprivileged user's when we are root, and
// returns the credential to run PostgreSQL with (nil: as we are).
func (s *Server) own() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	var u *user.User
	var err error
	for _, name := range []string{"postgres", "nobody"} {
		if u, err = user.Lookup(name); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("pgtest: running as root, and no user postgres or nobody to run PostgreSQL as (it refuses root): %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(s.dir, uid, gid); err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func (s *Server) command(cred *syscall.Credential, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.Bin, name), args...)
	cmd.Dir = s.dir
	cmd.Env = []string{"HOME=" + s.dir, "LC_ALL=C", "PATH=" + os.Getenv("PATH")}
	cmd.SysProcAttr = sysProcAttr()
	cmd.SysProcAttr.Credential = cred
	return cmd
}

// run starts postgres on a free port and waits until it is ready.
func (s *Server) run(cred *syscall.Credential, data string) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	s.Port = port
	s.log = &syncBuffer{}
	s.cmd = s.command(cred, "postgres", "-D", data, "-p", strconv.Itoa(port), "-k", s.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=200")
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("pgtest: starting postgres: %w", err)
	}
	s.done = make(chan struct{})
	go func() {
		s.cmd.Wait()
		close(s.done)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !s.ready(data) {
		select {
		case <-s.done:
			return fmt.Errorf("pgtest: postgres exited before it was ready: %v\n%s", s.cmd.ProcessState, s.log.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Stop()
			return fmt.Errorf("pgtest: postgres not ready within 30s:\n%s", s.log.String())
		}
	}
	return nil
}

// ready reports whether postgres accepts connections: its postmaster.pid
// says "ready" (as pg_ctl -w reads it) and its port answers.
func (s *Server) ready(data string) bool {
	pid, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	if err != nil {
		return false
	}
	lines := strings.Split(strings.TrimSpace(string(pid)), "\n")
	if len(lines) < 8 || strings.TrimSpace(lines[len(lines)-1]) != "ready" {
		return false
	}
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)), time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// Stop shuts postgres down by its PID (SIGINT, a fast shutdown; SIGQUIT
// after 10 s, SIGKILL after 5 more), waits until it has exited and removes
// its directory.
func (s *Server) Stop() error {
	if s == nil || s.cmd == nil {
		return nil
	}
	for _, step := range []struct {
		sig  syscall.Signal
		wait time.Duration
	}{{syscall.SIGINT, 10 * time.Second}, {syscall.SIGQUIT, 5 * time.Second}, {syscall.SIGKILL, time.Minute}} {
		s.cmd.Process.Signal(step.sig)
		select {
		case <-s.done:
			return os.RemoveAll(s.dir)
		case <-time.After(step.wait):
		}
	}
	return fmt.Errorf("pgtest: postgres (pid %d) did not exit after SIGKILL", s.cmd.Process.Pid)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgtest: finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// syncBuffer is a bytes.Buffer that postgres's output and a reader share.
type syncBuffer struct {
	mu sync.Mutex // protects b
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Shared is one server for a whole test binary, started by the first test
// that asks for it (tests that need none do not wait for it) and stopped
// by the TestMain that declares it, after m.Run.
type Shared struct {
	once sync.Once
	s    *Server
	err  error
}

// Get returns the shared server, starting it at the first call; when it
// cannot start, the test fails with the reason (what to install, or
// PostgreSQL's own output).
func (sh *Shared) Get(t testing.TB) *Server {
	t.Helper()
	sh.once.Do(func() { sh.s, sh.err = Start() })
	if sh.err != nil {
		t.Fatal(sh.err)
	}
	return sh.s
}

// Stop stops the shared server if one was started.
func (sh *Shared) Stop() error {
	sh.once.Do(func() {}) // none started from now on
	return sh.s.Stop()
}
