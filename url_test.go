package redlock

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/nodeurl"
	"github.com/redlock-go/redlock/redlocktest"
)

// Node URLs (url.go): what parseURL accepts and what it rejects, as Dial
// does, and that neither a node's name nor an error ever shows a password.
// FuzzParseURL explores beyond the tables: `go test` runs its seeds
// (testdata/fuzz/FuzzParseURL and the f.Add calls), `make fuzz` explores
// for $(FUZZTIME).

func TestUnitParseURL(t *testing.T) {
	tests := []struct {
		raw  string
		want nodeurl.Endpoint
	}{
		{"redis://127.0.0.1:6380", nodeurl.Endpoint{Network: "tcp", Addr: "127.0.0.1:6380", Host: "127.0.0.1", Name: "redis://127.0.0.1:6380"}},
		{"redis://localhost", nodeurl.Endpoint{Network: "tcp", Addr: "localhost:6379", Host: "localhost", Name: "redis://localhost"}},
		{"redis://localhost:6379/2", nodeurl.Endpoint{Network: "tcp", Addr: "localhost:6379", Host: "localhost", DB: 2, Name: "redis://localhost:6379/2"}},
		{"redis://localhost/3", nodeurl.Endpoint{Network: "tcp", Addr: "localhost:6379", Host: "localhost", DB: 3, Name: "redis://localhost/3"}},
		{"redis://localhost:6379/", nodeurl.Endpoint{Network: "tcp", Addr: "localhost:6379", Host: "localhost", Name: "redis://localhost:6379/"}},
		{"redis://h:65535/15", nodeurl.Endpoint{Network: "tcp", Addr: "h:65535", Host: "h", DB: 15, Name: "redis://h:65535/15"}},
		{"redis://[::1]:7000", nodeurl.Endpoint{Network: "tcp", Addr: "[::1]:7000", Host: "::1", Name: "redis://[::1]:7000"}},
		{"redis://alice:s3cret@db1.example:7000/1", nodeurl.Endpoint{
			Network: "tcp", Addr: "db1.example:7000", Host: "db1.example", User: "alice", Password: "s3cret", DB: 1,
			Name: "redis://alice:xxxxx@db1.example:7000/1"}},
		{"redis://:s3cret@h:1", nodeurl.Endpoint{Network: "tcp", Addr: "h:1", Host: "h", Password: "s3cret", Name: "redis://:xxxxx@h:1"}},
		{"redis://bob@h:1", nodeurl.Endpoint{Network: "tcp", Addr: "h:1", Host: "h", User: "bob", Name: "redis://bob@h:1"}},
		{"redis://alice:p@ss@h:1", nodeurl.Endpoint{Network: "tcp", Addr: "h:1", Host: "h", User: "alice", Password: "p@ss", Name: "redis://alice:xxxxx@h:1"}},
		{"rediss://cache.example:6380", nodeurl.Endpoint{Network: "tcp", Addr: "cache.example:6380", Host: "cache.example", TLS: true, Name: "rediss://cache.example:6380"}},
		{"rediss://u:s3cret@cache.example", nodeurl.Endpoint{
			Network: "tcp", Addr: "cache.example:6379", Host: "cache.example", TLS: true, User: "u", Password: "s3cret",
			Name: "rediss://u:xxxxx@cache.example"}},
		{"unix:///tmp/redis.sock", nodeurl.Endpoint{Network: "unix", Addr: "/tmp/redis.sock", Name: "unix:///tmp/redis.sock"}},
		{"unix:///tmp/redis.sock?db=3", nodeurl.Endpoint{Network: "unix", Addr: "/tmp/redis.sock", DB: 3, Name: "unix:///tmp/redis.sock?db=3"}},
		// Leading and trailing space is trimmed (issue 24, point 5), as the CLI does.
		{" redis://localhost:6379", nodeurl.Endpoint{Network: "tcp", Addr: "localhost:6379", Host: "localhost", Name: "redis://localhost:6379"}},
		{"redis://localhost:6379/1 ", nodeurl.Endpoint{Network: "tcp", Addr: "localhost:6379", Host: "localhost", DB: 1, Name: "redis://localhost:6379/1"}},
		{"\t unix:///tmp/redis.sock\n", nodeurl.Endpoint{Network: "unix", Addr: "/tmp/redis.sock", Name: "unix:///tmp/redis.sock"}},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			var (
				ep  nodeurl.Endpoint
				err error
			)
			unitNoPanic(t, func() { ep, err = parseURL(tt.raw) })
			require.NoError(t, err)
			assert.Equal(t, tt.want, ep)
			if tt.want.Password != "" {
				assert.NotContains(t, ep.Name, tt.want.Password, "the name must not show the password")
			}
		})
	}
}

