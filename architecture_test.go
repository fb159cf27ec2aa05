package redlock_test

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/arrows"
)

// docs/architecture.md's figures come from the code, and this test holds
// them to it (STYLE.md, point 21): the root package's file table lists
// every file once, top down; the calls between its files and those that
// run up the table (internal/arrows, as go run ./internal/cmd/arrows
// counts them); the Client's methods and the files they are in; and the
// package tree, each package's imports within the module. When the code
// moves and the document does not, it fails with the numbers to write.

const module = "github.com/redlock-go/redlock"

func readArchitecture(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("docs", "architecture.md"))
	require.NoError(t, err)
	return string(doc)
}

// rootTable is the root package's files as the document's table lists
// them, top down.
func rootTable(t *testing.T, doc string) []string {
	t.Helper()
	start := strings.Index(doc, "## The root package's files, top down")
	require.GreaterOrEqual(t, start, 0, "the root package's table")
	end := strings.Index(doc[start:], "\n## ")
	require.Greater(t, end, 0)
	var files []string
	for _, m := range regexp.MustCompile(`(?m)^\| \[([a-z_]+\.go)\]\(\.\./[a-z_]+\.go\)[ ,]`).FindAllStringSubmatch(doc[start:start+end], -1) {
		files = append(files, m[1])
	}
	return files
}

// rootFiles is the root package's non-test Go files.
func rootFiles(t *testing.T) []string {
	t.Helper()
	pkg, err := build.ImportDir(".", 0)
	require.NoError(t, err)
	files := slices.Clone(pkg.GoFiles)
	sort.Strings(files)
	return files
}

// figure reads the number the document writes as **N** right after
// before.
func figure(t *testing.T, doc, before string) int {
	t.Helper()
	m := regexp.MustCompile(regexp.QuoteMeta(before) + `\*\*(\d+)\*\*`).FindStringSubmatch(doc)
	require.NotNil(t, m, "docs/architecture.md: no figure after %q", before)
	n, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	return n
}

func TestArchitectureFileTable(t *testing.T) {
	t.Parallel()
	table := rootTable(t, readArchitecture(t))
	listed := slices.Clone(table)
	sort.Strings(listed)
	assert.Equal(t, rootFiles(t), listed, "docs/architecture.md's table of the root package's files lists each file once")
}

func TestArchitectureCallFigures(t *testing.T) {
	t.Parallel()
	doc := readArchitecture(t)
	calls, err := arrows.Calls(".")
	require.NoError(t, err)
	count, err := arrows.Against(calls, rootTable(t, doc))
	require.NoError(t, err, "a file of the root package missing from docs/architecture.md's table")
	var pairs []string
	for _, k := range count.Sorted() {
		pairs = append(pairs, strconv.Itoa(count.Pairs[k])+" "+k)
	}
	now := "calls: " + strconv.Itoa(count.All) + ", up: " + strconv.Itoa(count.Up) + ", pairs: " + strconv.Itoa(len(count.Pairs)) + " (" + strings.Join(pairs, "; ") + ")"
	assert.Equal(t, count.All, figure(t, doc, "counts them: "), "docs/architecture.md's calls across the root package's files; now %s", now)
	assert.Equal(t, count.Up, figure(t, doc, "of which "), "docs/architecture.md's calls to a file listed above; now %s", now)
	assert.Equal(t, len(count.Pairs), figure(t, doc, "going up in "), "docs/architecture.md's pairs of files those calls go between; now %s", now)
}

func TestArchitectureClientFigures(t *testing.T) {
	t.Parallel()
	doc := readArchitecture(t)
	fset := token.NewFileSet()
	methods, files := 0, map[string]bool{}
	for _, name := range rootFiles(t) {
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil {
				continue
			}
			if star, ok := fn.Recv.List[0].Type.(*ast.StarExpr); ok {
				if id, ok := star.X.(*ast.Ident); ok && id.Name == "Client" {
					methods++
					files[name] = true
				}
			}
		}
	}
	assert.Equal(t, methods, figure(t, doc, "`Client` has "), "docs/architecture.md's count of Client's methods; now %d in %d files", methods, len(files))
	assert.Equal(t, len(files), figure(t, doc, "methods in "), "docs/architecture.md's count of the files Client's methods are in; now %d in %d files", methods, len(files))
}

