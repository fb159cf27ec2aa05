// Package nodeurl parses redlock's node URLs (redis://, rediss://,
// unix://) and hides their secrets for messages. Its errors are plain: the
// root package wraps them in ErrInvalid. It imports only the standard
// library.
package nodeurl

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// An Endpoint is a parsed node URL.
type Endpoint struct {
	Network  string // "tcp" or "unix"
	Addr     string // host:port or socket path
	User     string
	Password string
	DB       int
	TLS      bool
	Host     string // server name for TLS
	Name     string // the URL without its password, for messages
}

// Key identifies the server: two databases of one server are one master.
func (e Endpoint) Key() string { return e.Network + "|" + e.Addr }

// Parse parses one node URL, leading and trailing space trimmed; errors
// never echo a password, in the userinfo or in a query parameter.
func Parse(raw string) (Endpoint, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return Endpoint{}, errorf("empty node URL (want redis://host:port, rediss://host:port or unix:///path)")
	}
	if !strings.Contains(raw, "://") {
		if err := schemeHint(raw); err != nil {
			return Endpoint{}, err
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return Endpoint{}, errorf("node URL %q: %v", Redact(raw), errors.Unwrap(err))
	}
	ep := Endpoint{Name: Redact(raw)}
	if u.User != nil {
		ep.User = u.User.Username()
		ep.Password, _ = u.User.Password()
	}
	switch u.Scheme {
	case "redis", "rediss":
		err = ep.parseTCP(u)
	case "unix":
		ep.Network = "unix"
		if u.Host != "" || u.Path == "" {
			err = errorf("node URL %q: want unix:///absolute/path/to/socket", ep.Name)
		}
		ep.Addr = u.Path
	case "":
		err = errorf("node URL %q: no scheme (want redis://, rediss:// or unix://)", ep.Name)
	default:
		err = errorf("node URL %q: unknown scheme %q (want redis, rediss or unix)", ep.Name, u.Scheme)
	}
	if err == nil {
		err = ep.parseQuery(u.Query())
	}
	if err != nil {
		return Endpoint{}, err
	}
	return ep, nil
}

// schemeHint returns an error with the URL raw probably meant when raw,
// which has no "://", is an address ("localhost:6379", "[::1]:6379") or
// one of our schemes with a malformed separator ("redis//host:6379",
// "redis:/host:6379", "unix:/tmp/redis.sock"); nil otherwise, for Parse
// to say what is wrong.
func schemeHint(raw string) error {
	if host, port, err := net.SplitHostPort(raw); err == nil && port != "" && !strings.Contains(port, "/") {
		if at := strings.LastIndex(host, "@"); at >= 0 {
			host = host[at+1:] // "alice@localhost:6379": the user is not the host
		}
		if validHost(host) {
			return errorf("node URL %q: an address, not a URL (did you mean %q?)", Redact(raw), "redis://"+Redact(raw))
		}
	}
	m := schemeTypo.FindStringSubmatch(raw)
	if m == nil {
		return nil
	}
	scheme, rest := strings.ToLower(m[1]), m[2]
	meant := scheme + "://" + rest
	if scheme == "unix" {
		meant = "unix:///" + rest
	}
	return errorf("node URL %q: %s is not followed by \"://\" (did you mean %q?)", Redact(raw), scheme, Redact(meant))
}

// schemeTypo matches one of our schemes followed by a separator other than
// "://" (a string that has "://" never gets here): a colon and fewer or
// more slashes, or slashes without the colon. It captures the scheme and
// the rest, leading slashes removed.
var schemeTypo = regexp.MustCompile(`^(?i)(rediss?|unix)(?::/*|/+)([^/].*)$`)