func TestUnitParseURLInvalid(t *testing.T) {
	const secret = "s3cret"
	tests := []struct{ name, raw string }{
		{"empty", ""},
		{"blank", " "},
		{"no scheme, host only", "localhost"},
		{"no scheme, host and port", "127.0.0.1:6379"},
		{"no scheme, authority", "//localhost:6379"},
		{"unknown scheme", "http://localhost:6379"},
		{"unknown scheme tcp", "tcp://localhost:6379"},
		{"port 0", "redis://localhost:0"},
		{"port 70000", "redis://localhost:70000"},
		{"port negative", "redis://localhost:-1"},
		{"port letters", "redis://localhost:abc"},
		{"port empty", "redis://localhost:"},
		{"no host", "redis://"},
		{"no host, port only", "redis://:6379"},
		{"no host, path only", "redis:///0"},
		{"opaque", "redis:localhost:6379"},
		{"db negative", "redis://localhost:6379/-1"},
		{"db letters", "redis://localhost:6379/x"},
		{"db nested path", "redis://localhost:6379/1/2"},
		{"db query letters", "unix:///tmp/redis.sock?db=x"},
		{"db query negative", "unix:///tmp/redis.sock?db=-1"},
		{"db query empty", "unix:///tmp/redis.sock?db="},
		{"db query twice", "unix:///tmp/redis.sock?db=1&db=2"},
		{"unknown parameter", "redis://localhost:6379?timeout=1s"},
		{"unknown parameter unix", "unix:///tmp/redis.sock?foo=bar"},
		{"unix with host", "unix://localhost/tmp/redis.sock"},
		{"unix without path", "unix://"},
		{"unix opaque", "unix:tmp/redis.sock"},
		{"garbage ipv6", "redis://[::1"},
		{"bad escape", "redis://localhost:6379/%zz"},
		{"control character", "redis://local\x00host:6379"},
		{"password, bad port", "redis://alice:" + secret + "@localhost:0"},
		{"password, port letters", "redis://alice:" + secret + "@localhost:abc"},
		{"password, unknown parameter", "redis://alice:" + secret + "@localhost?x=1"},
		{"password, garbage", "redis://alice:" + secret + "@[::1"},
		{"password, unix host", "unix://alice:" + secret + "@host/tmp/redis.sock"},
		{"password with @, bad port", "redis://alice:p@" + secret + "@localhost:abc"},
		// A password as a query parameter (issue 24, point 5): refused, and hidden.
		{"password parameter", "redis://localhost:6379?password=" + secret},
		{"password parameter, any case", "redis://localhost:6379?db=1&PassWord=" + secret},
		{"password parameter, escaped name", "redis://localhost:6379?pass%77ord=" + secret},
		{"password parameter, after another", "redis://localhost:6379?timeout=1s&password=" + secret},
		{"password parameter, bad escape", "redis://localhost:6379?x=1&password=" + secret + "%zz"},
		{"password parameter, bad port", "redis://localhost:0?password=" + secret},
		{"password parameter, fragment", "redis://localhost:6379?password=" + secret + "#f"},
		{"password parameter, unix", "unix:///tmp/redis.sock?password=" + secret},
		{"password parameter, garbage", "redis://[::1?password=" + secret},
		{"password parameter, no scheme", "localhost:6379?password=" + secret},
		{"password parameter, scheme typo", "redis//localhost:6379?password=" + secret},
		{"token parameter", "rediss://localhost:6379?token=" + secret},
		{"password twice", "redis://alice:" + secret + "@localhost:6379?password=" + secret},
		{"space only", " \t\n"},
		{"scheme typo", "redis//localhost:6379"},
		{"scheme typo, password", "redis//alice:" + secret + "@localhost:6379"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			unitNoPanic(t, func() { _, err = parseURL(tt.raw) })
			require.ErrorIs(t, err, ErrInvalid)
			assert.NotContains(t, err.Error(), secret, "the error must not show the password")
			assert.NotContains(t, err.Error(), "\n")
		})
	}
}

