// Command arrows counts the calls between the files of one Go package: the
// uses of a function or method defined in another file of the package, and
// how many of them go to a file listed above the caller in a given
// top-down order (an arrow that runs back up). docs/architecture.md lists
// the root package's files in that order and cites this command:
//
//	go run ./internal/cmd/arrows DIR FILE1.go,FILE2.go,... [-v]
//
// -v lists the upward pairs, the most calls first; with DUMP=1 in the
// environment it prints every cross-file call as "from to" instead.
package main

import (
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	dir, order := os.Args[1], strings.Split(os.Args[2], ",")
	rank := map[string]int{}
	for i, f := range order {
		rank[f] = i
	}
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		panic(err)
	}
	var files []*ast.File
	for name, p := range pkgs {
		if strings.HasSuffix(name, "_test") {
			continue
		}
		for _, f := range p.Files {
			files = append(files, f)
		}
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil), Error: func(error) {}}
	pkg, _ := conf.Check("p", fset, files, info)
	up, all := 0, 0
	dump := os.Getenv("DUMP") != ""
	pairs := map[string]int{}
	for id, obj := range info.Uses {
		if obj == nil || obj.Pkg() != pkg || !obj.Pos().IsValid() {
			continue
		}
		// calls: functions and methods only
		if _, ok := obj.(*types.Func); !ok {
			continue
		}
		from := filepath.Base(fset.Position(id.Pos()).Filename)
		to := filepath.Base(fset.Position(obj.Pos()).Filename)
		if from == to {
			continue
		}
		if dump {
			fmt.Printf("%s %s\n", from, to)
			continue
		}
		rf, okf := rank[from]
		rt, okt := rank[to]
		if !okf || !okt {
			fmt.Fprintf(os.Stderr, "not in the order: %s or %s\n", from, to)
			continue
		}
		all++
		if rt < rf {
			up++
			pairs[from+" -> "+to]++
		}
	}
	keys := make([]string, 0, len(pairs))
	for k := range pairs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return pairs[keys[i]] > pairs[keys[j]] })
	fmt.Printf("calls across files: %d; to a file listed above: %d (%d file pairs)\n", all, up, len(keys))
	for _, k := range keys {
		if len(os.Args) > 3 && os.Args[3] == "-v" {
			fmt.Printf("  %4d %s\n", pairs[k], k)
		}
	}
}
