package main

import (
	"bytes"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRegistryWritesPrometheusText(t *testing.T) {
	r := newRegistry()
	r.add("redlock_acquisitions_total", "Lock calls.", labels("client", "c1", "redlock_outcome", "busy"), 1)
	r.add("redlock_acquisitions_total", "Lock calls.", labels("client", "c1", "redlock_outcome", "acquired"), 2)
	r.set("redlock_waiters", "Waiting now.", labels("client", "c1"), 3)
	r.observe("redlock_wait_duration_seconds", "Waits.", labels("client", "c1"), 3*time.Millisecond)
	r.observe("redlock_wait_duration_seconds", "Waits.", labels("client", "c1"), 2*time.Minute)
	var b bytes.Buffer
	require.NoError(t, r.write(&b))
	want := `# HELP redlock_acquisitions_total Lock calls.
# TYPE redlock_acquisitions_total counter
redlock_acquisitions_total{client="c1",redlock_outcome="acquired"} 2
redlock_acquisitions_total{client="c1",redlock_outcome="busy"} 1
# HELP redlock_wait_duration_seconds Waits.
# TYPE redlock_wait_duration_seconds histogram
redlock_wait_duration_seconds_bucket{client="c1",le="0.0005"} 0
redlock_wait_duration_seconds_bucket{client="c1",le="0.001"} 0
redlock_wait_duration_seconds_bucket{client="c1",le="0.0025"} 0
redlock_wait_duration_seconds_bucket{client="c1",le="0.005"} 1
redlock_wait_duration_seconds_bucket{client="c1",le="0.01"} 1
redlock_wait_duration_seconds_bucket{client="c1",le="0.025"} 1
redlock_wait_duration_seconds_bucket{client="c1",le="0.05"} 1
redlock_wait_duration_seconds_bucket{client="c1",le="0.1"} 1
redlock_wait_duration_seconds_bucket{client="c1",le="0.25"} 1
redlock_wait_duration_seconds_bucket{client="c1",le="0.5"} 1
redlock_wait_duration_seconds_bucket{client="c1",le="1"} 1
redlock_wait_duration_seconds_bucket{client="c1",le="2.5"} 1
redlock_wait_duration_seconds_bucket{client="c1",le="5"} 1
redlock_wait_duration_seconds_bucket{client="c1",le="10"} 1
redlock_wait_duration_seconds_bucket{client="c1",le="30"} 1
redlock_wait_duration_seconds_bucket{client="c1",le="60"} 1
redlock_wait_duration_seconds_bucket{client="c1",le="+Inf"} 2
redlock_wait_duration_seconds_sum{client="c1"} 120.003
redlock_wait_duration_seconds_count{client="c1"} 2
# HELP redlock_waiters Waiting now.
# TYPE redlock_waiters gauge
redlock_waiters{client="c1"} 3
`
	assert.Equal(t, want, b.String())
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A demo with -metrics says the URL on its first line and serves the
// clients' metrics there while it runs.
func TestDemoServesMetrics(t *testing.T) {
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"demo", "-backend=redis", "-duration=4s", "-lease=1s", "-node-timeout=150ms", "-metrics=127.0.0.1:0"}, &stdout, &stderr)
	}()
	urlRE := regexp.MustCompile(`; metrics at (http://127\.0\.0\.1:\d+/metrics)\n`)
	var url string
	require.Eventually(t, func() bool {
		first, _, ok := strings.Cut(stdout.String(), "\n")
		if m := urlRE.FindStringSubmatch(first + "\n"); ok && m != nil {
			url = m[1]
		}
		return url != ""
	}, 10*time.Second, 10*time.Millisecond, "first line: %q", stdout.String())
	require.True(t, strings.HasPrefix(stdout.String(), "redlock demo: 5 "))

	// Contention, and the kill of two masters at 35% of the run.
	var mu sync.Mutex // protects text and contentType, written in Eventually's goroutine
	var text, contentType string
	require.Eventually(t, func() bool {
		page, ct := scrape(url)
		mu.Lock()
		text, contentType = page, ct
		mu.Unlock()
		for c := 1; c <= 3; c++ {
			client := `client="c` + string(rune('0'+c)) + `"`
			for _, re := range []string{
				`redlock_acquisitions_total\{` + client + `,redlock_operation="Lock",redlock_outcome="acquired"\} [1-9]`,
				`redlock_nodes_reachable\{` + client + `\} 3\n`,
				`redlock_holds_ended_total\{` + client + `,redlock_hold_end_reason="released",redlock_hold_lost="false"\} [1-9]`,
			} {
				if !regexp.MustCompile(re).MatchString(text) {
					return false
				}
			}
		}
		return true
	}, 3*time.Second, 50*time.Millisecond, "the metrics never showed the run")
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, "text/plain; version=0.0.4; charset=utf-8", contentType)
	assert.Contains(t, text, "# TYPE redlock_acquire_duration_seconds histogram\n")
	assert.Contains(t, text, "# TYPE redlock_waiters gauge\n")
	assert.NotContains(t, text, `redlock_hold_lost="true"`)
	require.Equal(t, exitOK, <-done, "stderr: %s", stderr.String())
	_, err := http.Get(url)
	require.Error(t, err, "the server stops with the demo")
}

// scrape returns the page at url and its content type; "" when it could
// not be read. (It runs in Eventually's goroutine: no require here.)
func scrape(url string) (page, contentType string) {
	resp, err := http.Get(url)
	if err != nil {
		return "", ""
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", ""
	}
	return string(b), resp.Header.Get("Content-Type")
}

// An address the demo cannot listen on stops it before the run, saying so.
func TestDemoMetricsBadAddress(t *testing.T) {
	code, out, stderr := runCLI("demo", "-backend=miniredis", "-duration=1s", "-metrics=127.0.0.1:99999")
	require.Equal(t, exitDemoFailed, code, "stdout: %s", out)
	require.Contains(t, stderr, "redlock demo: -metrics 127.0.0.1:99999:")
	require.Empty(t, out)
}
