// Command arrows counts the calls between the files of one Go package: the
// uses of a function or method defined in another file of the package, and
// how many of them go to a file listed above the caller in a given
// top-down order (an arrow that runs back up). docs/architecture.md lists
// the root package's files in that order and cites this command (the
// count is internal/arrows'):
//
//	go run ./internal/cmd/arrows DIR FILE1.go,FILE2.go,... [-v]
//
// -v lists the upward pairs, the most calls first; with DUMP=1 in the
// environment it prints every cross-file call as "from to" instead.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/redlock-go/redlock/internal/arrows"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: arrows DIR FILE1.go,FILE2.go,... [-v]")
		os.Exit(2)
	}
	calls, err := arrows.Calls(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if os.Getenv("DUMP") != "" {
		for _, c := range calls {
			fmt.Printf("%s %s\n", c.From, c.To)
		}
		return
	}
	count, err := arrows.Against(calls, strings.Split(os.Args[2], ","))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("calls across files: %d; to a file listed above: %d (%d file pairs)\n", count.All, count.Up, len(count.Pairs))
	if len(os.Args) > 3 && os.Args[3] == "-v" {
		for _, k := range count.Sorted() {
			fmt.Printf("  %4d %s\n", count.Pairs[k], k)
		}
	}
}
