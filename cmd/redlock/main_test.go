package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// The test binary doubles as the redlock command (REDLOCK_TEST_AS=cli) and
// as the CMD that exec runs (REDLOCK_TEST_AS=cmd), so exec and its signals
// are tested on real processes without building anything else. Servers
// that the tests share (PostgreSQL, for the psql recipe) are stopped after
// the tests.
func TestMain(m *testing.M) {
	switch os.Getenv("REDLOCK_TEST_AS") {
	case "cli":
		os.Setenv("REDLOCK_TEST_AS", "cmd") // what exec runs is the helper
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	case "cmd":
		os.Exit(helperCmd(os.Args[1:]))
	}
	code := m.Run()
	if err := stopTestServers(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// helperCmd is the CMD of the exec tests:
//
//	exit N        print "ran", exit N
//	sleep D N     print "ran", sleep D, exit N
//	wait-term     print "ready PID", exit 42 on SIGTERM (printing "got SIGTERM")
//	ignore-term   print "ready PID", ignore SIGTERM, sleep until killed
//	env VAR...    print "VAR=value" for each VAR ("VAR unset" when it is), exit 0
func helperCmd(args []string) int {
	switch {
	case len(args) > 0 && args[0] == "env":
		for _, k := range args[1:] {
			if v, ok := os.LookupEnv(k); ok {
				fmt.Printf("%s=%s\n", k, v)
			} else {
				fmt.Printf("%s unset\n", k)
			}
		}
		return 0
	case len(args) == 2 && args[0] == "exit":
		fmt.Println("ran", os.Getenv("REDLOCK_NAME"))
		n, _ := strconv.Atoi(args[1])
		return n
	case len(args) == 3 && args[0] == "sleep":
		fmt.Println("ran")
		d, _ := time.ParseDuration(args[1])
		time.Sleep(d)
		n, _ := strconv.Atoi(args[2])
		return n
	case len(args) == 1 && args[0] == "wait-term":
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		fmt.Println("ready", os.Getpid())
		<-c
		fmt.Println("got SIGTERM")
		return 42
	case len(args) == 1 && args[0] == "ignore-term":
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready", os.Getpid())
		time.Sleep(time.Minute)
		return 0
	}
	fmt.Fprintf(os.Stderr, "helper: bad arguments %q\n", args)
	return 99
}

// self is the test binary's path, for running it as redlock or as CMD.
func self(t *testing.T) string {
	t.Helper()
	p, err := os.Executable()
	require.NoError(t, err)
	return p
}

// helperArgs returns the "-- CMD ARGS" part of an exec command line that
// runs helperCmd with args.
func helperArgs(t *testing.T, args ...string) []string {
	return append([]string{"--", self(t)}, args...)
}

// proc is a redlock process started by the tests.
type proc struct {
	cmd    *exec.Cmd
	lines  chan string // stdout, line by line
	errs   chan string // stderr, line by line
	mu     sync.Mutex  // protects out
	out    []string
	stderr bytes.Buffer // read only after the process exited
	done   chan struct{}
	code   int
}

// startCLI starts the test binary as "redlock args..." with CMD helpers
// available; Cleanup kills it if the test did not wait for it.
func startCLI(t *testing.T, args ...string) *proc {
	t.Helper()
	p := &proc{lines: make(chan string, 100), errs: make(chan string, 100), done: make(chan struct{})}
	p.cmd = exec.Command(self(t), args...)
	p.cmd.Env = append(os.Environ(), "REDLOCK_TEST_AS=cli")
	stdout, err := p.cmd.StdoutPipe()
	require.NoError(t, err)
	stderr, err := p.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	errsRead := make(chan struct{})
	go func() {
		defer close(errsRead)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.stderr.WriteString(sc.Text() + "\n") // read only after done
			select {
			case p.errs <- sc.Text():
			default:
			}
		}
	}()
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.mu.Lock()
			p.out = append(p.out, sc.Text())
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
		<-errsRead // Wait closes the pipes: both are read to their end first
		err := p.cmd.Wait()
		p.code = p.cmd.ProcessState.ExitCode()
		if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			p.code = 128 + int(ws.Signal())
		}
		_ = err
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// waitLine waits for a stdout line starting with prefix and returns it.
func (p *proc) waitLine(t *testing.T, prefix string) string {
	t.Helper()
	return p.waitOn(t, p.lines, prefix)
}

// waitErrLine waits for a stderr line starting with prefix and returns
// it: what exec says with -v, as it says it.
func (p *proc) waitErrLine(t *testing.T, prefix string) string {
	t.Helper()
	return p.waitOn(t, p.errs, prefix)
}

// waitOn waits for a line of lines starting with prefix and returns it.
func (p *proc) waitOn(t *testing.T, lines <-chan string, prefix string) string {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case l := <-lines:
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-p.done:
			// Lines may still be buffered.
			for {
				select {
				case l := <-lines:
					if strings.HasPrefix(l, prefix) {
						return l
					}
				default:
					t.Fatalf("redlock exited (%d) before printing %q; stderr:\n%s", p.code, prefix, p.stderr.String())
				}
			}
		case <-timeout:
			t.Fatalf("no line %q within 10s", prefix)
		}
	}
}

// wait waits for the process to exit and returns its exit code, stdout and
// stderr.
func (p *proc) wait(t *testing.T) (int, string, string) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("redlock did not exit within 20s; stderr:\n%s", p.stderr.String())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.code, strings.Join(p.out, "\n"), p.stderr.String()
}

// runCLI runs redlock in-process and returns its exit code, stdout and
// stderr.
func runCLI(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}
