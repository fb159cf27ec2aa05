package redlock

import (
	"errors"
	"math"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Fuzz tests of the two parsers a user's input goes through before any
// network: node URLs and options. `go test` runs the seeds (testdata/fuzz/
// and the f.Add calls); `make fuzz` explores for $(FUZZTIME) each.

// FuzzParseURL checks parseURL on any string, and on any URL with any
// password: it never panics; an error wraps ErrInvalid, is one line and never
// shows the password; an accepted URL makes a sane endpoint that a canonical
// URL built from it parses back to.
func FuzzParseURL(f *testing.F) {
	for _, s := range []struct{ raw, password string }{
		{"redis://127.0.0.1:6379", "s3cret"},
		{"redis://localhost", ""},
		{"redis://alice:s3cret@db1.example:7000/1", "p@ss:w0rd"},
		{"rediss://u:pw@cache.example:6380", "x"},
		{"redis://[::1]:7000/2", "%zz"},
		{"unix:///tmp/redis.sock?db=3", "secret"},
		{"redis://h:0", "secret"},
		{"redis://alice:secret@h:abc", "secret"},
		{"redis://alice:secret@[::1", "secret"},
	} {
		f.Add(s.raw, s.password)
	}
	f.Fuzz(func(t *testing.T, raw, password string) {
		checkParseURL(t, raw)
		u, err := url.Parse(raw)
		if err != nil {
			return // no password to be found; unit tests check redact on such URLs
		}
		user := ""
		if u.User != nil {
			user = u.User.Username()
			if p, ok := u.User.Password(); ok {
				checkSecret(t, raw, p, withPassword(*u, user, "N3utr4l"))
			}
		}
		if password == "" {
			return
		}
		// The same URL with a password of the fuzzer's choosing.
		withIt := withPassword(*u, user, password)
		checkParseURL(t, withIt)
		checkSecret(t, withIt, password, withPassword(*u, user, "N3utr4l"))
	})
}

func withPassword(u url.URL, user, password string) string {
	u.User = url.UserPassword(user, password)
	return u.String()
}

// shown is what parseURL lets a user see of raw: the error, or the name.
func shown(raw string) string {
	ep, err := parseURL(raw)
	if err != nil {
		return err.Error()
	}
	return ep.name
}

// checkSecret checks that parseURL shows nothing of the password of raw:
// whatever it shows for raw contains the password only where it shows it as
// well for neutral, the same URL with another password (an error may quote a
// port, a host or a path that happens to equal the password).
func checkSecret(t *testing.T, raw, password, neutral string) {
	if password == "" {
		return
	}
	if s := shown(raw); strings.Contains(s, password) && !strings.Contains(shown(neutral), password) {
		t.Errorf("parseURL(%q) shows the password %q: %q", redact(raw), password, s)
	}
}

// hostName is what a host that is not an IP address may look like.
var hostName = regexp.MustCompile(`^[\p{L}\p{N}._-]+$`)

// checkParseURL checks parseURL(raw): it does not panic; an error wraps
// ErrInvalid and is one line; an accepted URL makes a sane endpoint, and the
// canonical URL built from that endpoint parses to the same endpoint.
func checkParseURL(t *testing.T, raw string) {
	ep, err := parseURL(raw)
	if err != nil {
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("parseURL(%q): error does not wrap ErrInvalid: %v", raw, err)
		}
		if strings.ContainsAny(err.Error(), "\r\n") {
			t.Errorf("parseURL(%q): error spans lines: %q", raw, err)
		}
		return
	}
	if ep.db < 0 {
		t.Errorf("parseURL(%q): negative database %d", raw, ep.db)
	}
	var canon url.URL
	switch ep.network {
	case "tcp":
		if _, err := netip.ParseAddr(ep.host); err != nil && !hostName.MatchString(ep.host) {
			t.Errorf("parseURL(%q): host %q is neither an IP address nor a name", raw, ep.host)
		}
		host, port, err := net.SplitHostPort(ep.addr)
		if err != nil {
			t.Fatalf("parseURL(%q): address %q is not host:port: %v", raw, ep.addr, err)
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			t.Errorf("parseURL(%q): bad port in %q", raw, ep.addr)
		}
		if host == "" || host != ep.host {
			t.Errorf("parseURL(%q): host %q, address %q", raw, ep.host, ep.addr)
		}
		canon = url.URL{Scheme: "redis", Host: ep.addr, Path: "/" + strconv.Itoa(ep.db)}
		if ep.tls {
			canon.Scheme = "rediss"
		}
		if ep.user != "" || ep.password != "" {
			canon.User = url.UserPassword(ep.user, ep.password)
		}
	case "unix":
		if !strings.HasPrefix(ep.addr, "/") || ep.tls || ep.host != "" {
			t.Errorf("parseURL(%q): odd unix endpoint %+v", raw, redacted(ep))
		}
		canon = url.URL{Scheme: "unix", Path: ep.addr, RawQuery: "db=" + strconv.Itoa(ep.db)}
		if ep.user != "" || ep.password != "" { // unix://user:password@/path: AUTH on the socket
			canon.User = url.UserPassword(ep.user, ep.password)
		}
	default:
		t.Fatalf("parseURL(%q): network %q", raw, ep.network)
	}
	again, err := parseURL(canon.String())
	if err != nil {
		t.Fatalf("parseURL(%q) = %+v, but its canonical URL %q fails: %v", raw, redacted(ep), redact(canon.String()), err)
	}
	again.name, ep.name = "", ""
	if again != ep {
		t.Errorf("parseURL(%q) = %+v; its canonical URL %q gives %+v", raw, redacted(ep), redact(canon.String()), redacted(again))
	}
}

