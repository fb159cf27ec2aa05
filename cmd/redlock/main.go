// Command redlock runs commands under a distributed lock, inspects a lock on
// every node, and demonstrates the lock surviving killed Redis masters.
//
// Usage:
//
//	redlock demo [flags]
//	redlock exec --nodes URL,URL,... --name NAME [flags] -- CMD [ARGS...]
//	redlock inspect --nodes URL,URL,... [flags] NAME
//
// Nodes are independent Redis masters given as redis://[user:pass@]host:port[/db],
// rediss://... or unix:///path URLs, in --nodes or $REDLOCK_NODES (comma
// separated). Run "redlock COMMAND -h" for the flags and exit codes of each
// command.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Exit codes shared by every subcommand; exec and demo add their own.
const (
	exitOK    = 0
	exitUsage = 2 // bad flags or arguments, as the flag package does
)

// nodesEnv names the environment variable read when --nodes is not given.
const nodesEnv = "REDLOCK_NODES"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `redlock: a distributed lock over N independent Redis masters.

Usage:
  redlock demo [flags]                          watch the lock survive killed masters
  redlock exec --nodes URLS --name NAME -- CMD  run CMD while holding the lock (flock for a fleet)
  redlock inspect --nodes URLS NAME             show the lock's state on every node

Nodes: comma-separated redis://[user:pass@]host:port[/db], rediss://... or
unix:///path URLs, one per independent master, in --nodes or $REDLOCK_NODES.

Run "redlock COMMAND -h" for a command's flags and exit codes.
`

// run is the whole program without the process exit, so tests can call it.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "demo":
		return runDemo(args[1:], stdout, stderr)
	case "exec":
		return runExec(args[1:], stdout, stderr)
	case "inspect":
		return runInspect(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "redlock: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
}

// newFlagSet returns a FlagSet for a subcommand whose -h prints synopsis,
// description and flags to w. Errors are returned, not acted on: parse
// decides the exit code.
func newFlagSet(name, synopsis, description string, w io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("redlock "+name, flag.ContinueOnError)
	fs.SetOutput(w)
	fs.Usage = func() {
		fmt.Fprintf(w, "Usage: redlock %s %s\n\n%s\nFlags:\n", name, synopsis, strings.TrimLeft(description, "\n"))
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args with fs. It returns done=true with the exit code when
// the command must stop: 0 after -h, exitUsage after a bad flag (the flag
// package has already printed the error and the usage).
func parse(fs *flag.FlagSet, args []string) (code int, done bool) {
	err := fs.Parse(args)
	switch {
	case err == nil:
		return 0, false
	case errors.Is(err, flag.ErrHelp):
		return exitOK, true
	default:
		return exitUsage, true
	}
}

// usageError prints a usage error for the command and returns exitUsage.
func usageError(w io.Writer, cmd, format string, args ...any) int {
	fmt.Fprintf(w, "redlock %s: %s\nRun \"redlock %s -h\" for usage.\n", cmd, fmt.Sprintf(format, args...), cmd)
	return exitUsage
}

// nodeList returns the node URLs from the --nodes flag, else $REDLOCK_NODES.
func nodeList(flagValue string) []string {
	v := flagValue
	if v == "" {
		v = os.Getenv(nodesEnv)
	}
	var urls []string
	for _, u := range strings.Split(v, ",") {
		if u = strings.TrimSpace(u); u != "" {
			urls = append(urls, u)
		}
	}
	return urls
}

// round formats a duration for people: 3 significant figures at most.
func round(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Microsecond:
		return d.String()
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < 10*time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	case d < 100*time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(10 * time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}
