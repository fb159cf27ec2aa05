package main

import (
	"slices"
	"strings"
	"testing"
)

func TestFilterKinds(t *testing.T) {
	for _, tc := range []struct {
		list string
		want []kind
	}{
		{"redlock,valkey", []kind{kRedlock, kValkey}},
		{"goredis,rueidis,floor", []kind{kGoredis, kRueidis}},
		{"floor", nil},
		{"redlockx", nil},
	} {
		if got := filterKinds(adapterKinds, tc.list); !slices.Equal(got, tc.want) {
			t.Errorf("filterKinds(adapterKinds, %q) = %v, want %v", tc.list, got, tc.want)
		}
	}
}

// TestLayersSections renders the document with none of the layer
// scenarios run.
func TestLayersSections(t *testing.T) {
	res := &results{mode: "quick", cfg: quickCfg, machine: machineInfo{nproc: 2}}
	res.cfg.fill()
	doc := renderDoc(res, nil)
	for _, want := range []string{"## Connection layers", "_not run_"} {
		if !strings.Contains(doc, want) {
			t.Errorf("document without runs lacks %q", want)
		}
	}
}
