package redlock

import (
	"errors"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// endpoint is a parsed node URL.
type endpoint struct {
	network  string // "tcp" or "unix"
	addr     string // host:port or socket path
	user     string
	password string
	db       int
	tls      bool
	host     string // server name for TLS
	name     string // the URL without its password, for messages
}

// key identifies the server: two databases of one server are one master.
func (e endpoint) key() string { return e.network + "|" + e.addr }

// parseURL parses one node URL; errors wrap ErrInvalid and never echo a password.
func parseURL(raw string) (endpoint, error) {
	if !strings.Contains(raw, "://") {
		if _, port, err := net.SplitHostPort(raw); err == nil && port != "" {
			// "localhost:6379", "10.0.0.1:6379": an address, not a URL.
			return endpoint{}, invalid("node URL %q: an address, not a URL (did you mean %q?)", redact(raw), "redis://"+redact(raw))
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return endpoint{}, invalid("node URL %q: %v", redact(raw), errors.Unwrap(err))
	}
	ep := endpoint{name: redact(raw)}
	if u.User != nil {
		ep.user = u.User.Username()
		ep.password, _ = u.User.Password()
	}
	switch u.Scheme {
	case "redis", "rediss":
		err = ep.parseTCP(u)
	case "unix":
		ep.network = "unix"
		if u.Host != "" || u.Path == "" {
			err = invalid("node URL %q: want unix:///absolute/path/to/socket", ep.name)
		}
		ep.addr = u.Path
	case "":
		err = invalid("node URL %q: no scheme (want redis://, rediss:// or unix://)", ep.name)
	default:
		err = invalid("node URL %q: unknown scheme %q (want redis, rediss or unix)", ep.name, u.Scheme)
	}
	if err == nil {
		err = ep.parseQuery(u.Query())
	}
	if err != nil {
		return endpoint{}, err
	}
	return ep, nil
}

// parseTCP reads the host, port and database of a redis:// or rediss:// URL.
func (ep *endpoint) parseTCP(u *url.URL) error {
	ep.network = "tcp"
	ep.tls = u.Scheme == "rediss"
	if u.Opaque != "" || u.Host == "" {
		return invalid("node URL %q: no host (want %s://host:port)", ep.name, u.Scheme)
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		return invalid("node URL %q: no host", ep.name)
	}
	if strings.Contains(host, ":") && !strings.HasPrefix(u.Host, "[") || !validHost(host) {
		return invalid("node URL %q: bad host %q (an IPv6 address needs brackets: [::1]:6379)", ep.name, host)
	}
	if port == "" {
		if strings.HasSuffix(u.Host, ":") {
			return invalid("node URL %q: empty port", ep.name)
		}
		port = "6379"
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return invalid("node URL %q: bad port %q", ep.name, port)
	}
	ep.host = host
	ep.addr = net.JoinHostPort(host, port)
	if path := strings.TrimPrefix(u.Path, "/"); path != "" {
		db, err := strconv.Atoi(path)
		if err != nil || db < 0 {
			return invalid("node URL %q: bad database %q (want a number)", ep.name, path)
		}
		ep.db = db
	}
	return nil
}

// parseQuery reads the query parameters: db is the only one.
func (ep *endpoint) parseQuery(q url.Values) error {
	for k, v := range q {
		if k != "db" {
			return invalid("node URL %q: unknown parameter %q", ep.name, k)
		}
		db, err := strconv.Atoi(v[0])
		if err != nil || db < 0 || len(v) != 1 {
			return invalid("node URL %q: bad db parameter %q", ep.name, v[0])
		}
		ep.db = db
	}
	return nil
}

// redact hides the password of a URL for messages. When the URL does not
// parse into a user and password, everything before the last "@" (after a
// leading scheme) is hidden, whatever it is.
func redact(raw string) string {
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
