// Package arrows counts the calls between the files of one Go package:
// the uses of a function or method defined in another file of the
// package, and how many of them go to a file listed above the caller in a
// given top-down order (an arrow that runs back up). docs/architecture.md
// lists the root package's files in that order; the command
// internal/cmd/arrows prints the count, and the root package's
// architecture test holds the document to it.
package arrows

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

// Call is one use, in file From, of a function or method defined in file
// To of the same package.
type Call struct{ From, To string }

// Calls returns every call from one file of the package in dir (its
// non-test files) to a function or method defined in another.
func Calls(dir string) ([]Call, error) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		return nil, err
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
	var calls []Call
	for id, obj := range info.Uses {
		if obj == nil || obj.Pkg() != pkg || !obj.Pos().IsValid() {
			continue
		}
		if _, ok := obj.(*types.Func); !ok { // functions and methods only
			continue
		}
		from := filepath.Base(fset.Position(id.Pos()).Filename)
		to := filepath.Base(fset.Position(obj.Pos()).Filename)
		if from != to {
			calls = append(calls, Call{from, to})
		}
	}
	sort.Slice(calls, func(i, j int) bool {
		if calls[i].From != calls[j].From {
			return calls[i].From < calls[j].From
		}
		return calls[i].To < calls[j].To
	})
	return calls, nil
}

// Count is calls counted against a top-down order of the files.
type Count struct {
	All   int            // calls across files
	Up    int            // of which to a file listed above the caller
	Pairs map[string]int // the upward calls by "from -> to"
}

// Against counts calls against order, the package's files top down; it
// fails naming a file that calls or is called and is not in order.
func Against(calls []Call, order []string) (Count, error) {
	rank := make(map[string]int, len(order))
	for i, f := range order {
		rank[f] = i
	}
	c := Count{Pairs: map[string]int{}}
	for _, cl := range calls {
		rf, okf := rank[cl.From]
		rt, okt := rank[cl.To]
		switch {
		case !okf:
			return c, fmt.Errorf("not in the order: %s", cl.From)
		case !okt:
			return c, fmt.Errorf("not in the order: %s", cl.To)
		}
		c.All++
		if rt < rf {
			c.Up++
			c.Pairs[cl.From+" -> "+cl.To]++
		}
	}
	return c, nil
}

// Sorted is the upward pairs, the most calls first.
func (c Count) Sorted() []string {
	keys := make([]string, 0, len(c.Pairs))
	for k := range c.Pairs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if c.Pairs[keys[i]] != c.Pairs[keys[j]] {
			return c.Pairs[keys[i]] > c.Pairs[keys[j]]
		}
		return keys[i] < keys[j]
	})
	return keys
}