func TestUnitRedact(t *testing.T) {
	tests := []struct{ raw, want string }{
		{"redis://localhost:6379", "redis://localhost:6379"},
		{"redis://alice@localhost:6379", "redis://alice@localhost:6379"},
		{"redis://alice:s3cret@localhost:6379/2", "redis://alice:xxxxx@localhost:6379/2"},
		{"redis://:s3cret@localhost", "redis://:xxxxx@localhost"},
		{"rediss://alice:s3cret@localhost", "rediss://alice:xxxxx@localhost"},
		{"redis://alice:s3cret@[::1", "redis://xxxxx@[::1"}, // unparsable
		{"", ""},
		{"localhost:6379", "localhost:6379"},
		{"redis://h:1?password=s3cret", "redis://h:1?password=xxxxx"},
		{"redis://h:1?db=2&password=s3cret&x=y", "redis://h:1?db=2&password=xxxxx&x=y"},
		{"redis://h:1?;Password=s3cret;;db=2", "redis://h:1?;Password=xxxxx;;db=2"},
		{"redis://h:1?auth_token=s3cret", "redis://h:1?auth_token=xxxxx"},
		{"redis://h:1?password=s3cret#frag", "redis://h:1?password=xxxxx"},
		{"redis://h:1?password", "redis://h:1?password"},
		{"redis://h:1?db=2", "redis://h:1?db=2"},
		{"redis://alice:s3cret@h:1?password=s3cret", "redis://alice:xxxxx@h:1?password=xxxxx"},
		{"redis://alice:s3cret@[::1?password=s3cret", "redis://xxxxx@[::1?password=xxxxx"},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			var got string
			unitNoPanic(t, func() { got = nodeurl.Redact(tt.raw) })
			assert.Equal(t, tt.want, got)
			assert.NotContains(t, got, "s3cret")
		})
	}
}

// TestRegressionDialErrorHidesPasswordWithoutScheme: Dial's errors wrap
// ErrInvalid and never echo a password, also when the password cannot be
// found by parsing the URL: "alice:s3cret@localhost:6379" parses as scheme
// "alice" with an opaque part (no userinfo), ":s3cret@localhost:6379" does
// not parse and has no "://", and in "//:s3cret@h%zz#x://y@z" the first
// "://" comes after the password. The seeds regression-no-scheme-password
// and regression-schemeless-authority of FuzzParseURL are of this kind.
func TestRegressionDialErrorHidesPasswordWithoutScheme(t *testing.T) {
	for _, raw := range []string{
		"alice:s3cret@localhost:6379",
		":s3cret@localhost:6379",
		"//alice:s3cret@local%zzhost:6379",
		"//:s3cret@h%zz#x://y@z",
	} {
		t.Run(raw, func(t *testing.T) {
			c, err := Dial([]string{raw})
			if c != nil {
				c.Close()
			}
			require.ErrorIs(t, err, ErrInvalid)
			assert.NotContains(t, err.Error(), "s3cret")
		})
	}
}

// TestRegressionDialRejectsBadHosts: Dial documents that a bad URL returns
// an error wrapping ErrInvalid, so a host no connection can be made to must
// be rejected there, not show up at the first connection as a no-quorum
// error. "redis://::1" is an IPv6 address without brackets, which url.Parse
// splits into host ":" and port "1" (the address would be "[:]:1");
// "redis://]0" would make the address "]0:6379". The seeds
// regression-ipv6-without-brackets and regression-bracket-host of
// FuzzParseURL are the same inputs.
func TestRegressionDialRejectsBadHosts(t *testing.T) {
	for _, raw := range []string{"redis://::1", "redis://]0", "redis://h:1@]0:6379"} {
		t.Run(raw, func(t *testing.T) {
			c, err := Dial([]string{raw})
			if c != nil {
				c.Close()
			}
			assert.ErrorIs(t, err, ErrInvalid, "Dial(%q) accepted", raw)
		})
	}
}

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
		// The same URL with a password of the fuzzer's choosing, in the
		// userinfo and as a query parameter.
		withIt := withPassword(*u, user, password)
		checkParseURL(t, withIt)
		checkSecret(t, withIt, password, withPassword(*u, user, "N3utr4l"))
		inQuery := withParam(*u, password)
		checkParseURL(t, inQuery)
		checkSecret(t, inQuery, password, withParam(*u, "N3utr4l"))
	})
}

