package main

import (
	"encoding/gob"
	"os"
)

// A run's results can be saved (-save) and its report written again from
// them (-replay) without measuring: to change the report and compare.

func saveResults(res *results, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := gob.NewEncoder(f).Encode(res); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func loadResults(path string) (*results, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	res := &results{}
	return res, gob.NewDecoder(f).Decode(res)
}
