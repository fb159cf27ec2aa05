package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// A run of some scenarios (-only) can write their sections into the
// existing benchmarks.md (-merge) and leave every other section as it is:
// each merged section replaces the section of the same heading, from its
// heading to the next one, or is added at the end; it says which run it
// comes from. Only the scenarios whose section stands on its own (no plot,
// no target, no row of another table) can be merged.

// mergeable are the scenarios -merge writes, each with the section it
// renders.
var mergeable = map[string]func(*results) (string, error){
	"family": familySection,
}

// checkMerge says why the scenarios of -only cannot be merged, nil when
// they can.
func checkMerge(only string) error {
	if only == "" {
		return fmt.Errorf("-merge needs -only: a full run writes the whole file")
	}
	for _, s := range strings.Split(only, ",") {
		if _, ok := mergeable[s]; !ok {
			return fmt.Errorf("-merge: the %s scenario's section cannot be merged (mergeable: %s)", s, strings.Join(mergeableNames(), ", "))
		}
	}
	return nil
}

func mergeableNames() []string {
	var names []string
	for s := range mergeable {
		names = append(names, s)
	}
	return names
}

// mergeDocs writes the sections of the scenarios in only into dir's
// benchmarks.md. A scenario that failed is not written.
func mergeDocs(res *results, dir, only, cmd string) error {
	path := filepath.Join(dir, "benchmarks.md")
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	doc := string(old)
	for _, s := range strings.Split(only, ",") {
		if s == "family" {
			if res.Family == nil {
				return fmt.Errorf("the family scenario did not run: nothing merged")
			}
			res.FamilyNote = familyNote(res, cmd)
		}
		section, err := mergeable[s](res)
		if err != nil {
			return err
		}
		doc = mergeSection(doc, section)
	}
	return os.WriteFile(path, []byte(doc), 0o644)
}

// mergeSection puts section (its first line its "## " heading) in doc in
// place of the section of the same heading, or at the end.
func mergeSection(doc, section string) string {
	heading, _, _ := strings.Cut(section, "\n")
	section = strings.TrimRight(section, "\n") + "\n\n"
	start := -1
	if strings.HasPrefix(doc, heading+"\n") {
		start = 0
	} else if i := strings.Index(doc, "\n"+heading+"\n"); i >= 0 {
		start = i + 1
	}
	if start < 0 {
		return strings.TrimRight(doc, "\n") + "\n\n" + section
	}
	end := len(doc)
	if j := strings.Index(doc[start+len(heading):], "\n## "); j >= 0 {
		end = start + len(heading) + j + 1
	}
	return doc[:start] + section + doc[end:]
}
