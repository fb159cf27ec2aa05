package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
)

// lineHandler is a slog.Handler that writes each record in exec's own
// format, so that every line -v prints reads alike: "redlock exec: " and
// the message (without the library's own "redlock: " in front), then the
// record's attributes as key=value pairs (quoted
// where needed, as slog's text handler writes them), a level above Info
// among them; no time.
type lineHandler struct {
	prefix string
	text   slog.Handler // writes the attributes into *buf
	out    *lineOut
}

// lineOut is where a lineHandler and the handlers derived from it write.
type lineOut struct {
	mu  sync.Mutex // protects buf and serializes writes to w
	buf bytes.Buffer
	w   io.Writer
}

// newLineHandler returns a handler that writes to w, each line beginning
// with prefix.
func newLineHandler(w io.Writer, prefix string) *lineHandler {
	out := &lineOut{w: w}
	text := slog.NewTextHandler(&out.buf, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) > 0 {
				return a
			}
			switch a.Key {
			case slog.TimeKey, slog.MessageKey:
				return slog.Attr{}
			case slog.LevelKey:
				if a.Value.Any().(slog.Level) <= slog.LevelInfo {
					return slog.Attr{}
				}
			}
			return a
		},
	})
	return &lineHandler{prefix: prefix, text: text, out: out}
}

// Enabled reports whether l writes records of level: Info and above.
func (l *lineHandler) Enabled(_ context.Context, level slog.Level) bool {
	return level >= slog.LevelInfo
}

// Handle writes r as one line.
func (l *lineHandler) Handle(ctx context.Context, r slog.Record) error {
	l.out.mu.Lock()
	defer l.out.mu.Unlock()
	l.out.buf.Reset()
	if err := l.text.Handle(ctx, r); err != nil {
		return err
	}
	attrs := bytes.TrimSpace(l.out.buf.Bytes())
	line := make([]byte, 0, len(l.prefix)+len(r.Message)+1+len(attrs)+1)
	line = append(append(line, l.prefix...), strings.TrimPrefix(r.Message, "redlock: ")...)
	if len(attrs) > 0 {
		line = append(append(line, ' '), attrs...)
	}
	_, err := l.out.w.Write(append(line, '\n'))
	return err
}

// WithAttrs returns a handler that adds attrs to every line.
func (l *lineHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &lineHandler{prefix: l.prefix, text: l.text.WithAttrs(attrs), out: l.out}
}

// WithGroup returns a handler that qualifies later attributes with name.
func (l *lineHandler) WithGroup(name string) slog.Handler {
	return &lineHandler{prefix: l.prefix, text: l.text.WithGroup(name), out: l.out}
}

var _ slog.Handler = (*lineHandler)(nil)
