// Command redlock runs commands under a distributed lock (or a read hold of a
// read-write lock, or a permit of a semaphore), inspects a lock on
// every node, and demonstrates the lock surviving killed Redis masters.
//
// Usage:
//
//	redlock demo [flags]
//	redlock exec --nodes URL,URL,... [flags] NAME -- CMD [ARGS...]
//	redlock inspect --nodes URL,URL,... [flags] NAME
//	redlock version
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
	"runtime/debug"
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
  redlock exec --nodes URLS NAME -- CMD         run CMD while holding the lock (flock for a fleet)
  redlock inspect --nodes URLS NAME             show every kind of lock of NAME on every node
  redlock version                               print redlock's module version

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
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, version(debug.ReadBuildInfo()))
		return exitOK
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "redlock: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
}

// flagSet is a subcommand's flags, with what its -h prints.
type flagSet struct {
	*flag.FlagSet
	name, synopsis, description string
}

// newFlagSet returns the flags of subcommand name, whose -h prints
// synopsis, description and the flags. The flag package prints nothing
// itself: parse says what went wrong, in one line.
func newFlagSet(name, synopsis, description string) *flagSet {
	fs := flag.NewFlagSet("redlock "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &flagSet{FlagSet: fs, name: name, synopsis: synopsis, description: description}
}

// parse parses args. It returns done=true with the exit code when the
// command must stop: exitOK after -h or --help, whose help went to stdout;
// exitUsage after a bad flag, whose error went to stderr in one line.
func (fs *flagSet) parse(args []string, stdout, stderr io.Writer) (code int, done bool) {
	err := fs.Parse(args)
	switch {
	case err == nil:
		return 0, false
	case errors.Is(err, flag.ErrHelp):
		fs.help(stdout)
		return exitOK, true
	default:
		fmt.Fprintf(stderr, "redlock %s: %v\n", fs.name, err)
		return exitUsage, true
	}
}

// help writes the command's synopsis, description and flags to w.
func (fs *flagSet) help(w io.Writer) {
	fmt.Fprintf(w, "Usage: redlock %s %s\n\n%s\nFlags:\n", fs.name, fs.synopsis, strings.TrimLeft(fs.description, "\n"))
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// version is what "redlock version" prints, from the build information
// of the binary (ok false: none): the main module's version, which is
// "(devel)" when redlock was not built from a module download (the go
// command's own word), then the module's path and the Go release, as
// "go version -m" lists them.
func version(info *debug.BuildInfo, ok bool) string {
	if !ok || info == nil {
		return "redlock (devel)"
	}
	line := []string{"redlock", info.Main.Version}
	if line[1] == "" {
		line[1] = "(devel)"
	}
	for _, s := range []string{info.Main.Path, info.GoVersion} {
		if s != "" {
			line = append(line, s)
		}
	}
	return strings.Join(line, " ")
}

// usageError prints a usage error for the command and returns exitUsage.
func usageError(w io.Writer, cmd, format string, args ...any) int {
	fmt.Fprintf(w, "redlock %s: %s\nRun \"redlock %s -h\" for usage.\n", cmd, fmt.Sprintf(format, args...), cmd)
	return exitUsage
}

// lockName returns the lock's name from the --name flag (flagName, ""
// when not given) and the NAME arguments, or what is wrong with them.
func lockName(flagName string, args []string) (name, problem string) {
	switch {
	case len(args) > 1:
		return "", fmt.Sprintf("want one lock NAME, got %d: %q", len(args), args)
	case len(args) == 1 && args[0] == "":
		return "", "the lock NAME is empty"
	case len(args) == 1 && flagName != "" && flagName != args[0]:
		return "", fmt.Sprintf("two lock names: --name %q and the argument %q; give one", flagName, args[0])
	case len(args) == 1:
		return args[0], ""
	case flagName == "":
		return "", "no lock name: give it as the argument NAME, or as --name NAME"
	}
	return flagName, ""
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