// redacted hides an endpoint's password for messages.
func redacted(ep endpoint) endpoint {
	if ep.password != "" {
		ep.password = "xxxxx"
	}
	return ep
}

// FuzzOptions passes any lease, drift factor and node timeout through Dial
// on a fixed URL: it never panics, it accepts exactly the combinations the
// options document (lease > drift = lease*factor + 2ms, factor in [0, 0.5),
// 0 < timeout < lease/3), and it rejects the others with an error wrapping
// ErrInvalid that names an option.
func FuzzOptions(f *testing.F) {
	for _, s := range []struct {
		lease   time.Duration
		factor  float64
		timeout time.Duration
	}{
		{30 * time.Second, 0.01, 250 * time.Millisecond}, // the defaults
		{600 * time.Millisecond, 0.01, 50 * time.Millisecond},
		{3 * time.Second, 0.01, time.Second},          // timeout = lease/3
		{2 * time.Millisecond, 0, time.Nanosecond},    // lease = drift
		{3 * time.Millisecond, 0, time.Nanosecond},    // lease just above drift
		{time.Second, 0.4999, 100 * time.Millisecond}, // factor just below 0.5
		{time.Second, 0.5, 100 * time.Millisecond},    // factor 0.5
		{time.Second, -0.1, 100 * time.Millisecond},   // negative factor
		{0, 0.01, 0},                                      // zeros
		{-time.Second, 0.01, -time.Second},                // negatives
		{math.MaxInt64, 0.49, math.MaxInt64/3 - 1},        // huge
		{math.MaxInt64, 0.01, math.MaxInt64 / 3},          // huge, timeout = lease/3
		{time.Second, math.NaN(), 100 * time.Millisecond}, // NaN
		{time.Second, math.Inf(1), 100 * time.Millisecond},
	} {
		f.Add(int64(s.lease), s.factor, int64(s.timeout))
	}
	const url = "redis://127.0.0.1:1" // Dial does not contact it
	f.Fuzz(func(t *testing.T, leaseNs int64, factor float64, timeoutNs int64) {
		lease, timeout := time.Duration(leaseNs), time.Duration(timeoutNs)
		c, err := Dial([]string{url}, WithLease(lease), WithDriftFactor(factor), WithNodeTimeout(timeout))
		valid := lease > 0 && factor >= 0 && factor < 0.5 && timeout > 0 &&
			lease > time.Duration(float64(lease)*factor)+2*time.Millisecond &&
			timeout < lease/3
		if err != nil {
			if c != nil {
				t.Errorf("Dial returned a Client and an error")
				c.Close()
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Dial(lease %v, factor %v, timeout %v): error does not wrap ErrInvalid: %v", lease, factor, timeout, err)
			}
			if valid {
				t.Fatalf("Dial(lease %v, factor %v, timeout %v) rejects a valid combination: %v", lease, factor, timeout, err)
			}
			msg := err.Error()
			if !strings.Contains(msg, "WithLease") && !strings.Contains(msg, "WithDriftFactor") && !strings.Contains(msg, "WithNodeTimeout") {
				t.Errorf("Dial(lease %v, factor %v, timeout %v): the error names no option: %v", lease, factor, timeout, err)
			}
			return
		}
		defer c.Close()
		if !valid {
			t.Fatalf("Dial(lease %v, factor %v, timeout %v) accepts an invalid combination", lease, factor, timeout)
		}
		// The invariants the rest of the client relies on.
		if c.drift >= lease {
			t.Errorf("drift %v not below the lease %v", c.drift, lease)
		}
		if c.wd.period <= 0 || c.wd.period <= timeout {
			t.Errorf("renewal period %v not above the node timeout %v", c.wd.period, timeout)
		}
		if v := validity(lease, 0, c.drift); v <= 0 {
			t.Errorf("an instant acquisition would have no validity: %v", v)
		}
	})
}
