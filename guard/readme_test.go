package guard_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestExampleInReadme: the code of the README's "Fencing, end to end" is
// ExampleSQL_Tx's (from the data store on), so that it runs as written,
// and the output shown is the example's.
func TestExampleInReadme(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Fencing, end to end\n")
	if !ok {
		t.Fatal(`README.md has no section "Fencing, end to end"`)
	}
	blocks := regexp.MustCompile("(?s)```(go|text)\n(.*?)```").FindAllStringSubmatch(section, 2)
	if len(blocks) < 2 || blocks[0][1] != "go" || blocks[1][1] != "text" {
		t.Fatal("the README's fencing section does not begin with a Go block and its output")
	}
	source, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := strings.Cut(string(source), "func ExampleSQL_Tx() {\n")
	body, _, _ = strings.Cut(body, "\n}\n")
	body = regexp.MustCompile("(?m)^\t").ReplaceAllString(body, "")
	if !strings.Contains(body, blocks[0][2]) {
		t.Errorf("the README's fencing example is not ExampleSQL_Tx's code:\n%s", blocks[0][2])
	}
	_, output, _ := strings.Cut(body, "// Output:\n")
	output = regexp.MustCompile("(?m)^// ").ReplaceAllString(output, "")
	if strings.TrimSpace(output) != strings.TrimSpace(blocks[1][2]) {
		t.Errorf("the README's output of the fencing example is not ExampleSQL_Tx's:\n%s\nwant:\n%s", blocks[1][2], output)
	}
}