// moduleImports is what the package at path (within the module) imports
// of the module, sorted, by their paths within it ("." for the root).
func moduleImports(t *testing.T, path string) []string {
	t.Helper()
	pkg, err := build.ImportDir(filepath.FromSlash(path), 0)
	require.NoError(t, err, path)
	var out []string
	for _, imp := range pkg.Imports {
		switch {
		case imp == module:
			out = append(out, "redlock")
		case strings.HasPrefix(imp, module+"/"):
			out = append(out, strings.TrimPrefix(imp, module+"/"))
		}
	}
	sort.Strings(out)
	return out
}

// packageTree is the document's tree of packages: each package it names
// and what it says that package imports of the module.
func packageTree(t *testing.T, doc string) map[string][]string {
	t.Helper()
	start := strings.Index(doc, "## Packages")
	require.GreaterOrEqual(t, start, 0)
	open := strings.Index(doc[start:], "```\n")
	require.Greater(t, open, 0)
	block := doc[start+open+4:]
	block = block[:strings.Index(block, "```")]
	tree := map[string][]string{}
	imports := func(pkg string, dep string) {
		if _, ok := tree[pkg]; !ok {
			tree[pkg] = nil
		}
		if dep != "" {
			tree[pkg] = append(tree[pkg], dep)
		}
	}
	first := regexp.MustCompile(`^  [├└]─> (\S+)`)
	second := regexp.MustCompile(`^  [│ ]     [├└]─> (\S+)`)
	arrow := regexp.MustCompile(`^(\S+) ─> (\S+)`)
	alone := regexp.MustCompile(`^(\S+)\s`)
	parent := ""
	for _, line := range strings.Split(block, "\n") {
		if line == "" {
			continue
		}
		if m := first.FindStringSubmatch(line); m != nil {
			parent = m[1]
			imports("redlock", m[1])
			imports(m[1], "")
		} else if m := second.FindStringSubmatch(line); m != nil {
			imports(parent, m[1])
		} else if m := arrow.FindStringSubmatch(line); m != nil {
			imports(m[1], m[2])
		} else if m := alone.FindStringSubmatch(line); m != nil {
			imports(m[1], "")
		}
	}
	for pkg := range tree {
		sort.Strings(tree[pkg])
	}
	return tree
}

func TestArchitecturePackageTree(t *testing.T) {
	t.Parallel()
	tree := packageTree(t, readArchitecture(t))
	require.Contains(t, tree, "redlock")
	for pkg, said := range tree {
		dir := pkg
		if pkg == "redlock" {
			dir = "."
		}
		assert.Equal(t, moduleImports(t, dir), said, "docs/architecture.md's tree: what %s imports of the module", pkg)
	}
	// Every package under internal/ imports nothing of the root package,
	// directly or not (go list -deps ./internal/X does not list it).
	var walk func(path string, seen map[string]bool) bool
	walk = func(path string, seen map[string]bool) bool {
		for _, dep := range moduleImports(t, path) {
			if dep == "redlock" {
				return true
			}
			if !seen[dep] {
				seen[dep] = true
				if walk(dep, seen) {
					return true
				}
			}
		}
		return false
	}
	for pkg := range tree {
		if strings.HasPrefix(pkg, "internal/") {
			assert.False(t, walk(pkg, map[string]bool{}), "%s reaches the root package", pkg)
		}
	}
}

// TestArchitectureOnlyTheQuorumSends: no file of the root package sends a
// node a call but through internal/quorum, which alone holds the nodes'
// transports: none names a Send or SendBatch method (the root keeps each
// node.Peer behind nodeLayer, which has neither).
func TestArchitectureOnlyTheQuorumSends(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	for _, name := range rootFiles(t) {
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && (sel.Sel.Name == "Send" || sel.Sel.Name == "SendBatch") {
				t.Errorf("%s: %s sends to a node past internal/quorum", fset.Position(sel.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
}