// parseTCP reads the host, port and database of a redis:// or rediss:// URL.
func (ep *Endpoint) parseTCP(u *url.URL) error {
	ep.Network = "tcp"
	ep.TLS = u.Scheme == "rediss"
	if u.Opaque != "" || u.Host == "" {
		return errorf("node URL %q: no host (want %s://host:port)", ep.Name, u.Scheme)
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		return errorf("node URL %q: no host", ep.Name)
	}
	if strings.Contains(host, ":") && !strings.HasPrefix(u.Host, "[") || !validHost(host) {
		return errorf("node URL %q: bad host %q (an IPv6 address needs brackets: [::1]:6379)", ep.Name, host)
	}
	if port == "" {
		if strings.HasSuffix(u.Host, ":") {
			return errorf("node URL %q: empty port", ep.Name)
		}
		port = "6379"
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return errorf("node URL %q: bad port %q", ep.Name, port)
	}
	ep.Host = host
	ep.Addr = net.JoinHostPort(host, port)
	if path := strings.TrimPrefix(u.Path, "/"); path != "" {
		db, err := strconv.Atoi(path)
		if err != nil || db < 0 {
			return errorf("node URL %q: bad database %q (want a number)", ep.Name, path)
		}
		ep.DB = db
	}
	return nil
}

// parseQuery reads the query parameters: db is the only one. It reads
// them in the order of their names, so that one URL always gets one error.
func (ep *Endpoint) parseQuery(q url.Values) error {
	names := make([]string, 0, len(q))
	for k := range q {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		v := q[k]
		if secretParam(k) {
			return errorf("node URL %q: parameter %q: a password goes in the URL's userinfo (redis://user:password@host:port)", ep.Name, k)
		}
		if k != "db" {
			return errorf("node URL %q: unknown parameter %q", ep.Name, k)
		}
		db, err := strconv.Atoi(v[0])
		if err != nil || db < 0 || len(v) != 1 {
			return errorf("node URL %q: bad db parameter %q", ep.Name, v[0])
		}
		ep.DB = db
	}
	return nil
}

// Redact hides the password of a URL for messages, and the value of every
// query parameter that may hold a secret (see secretParam). When the URL
// does not parse into a user and password, everything before the last "@"
// (after a leading scheme) is hidden, whatever it is.
func Redact(raw string) string {
	return redactQuery(redactUser(raw))
}

// redactUser hides the userinfo's password of a URL, as Redact says.
func redactUser(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.User != nil && u.Scheme != "" && u.Opaque == "" {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		return u.String()
	}
	at := strings.LastIndex(raw, "@")
	if at < 0 {
		return raw
	}
	prefix := ""
	if m := urlSchemePrefix.FindString(raw[:at]); m != "" {
		prefix = m
	}
	return prefix + "xxxxx" + raw[at:]
}

// redactQuery hides, in what follows the first "?" of a URL, the value of
// each parameter whose name may hold a secret. It reads the parameters as
// text, so that a query that does not parse is hidden as well; a value runs
// to the next "&" or ";", a fragment included.
func redactQuery(raw string) string {
	q := strings.IndexByte(raw, '?')
	if q < 0 {
		return raw
	}
	params := strings.FieldsFunc(raw[q+1:], func(r rune) bool { return r == '&' || r == ';' })
	var b strings.Builder
	b.WriteString(raw[:q+1])
	rest := raw[q+1:]
	for _, p := range params {
		i := strings.Index(rest, p) // rest begins with separators, then p
		b.WriteString(rest[:i])
		rest = rest[i+len(p):]
		if k, _, hasValue := strings.Cut(p, "="); hasValue && secretParam(k) {
			p = k + "=xxxxx"
		}
		b.WriteString(p)
	}
	b.WriteString(rest)
	return b.String()
}

// secretParam reports whether a query parameter named name (escaped or
// not, in any case) may hold a secret: password, pass, pwd, secret, token
// or auth in its name.
func secretParam(name string) bool {
	if k, err := url.QueryUnescape(name); err == nil {
		name = k
	}
	name = strings.ToLower(name)
	for _, s := range []string{"pass", "pwd", "secret", "token", "auth"} {
		if strings.Contains(name, s) {
			return true
		}
	}
	return false
}

// urlSchemePrefix matches a URL scheme and "//" at the start of a string.
var urlSchemePrefix = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://`)

// validHost reports whether host (brackets removed) is an IP address or a
// DNS name: letters, digits, '-', '_' and '.'.
func validHost(host string) bool {
	if net.ParseIP(host) != nil {
		return true
	}
	if host == "" {
		return false
	}
	for _, r := range host {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

// errorf is an error of a node URL: the root package wraps it in
// ErrInvalid.
func errorf(format string, args ...any) error {
	return errors.New(fmt.Sprintf(format, args...))
}