// withParam is u with a password parameter added to its query.
func withParam(u url.URL, password string) string {
	q := u.Query()
	q.Add("password", password)
	u.RawQuery = q.Encode()
	return u.String()
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
	return ep.Name
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
		t.Errorf("parseURL(%q) shows the password %q: %q", nodeurl.Redact(raw), password, s)
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
	if ep.DB < 0 {
		t.Errorf("parseURL(%q): negative database %d", raw, ep.DB)
	}
	var canon url.URL
	switch ep.Network {
	case "tcp":
		if _, err := netip.ParseAddr(ep.Host); err != nil && !hostName.MatchString(ep.Host) {
			t.Errorf("parseURL(%q): host %q is neither an IP address nor a name", raw, ep.Host)
		}
		host, port, err := net.SplitHostPort(ep.Addr)
		if err != nil {
			t.Fatalf("parseURL(%q): address %q is not host:port: %v", raw, ep.Addr, err)
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			t.Errorf("parseURL(%q): bad port in %q", raw, ep.Addr)
		}
		if host == "" || host != ep.Host {
			t.Errorf("parseURL(%q): host %q, address %q", raw, ep.Host, ep.Addr)
		}
		canon = url.URL{Scheme: "redis", Host: ep.Addr, Path: "/" + strconv.Itoa(ep.DB)}
		if ep.TLS {
			canon.Scheme = "rediss"
		}
		if ep.User != "" || ep.Password != "" {
			canon.User = url.UserPassword(ep.User, ep.Password)
		}
	case "unix":
		if !strings.HasPrefix(ep.Addr, "/") || ep.TLS || ep.Host != "" {
			t.Errorf("parseURL(%q): odd unix endpoint %+v", raw, redacted(ep))
		}
		canon = url.URL{Scheme: "unix", Path: ep.Addr, RawQuery: "db=" + strconv.Itoa(ep.DB)}
		if ep.User != "" || ep.Password != "" { // unix://user:password@/path: AUTH on the socket
			canon.User = url.UserPassword(ep.User, ep.Password)
		}
	default:
		t.Fatalf("parseURL(%q): network %q", raw, ep.Network)
	}
	again, err := parseURL(canon.String())
	if err != nil {
		t.Fatalf("parseURL(%q) = %+v, but its canonical URL %q fails: %v", raw, redacted(ep), nodeurl.Redact(canon.String()), err)
	}
	again.Name, ep.Name = "", ""
	if again != ep {
		t.Errorf("parseURL(%q) = %+v; its canonical URL %q gives %+v", raw, redacted(ep), nodeurl.Redact(canon.String()), redacted(again))
	}
}

// redacted hides an endpoint's password for messages.
func redacted(ep nodeurl.Endpoint) nodeurl.Endpoint {
	if ep.Password != "" {
		ep.Password = "xxxxx"
	}
	return ep
}

