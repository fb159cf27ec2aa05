package main

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
)

// logCounter is a slog.Handler that counts redlock's warnings by message
// and keeps the first error of each.
type logCounter struct {
	mu    sync.Mutex
	n     map[string]int
	first map[string]string
}

func newLogCounter() *logCounter {
	return &logCounter{n: map[string]int{}, first: map[string]string{}}
}

func (l *logCounter) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelWarn }
func (l *logCounter) WithAttrs([]slog.Attr) slog.Handler            { return l }
func (l *logCounter) WithGroup(string) slog.Handler                 { return l }
func (l *logCounter) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n[r.Message]++
	if _, ok := l.first[r.Message]; !ok {
		var attrs []string
		r.Attrs(func(a slog.Attr) bool {
			attrs = append(attrs, a.Key+"="+a.Value.String())
			return true
		})
		l.first[r.Message] = strings.Join(attrs, " ")
	}
	return nil
}

// summary lists the messages, most frequent first.
func (l *logCounter) summary() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for m, n := range l.n {
		out = append(out, fmt.Sprintf("%d× %q (first: %s)", n, m, l.first[m]))
	}
	sort.Strings(out)
	return out
}