// TestUnitParseURLSuggestsScheme: an address given where a URL is wanted
// gets the URL it probably meant, not "unknown scheme" (issue 13, point 6).
func TestUnitParseURLSuggestsScheme(t *testing.T) {
	tests := []struct{ raw, want string }{
		{"localhost:6379", `node URL "localhost:6379": an address, not a URL (did you mean "redis://localhost:6379"?)`},
		{"127.0.0.1:6380", `did you mean "redis://127.0.0.1:6380"?`},
		{"[::1]:6379", `did you mean "redis://[::1]:6379"?`},
		{"alice@localhost:6379", `did you mean "redis://xxxxx@localhost:6379"?`},
		{"redis:6379", `did you mean "redis://redis:6379"?`}, // a host called redis
		{" localhost:6379 ", `did you mean "redis://localhost:6379"?`},
		// A scheme with a malformed separator (issue 24, point 5): the
		// hint mends the separator, never puts a second scheme in front.
		{"redis//localhost:6379", `node URL "redis//localhost:6379": redis is not followed by "://" (did you mean "redis://localhost:6379"?)`},
		{"redis:/localhost:6379/2", `did you mean "redis://localhost:6379/2"?`},
		{"redis:localhost:6379", `did you mean "redis://localhost:6379"?`},
		{"redis/localhost:6379", `did you mean "redis://localhost:6379"?`},
		{"Rediss//cache.example:6380", `did you mean "rediss://cache.example:6380"?`},
		{"unix:/tmp/redis.sock", `did you mean "unix:///tmp/redis.sock"?`},
		{"unix//tmp/redis.sock", `did you mean "unix:///tmp/redis.sock"?`},
		{"redis//alice:s3cret@localhost:6379", `did you mean "redis://alice:xxxxx@localhost:6379"?`},
		{"redis//localhost:6379?password=s3cret", `did you mean "redis://localhost:6379?password=xxxxx"?`},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			_, err := parseURL(tt.raw)
			require.ErrorIs(t, err, ErrInvalid)
			assert.Contains(t, err.Error(), tt.want)
			assert.NotContains(t, err.Error(), "unknown scheme")
			assert.NotContains(t, err.Error(), "s3cret")
			assert.Equal(t, 1, strings.Count(err.Error(), "did you mean"), "one hint")
			assert.NotRegexp(t, `"(redis|rediss|unix)://(redis|rediss|unix)(:\D|/)`, err.Error(), "a doubled scheme")
		})
	}
}

// TestUnitParseURLNoSchemeHint: a URL whose scheme is there, or that is no
// address, gets no "did you mean" (issue 24, point 5): the hint is for a
// missing or malformed scheme only.
func TestUnitParseURLNoSchemeHint(t *testing.T) {
	for _, raw := range []string{
		"http://localhost:6379",
		"redis:///0",
		"redis://localhost:abc",
		"redis://localhost:6379?timeout=1s",
		"redis//",
		"localhost",
		"http//localhost:6379",
		"",
		"   ",
	} {
		t.Run(raw, func(t *testing.T) {
			_, err := parseURL(raw)
			require.ErrorIs(t, err, ErrInvalid)
			assert.NotContains(t, err.Error(), "did you mean")
		})
	}
}

// TestTLSHandshakeWithPlainServer: a rediss:// URL pointed at a plain-text
// redis-server says, in the errors of Ping and of a lock call, that the TLS
// handshake failed and asks whether the port serves TLS (issue 24, point
// 5), where Ping said only "no reply within 250ms". The handshake is bound
// by the set-up timeout and ended by Close: redigo's own handshake waited
// 10s, and Close with it.
func TestTLSHandshakeWithPlainServer(t *testing.T) {
	cl := redlocktest.Start(t, 1)
	addr := cl.Addrs()[0]
	c, err := Dial([]string{"rediss://" + addr}) // default set-up timeout: 2s
	require.NoError(t, err)
	defer c.Close()
	want := "TLS handshake with " + addr + " failed: is the server serving TLS on this port?"
	ctx := context.Background()
	// The first Ping, right after Dial, waits for the handshake under way
	// and says what a Lock would (issue 35: it said "no reply within
	// 250ms; not connected: connecting").
	last := c.Ping(ctx)
	require.Error(t, last)
	assert.Contains(t, last.Error(), want)
	require.ErrorIs(t, last, ErrNoQuorum)
	_, err = c.NewMutex("tls").TryLock(ctx, 0, 0)
	require.ErrorIs(t, err, ErrNoQuorum)
	assert.Contains(t, err.Error(), want)

	// Ping's wait for the connections being set up is bounded by its ctx.
	c2, err := Dial([]string{"rediss://" + addr})
	require.NoError(t, err)
	defer c2.Close()
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	require.ErrorIs(t, c2.Ping(short), context.DeadlineExceeded)
	assert.Less(t, time.Since(start), time.Second, "Ping waited past its ctx")

	start = time.Now()
	require.NoError(t, c.Close()) // with a handshake most likely under way
	assert.Less(t, time.Since(start), time.Second, "Close waited for a TLS handshake")
}
